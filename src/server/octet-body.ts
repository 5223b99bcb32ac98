// application/octet-stream bodies (binary tensors), read into memory of their own sized by
// Content-Length, with the bytes after an Inference-Header-Content-Length JSON header placed
// 8-byte aligned. Tensors are then views of the body instead of copies, and a worker thread is
// given the body whole (protocol/body-memory.ts). Fastify's own reader (`parseAs: "buffer"`)
// keeps the chunks and joins them at the end, at an offset nobody chose; the checks below are
// its checks, with its errors (too large: 413; a length that is not Content-Length: 400).
import type { Readable } from "node:stream";
import { errorCodes, type FastifyRequest } from "fastify";
import { ownBodyMemory } from "../protocol/body-memory.js";
import { INFERENCE_HEADER } from "../protocol/headers.js";

const ALIGN = 8;

/** Bytes before the body in its memory, so that its byte `at` falls on an 8-byte boundary. */
function padFor(request: FastifyRequest, length: number): number {
  const value = request.headers[INFERENCE_HEADER];
  const at = typeof value === "string" && /^\s*\d+\s*$/.test(value) ? Number(value) : 0;
  return at <= length ? (ALIGN - (at % ALIGN)) % ALIGN : 0;
}

/** A Fastify content-type parser (the payload stream form) for application/octet-stream. */
export function readOctetBody(
  request: FastifyRequest,
  payload: Readable & { receivedEncodedLength?: number },
  done: (err: Error | null, body?: Buffer) => void,
): void {
  const limit = request.routeOptions.bodyLimit ?? Number.POSITIVE_INFINITY;
  const declared = Number(request.headers["content-length"]);
  const known = Number.isSafeInteger(declared) && declared >= 0;
  if (known && declared > limit) {
    done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    return;
  }
  // Known length: the memory comes first and each chunk is copied in as it arrives. Chunked:
  // the chunks are kept and copied once at the end.
  const pad = known ? padFor(request, declared) : 0;
  const memory = known ? Buffer.allocUnsafeSlow(pad + declared) : undefined;
  const chunks: Buffer[] = [];
  let received = 0;

  const stop = () => {
    payload.removeListener("data", onData);
    payload.removeListener("end", onEnd);
    payload.removeListener("error", onEnd);
  };
  function onData(data: Buffer | string) {
    const chunk = typeof data === "string" ? Buffer.from(data) : data;
    const at = received;
    received += chunk.length;
    if (received > limit || (payload.receivedEncodedLength ?? 0) > limit) {
      stop();
      done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    if (!memory) chunks.push(chunk);
    else if (received <= declared) memory.set(chunk, pad + at);
  }
  function onEnd(err?: Error & { statusCode?: number }) {
    stop();
    if (err != null) {
      if (!(typeof err.statusCode === "number" && err.statusCode >= 400)) err.statusCode = 400;
      done(err);
      return;
    }
    if (known && (payload.receivedEncodedLength || received) !== declared) {
      done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
      return;
    }
    let body: Buffer;
    if (memory) body = memory.subarray(pad);
    else {
      const extra = padFor(request, received);
      body = Buffer.allocUnsafeSlow(extra + received).subarray(extra);
      let at = 0;
      for (const c of chunks) {
        body.set(c, at);
        at += c.length;
      }
    }
    ownBodyMemory(body.buffer as ArrayBuffer);
    done(null, body);
  }
  payload.on("data", onData);
  payload.on("end", onEnd);
  payload.on("error", onEnd);
  payload.resume();
}
