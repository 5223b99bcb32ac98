// Per-key limits on every request but the probes (tenants/key-limits.ts): the RateLimit headers
// on each answer, 429 MP_ERR_RATE_LIMITED with Retry-After over a limit, the concurrency slot
// held until the response ends however it ends, and a language-model request's tokens taken
// from its key's tokens-per-minute bucket once they are known. A language-model route says so
// itself (`config: { language: true }` where it is declared): the route the request matched
// decides, never its URL, which the router decodes (`/v1/%63ompletions` reaches /v1/completions).
import type { FastifyInstance } from "fastify";
import { type KeyLimiter, refusalHeaders } from "../../tenants/key-limits.js";

declare module "fastify" {
  interface FastifyContextConfig {
    /** A language-model route (chat, completions, embeddings): its key's tokens per minute apply. */
    language?: boolean;
  }
}

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
    const language = request.routeOptions.config?.language === true;
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
