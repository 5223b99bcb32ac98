// The server-wide budget for request bodies held at once (limits.maxBodyBytesInFlight), shared by
// the HTTP surface (a body's Content-Length, from when the request is let in until its response
// ends) and the gRPC port (a message's bytes, from when its call starts until it ends).
import { ModelportError } from "./errors.js";

export class BodyBudget {
  #held = 0;

  constructor(readonly limit: number) {}

  /**
   * Reserves `bytes` and returns their release (safe to call more than once); over the budget,
   * throws 503 MP_ERR_SERVER_BUSY (retryable) and reserves nothing.
   */
  reserve(bytes: number): () => void {
    if (!(bytes > 0)) return () => {};
    if (this.#held + bytes > this.limit) {
      throw new ModelportError(
        "MP_ERR_SERVER_BUSY",
        `requests in progress hold ${this.#held} bytes of bodies and this one may bring ${bytes} (limits.maxBodyBytesInFlight: ${this.limit}); retry shortly`,
      );
    }
    this.#held += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#held -= bytes;
    };
  }
}
