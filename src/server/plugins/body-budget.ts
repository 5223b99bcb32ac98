// A server-wide budget for request bodies held at once (limits.maxBodyBytesInFlight). Each
// request with a body reserves its Content-Length (limits.maxBodyBytes when it gives none: a
// chunked body may grow to that) from the moment it is let in until its response has ended,
// however it ends; so clients together cannot make the server hold more than the budget in
// bodies, whatever maxConnections allows. Over the budget: 503 MP_ERR_SERVER_BUSY with
// Retry-After, before the body is read. Registered after auth: a refused key reserves nothing.
import type { FastifyInstance } from "fastify";
import { ModelportError } from "../../errors.js";

/** Registers the budget; returns the bytes reserved now, for tests. */
export function registerBodyBudget(app: FastifyInstance, budget: number, maxBodyBytes: number): () => number {
  let held = 0;
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
    if (held + bytes > budget) {
      done(
        new ModelportError(
          "MP_ERR_SERVER_BUSY",
          `requests in progress hold ${held} bytes of bodies and this one may bring ${bytes} (limits.maxBodyBytesInFlight: ${budget}); retry shortly`,
        ),
      );
      return;
    }
    held += bytes;
    reply.raw.once("close", () => {
      held -= bytes;
    });
    done();
  });
  return () => held;
}
