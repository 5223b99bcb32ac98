// Optional API-key auth: `Authorization: Bearer <key>` on every route except the probes,
// compared in constant time.
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { ModelportError } from "../../errors.js";

export const PROBE_PATHS = new Set(["/livez", "/readyz", "/v2/health/live", "/v2/health/ready"]);

const digest = (s: string) => createHash("sha256").update(s).digest();

export function registerAuth(app: FastifyInstance, keys: readonly string[]): void {
  if (keys.length === 0) return;
  const digests = keys.map(digest);
  app.addHook("onRequest", async (request) => {
    if (PROBE_PATHS.has(request.url.split("?")[0]!)) return;
    const header = request.headers.authorization;
    if (!header) {
      throw new ModelportError(
        "MP_ERR_AUTH_REQUIRED",
        "this server needs an API key: send Authorization: Bearer <key>",
      );
    }
    const match = /^Bearer\s+(.+)$/i.exec(header);
    const given = match ? digest(match[1]!.trim()) : undefined;
    if (!given || !digests.some((d) => timingSafeEqual(d, given))) {
      throw new ModelportError(
        "MP_ERR_AUTH_INVALID",
        "the API key is not valid; check the Authorization: Bearer header",
      );
    }
  });
}
