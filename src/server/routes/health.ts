// Probes: /livez (the process answers), /readyz (every model, tensor and language, loaded and
// golden-checked, not draining) and the Open Inference Protocol's /v2/health/live and /v2/health/ready.
import type { FastifyInstance } from "fastify";
import type { AppContext } from "../context.js";

export function healthRoutes(app: FastifyInstance, ctx: AppContext): void {
  const readiness = () => {
    const tensor = ctx.registry.readiness();
    const language = ctx.languageModels.readiness();
    const r = {
      ready: tensor.ready && language.ready,
      reasons: [...tensor.reasons, ...language.reasons],
      models: { ...tensor.models, ...language.models },
    };
    if (ctx.draining) return { ...r, ready: false, reasons: ["server is shutting down", ...r.reasons] };
    return r;
  };

  app.get("/livez", async () => ({ live: true }));

  app.get("/readyz", async (_req, reply) => {
    const r = readiness();
    reply.code(r.ready ? 200 : 503);
    return r;
  });

  app.get("/v2/health/live", async () => ({ live: true }));

  app.get("/v2/health/ready", async (_req, reply) => {
    const r = readiness();
    reply.code(r.ready ? 200 : 503);
    return { ready: r.ready };
  });
}
