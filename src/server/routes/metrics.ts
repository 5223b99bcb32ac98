// GET /metrics in the Prometheus text format.
import type { FastifyPluginAsync } from "fastify";

export const metricsRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.get("/metrics", async (_req, reply) => {
    for (const m of ctx.catalogue.all()) ctx.metrics.modelReady.set({ model: m.name }, m.ready ? 1 : 0);
    const counts = await ctx.jobs.counts().catch(() => undefined);
    if (counts) for (const [status, n] of Object.entries(counts)) ctx.metrics.jobs.set({ status }, n);
    reply.type(ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });
};
