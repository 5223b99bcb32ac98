// Optional API-key auth: `Authorization: Bearer <key>` on every route except the probes
// (the check itself is protocol/api-keys.ts, shared with the gRPC surface).
import type { FastifyInstance } from "fastify";
import { ApiKeys } from "../../protocol/api-keys.js";

export const PROBE_PATHS = new Set(["/livez", "/readyz", "/v2/health/live", "/v2/health/ready"]);

export function registerAuth(app: FastifyInstance, keys: readonly string[]): void {
  const apiKeys = new ApiKeys(keys);
  if (!apiKeys.required) return;
  app.addHook("onRequest", async (request) => {
    if (PROBE_PATHS.has(request.url.split("?")[0]!)) return;
    apiKeys.check(request.headers.authorization);
  });
}
