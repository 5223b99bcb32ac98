// GET /metrics in the Prometheus text format. On a server with keys a client key reads only its
// own series (tenants/visibility.ts: its key's, and its models'); admin and metrics keys, and
// every caller of a server without keys, read the whole registry as it renders itself.
import type { FastifyPluginAsync } from "fastify";
import { filteredExposition } from "../../metrics/exposition.js";
import { visibleSeries } from "../../tenants/visibility.js";

export const metricsRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.get("/metrics", async (req, reply) => {
    for (const m of ctx.catalogue.all()) ctx.metrics.modelReady.set({ model: m.name }, m.ready ? 1 : 0);
    const counts = await ctx.jobs.counts().catch(() => undefined);
    if (counts) for (const [status, n] of Object.entries(counts)) ctx.metrics.jobs.set({ status }, n);
    reply.type(ctx.metrics.registry.contentType);
    const keep = visibleSeries(req.principal, ctx.tenants.required);
    return keep ? filteredExposition(ctx.metrics.registry, keep) : ctx.metrics.registry.metrics();
  });
};
