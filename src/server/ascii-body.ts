// Large text responses (the JSON of big output tensors) go to the socket as bytes. Node encodes
// a string payload to UTF-8 while writing it, about 3x slower than copying the bytes of an
// all-ASCII string (5.9 MB of JSON numbers: 19 ms against 5.6 ms). Buffer.byteLength (0.85 ms
// there) equals the string's length exactly when every character is ASCII; such a body is copied
// out with latin1, which for ASCII gives the same bytes. Anything else is sent as it was.
import type { onSendHookHandler } from "fastify";

/** Below this many characters the usual path is as fast. */
export const ASCII_BODY_MIN_CHARS = 64 * 1024;

export function asciiBytes(payload: unknown): unknown {
  if (typeof payload !== "string" || payload.length < ASCII_BODY_MIN_CHARS) return payload;
  return Buffer.byteLength(payload) === payload.length ? Buffer.from(payload, "latin1") : payload;
}

export const asciiBody: onSendHookHandler = (_request, _reply, payload, done) =>
  done(null, asciiBytes(payload));
