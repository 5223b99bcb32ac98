// Errors as gRPC statuses: each MP_ERR_* code's HTTP status (src/errors.ts) mapped to the gRPC
// code that means the same, the MP_ERR code first in the message and in the trailing metadata.
import { Metadata, type StatusObject, status } from "@grpc/grpc-js";
import { ERRORS, type ErrorSpec, type ModelportError } from "../errors.js";

/** The trailing metadata entry that carries the MP_ERR_* code of a failed call. */
export const ERROR_CODE_KEY = "mp-error-code";

/**
 * The gRPC code for an error: its own where the error table names one, else by its HTTP status
 * (docs/API.md, "gRPC": the table).
 */
export function grpcCode(err: ModelportError): status {
  const own = (ERRORS[err.code] as ErrorSpec).grpc;
  if (own) return status[own];
  switch (err.status) {
    case 401:
      return status.UNAUTHENTICATED;
    case 403:
      return status.PERMISSION_DENIED;
    case 404:
      return status.NOT_FOUND;
    case 408:
    case 504:
      return status.DEADLINE_EXCEEDED;
    case 409:
      return status.ABORTED;
    case 413:
    case 429:
      return status.RESOURCE_EXHAUSTED;
    case 499:
      return status.CANCELLED;
    case 502:
    case 503:
      return status.UNAVAILABLE;
  }
  // Every other 4xx (400, 422 the backend refusing these inputs, ...) is the request's fault.
  return err.status >= 400 && err.status < 500 ? status.INVALID_ARGUMENT : status.INTERNAL;
}

/**
 * Most characters of a failed call's message. It travels in the `grpc-message` trailer,
 * percent-encoded (up to 9 bytes a character), and a client drops trailers past its metadata
 * limit (8 KiB in grpc-js and in gRPC's C core): grpc-js then waited for its deadline, as if no
 * answer came. A message can quote what the client sent (a model name is as long as the message
 * allows), so it is cut here, saying how long it was.
 */
export const MAX_DETAILS_CHARS = 512;

/** The status a failed call ends with: "MP_ERR_…: message", the code again in `mp-error-code`. */
export function errorStatus(err: ModelportError): Pick<StatusObject, "code" | "details" | "metadata"> {
  const metadata = new Metadata();
  metadata.set(ERROR_CODE_KEY, err.code);
  // As HTTP's Retry-After on a retryable 503 (overloaded, loading, draining).
  if (err.status === 503 && err.retryable)
    metadata.set("retry-after", String(err.details?.retryAfterSeconds ?? 1));
  return { code: grpcCode(err), details: cut(`${err.code}: ${err.message}`), metadata };
}

/** `text` within MAX_DETAILS_CHARS (and the note of its length), never ending in half a surrogate pair. */
function cut(text: string): string {
  if (text.length <= MAX_DETAILS_CHARS) return text;
  const note = `… (${text.length} characters)`;
  let end = MAX_DETAILS_CHARS - note.length;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}${note}`;
}
