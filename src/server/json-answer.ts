// JSON answers with tensors' data. A tiny one (a handful of values) is made as a string and a
// small one written whole as bytes, both sent with their Content-Length. A large one (its bound,
// JsonWriter's upper estimate, at least JSON_STREAM_FROM bytes: an answer of ~45,000 FP32 values
// or more) is sent chunked, each chunk written when the socket takes the one before: the client
// reads the start of the answer while the rest is written, instead of after all of it
// (docs/PERFORMANCE.md), the whole text is never held at once, and a client that reads slowly
// holds the writing back rather than the server's memory. A request sampled for payload capture
// is answered whole, so that the capture sees the body.
import { Readable } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import { JSON_TYPE } from "../protocol/headers.js";
import type { JsonWriter } from "../protocol/json-data.js";

/** Answers whose bound is this or more are sent chunked. */
export const JSON_STREAM_FROM = 1024 * 1024;
/**
 * Answers whose bound is below this (a handful of values) are made as a string: cheaper than
 * filling a buffer up to ~8 values (2 FP32 values: 1.0 against 1.5 us; 16: 3.0 against 2.3).
 */
export const JSON_TEXT_BELOW = 256;
/** About this many bytes a chunk. */
const CHUNK_BYTES = 256 * 1024;

/**
 * The writer's text as the answer's payload, for the route to return (Fastify sends it): a string
 * (a tiny answer), the bytes, or a stream of them; `written` is called once the last byte is
 * written. A payload, not `reply`: a route's promise that resolves to `reply` costs Fastify
 * another promise job a request.
 */
export function jsonPayload(
  req: FastifyRequest,
  reply: FastifyReply,
  writer: JsonWriter,
  written: () => void,
): string | Buffer | Readable {
  reply.type(JSON_TYPE);
  if (writer.bound < JSON_TEXT_BELOW) {
    const text = writer.toText();
    written();
    return text;
  }
  if (writer.bound < JSON_STREAM_FROM || req.capture) {
    const body = writer.finish();
    written();
    return body;
  }
  return new Readable({
    highWaterMark: CHUNK_BYTES,
    read() {
      const chunk = writer.next(CHUNK_BYTES);
      if (!chunk) written();
      this.push(chunk ?? null);
    },
  });
}
