// limits.maxBodyBytesInFlight on HTTP (src/body-budget.ts). Each request with a body reserves its
// Content-Length (limits.maxBodyBytes when it gives none: a chunked body may grow to that) from the
// moment it is let in until its response has ended, however it ends; so clients together cannot
// make the server hold more than the budget in bodies, whatever maxConnections allows. Over the
// budget: 503 MP_ERR_SERVER_BUSY with Retry-After, before the body is read. Registered after auth:
// a refused key reserves nothing.
import type { FastifyInstance } from "fastify";
import type { BodyBudget } from "../../body-budget.js";

export function registerBodyBudget(app: FastifyInstance, budget: BodyBudget, maxBodyBytes: number): void {
  app.addHook("onRequest", (request, reply, done) => {
    const length = request.headers["content-length"];
    const bytes =
      length !== undefined
        ? Math.min(Number(length), maxBodyBytes)
        : request.headers["transfer-encoding"] !== undefined
          ? maxBodyBytes
          : 0;
    if (!(bytes > 0)) {
      done();
      return;
    }
    let release: () => void;
    try {
      release = budget.reserve(bytes);
    } catch (err) {
      done(err as Error);
      return;
    }
    // `on`: a response emits "close" once (app.ts says why not `once`).
    reply.raw.on("close", release);
    done();
  });
}
