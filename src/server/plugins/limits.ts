// Per-key limits on every request but the probes (tenants/key-limits.ts): the RateLimit headers
// on each answer, 429 MP_ERR_RATE_LIMITED with Retry-After over a limit, the concurrency slot
// held until the response ends however it ends, and a language-model request's tokens taken
// from its key's tokens-per-minute bucket once they are known.
import type { FastifyInstance } from "fastify";
import { urlPath } from "../../protocol/url-path.js";
import { type KeyLimiter, refusalHeaders } from "../../tenants/key-limits.js";

const LANGUAGE_ROUTES = new Set(["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]);

export function registerLimits(app: FastifyInstance, limiter: KeyLimiter): void {
  // A callback hook: a key without limits (and every request where there are no keys) passes
  // without a promise or a microtask turn; only an admission waits.
  app.addHook("onRequest", (request, reply, done) => {
    const principal = request.principal;
    // Probes carry no principal; keys without limits pay one property check.
    if (!principal?.limitsSet) {
      done();
      return;
    }
    const language = LANGUAGE_ROUTES.has(urlPath(request.url));
    limiter.admit(principal, language).then(
      (admission) => {
        reply.headers(admission.headers);
        reply.raw.on("close", admission.release);
        done();
      },
      (err: unknown) => {
        const headers = refusalHeaders(err);
        if (headers) reply.headers(headers);
        done(err as Error);
      },
    );
  });
  app.addHook("onResponse", (request, _reply, done) => {
    const used = request.usage;
    if (used && request.principal?.limits.tokensPerMinute)
      limiter.charge(request.principal, used.promptTokens + used.completionTokens);
    done();
  });
}
