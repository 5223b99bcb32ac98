// multipart/form-data bodies (RFC 7578), as the openai SDK's files.create sends them: read whole
// into memory, then split into parts. A parser of our own rather than a library: the only route
// that takes such bodies (POST /v1/files) needs the file whole anyway (every JSONL line is
// validated before anything is stored, and the BlobStore takes one Buffer), so a streaming
// parser (@fastify/multipart, busboy) would buy nothing, and neither is a dependency here (the
// busboy in node_modules is an undeclared leftover of a dev tool, absent from a production install).
import type { Readable } from "node:stream";
import type { FastifyRequest } from "fastify";
import { ModelportError } from "../errors.js";

export interface FormPart {
  /** The field name of its Content-Disposition. */
  name: string;
  /** Present on file fields. */
  filename?: string;
  contentType?: string;
  data: Buffer;
}

const CRLF = Buffer.from("\r\n");
const HEADER_END = Buffer.from("\r\n\r\n");
/** Parts one body may hold: a form of a few fields, not a way to make the server split forever. */
const MAX_PARTS = 64;
/** Bytes of one part's headers. */
const MAX_HEADER_BYTES = 16 * 1024;

function invalid(message: string): ModelportError {
  return new ModelportError("MP_ERR_REQUEST_INVALID", `multipart/form-data body: ${message}`);
}

/** The boundary of a `multipart/form-data; boundary=…` Content-Type. @throws MP_ERR_REQUEST_INVALID */
export function boundaryOf(contentType: string | undefined): string {
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType ?? "");
  const boundary = m?.[1] ?? m?.[2];
  if (!boundary) throw invalid("the Content-Type names no boundary");
  return boundary;
}

/** A header parameter such as `name="purpose"` (quoted or not, with \" escapes), or RFC 5987's `filename*=UTF-8''…`. */
function param(header: string, key: string): string | undefined {
  const extended = new RegExp(`;\\s*${key}\\*=([^']*)'[^']*'([^;]*)`, "i").exec(header);
  if (extended) {
    try {
      return decodeURIComponent(extended[2]!.trim());
    } catch {
      return undefined;
    }
  }
  const m = new RegExp(`;\\s*${key}=(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]*))`, "i").exec(header);
  if (!m) return undefined;
  return m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : m[2];
}

/**
 * The parts of a whole multipart/form-data body.
 * @throws ModelportError MP_ERR_REQUEST_INVALID when it is not one (no boundary, no closing
 * delimiter, a part without a name).
 */
export function parseMultipart(body: Buffer, contentType: string | undefined): FormPart[] {
  const delimiter = Buffer.from(`--${boundaryOf(contentType)}`);
  // The first delimiter may follow a preamble; each later one follows a CRLF that is not data.
  let at = body.indexOf(delimiter);
  if (at < 0) throw invalid("no part starts with the boundary");
  const next = Buffer.concat([CRLF, delimiter]);
  const parts: FormPart[] = [];
  for (;;) {
    at += delimiter.length;
    // "--" after a delimiter closes the body.
    if (body[at] === 0x2d && body[at + 1] === 0x2d) return parts;
    // Transport padding (spaces, tabs) may follow a delimiter before its CRLF.
    while (body[at] === 0x20 || body[at] === 0x09) at++;
    if (body[at] !== 0x0d || body[at + 1] !== 0x0a) throw invalid("a boundary line is not followed by CRLF");
    at += 2;
    const headerEnd = body.indexOf(HEADER_END, at);
    if (headerEnd < 0 || headerEnd - at > MAX_HEADER_BYTES) throw invalid("a part's headers do not end");
    const end = body.indexOf(next, headerEnd + 4);
    if (end < 0) throw invalid("the body ends before its closing boundary");
    if (parts.length === MAX_PARTS) throw invalid(`more than ${MAX_PARTS} parts`);
    const headers = new Map<string, string>();
    for (const line of body.subarray(at, headerEnd).toString("utf8").split("\r\n")) {
      const colon = line.indexOf(":");
      if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    const disposition = headers.get("content-disposition") ?? "";
    const name = param(disposition, "name");
    if (!/^form-data\b/i.test(disposition) || name === undefined) {
      throw invalid("a part has no Content-Disposition: form-data with a name");
    }
    const filename = param(disposition, "filename");
    const type = headers.get("content-type");
    parts.push({
      name,
      ...(filename !== undefined ? { filename } : {}),
      ...(type !== undefined ? { contentType: type } : {}),
      data: body.subarray(headerEnd + 4, end),
    });
    at = end + CRLF.length;
  }
}

/**
 * A Fastify content-type parser (payload stream form) that reads the body whole, up to the route's
 * bodyLimit; beyond it `tooLarge()` is the error.
 */
export function readWholeBody(tooLarge: (limit: number) => Error) {
  return (request: FastifyRequest, payload: Readable, done: (err: Error | null, body?: Buffer) => void) => {
    const limit = request.routeOptions.bodyLimit ?? Number.POSITIVE_INFINITY;
    const declared = Number(request.headers["content-length"]);
    if (Number.isSafeInteger(declared) && declared > limit) {
      payload.resume();
      done(tooLarge(limit));
      return;
    }
    const chunks: Buffer[] = [];
    let received = 0;
    let failed = false;
    payload.on("data", (chunk: Buffer) => {
      if (failed) return;
      received += chunk.length;
      if (received > limit) {
        failed = true;
        done(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    });
    payload.on("end", () => {
      if (!failed) done(null, Buffer.concat(chunks, received));
    });
    payload.on("error", (err) => {
      if (!failed) {
        failed = true;
        done(err);
      }
    });
  };
}
