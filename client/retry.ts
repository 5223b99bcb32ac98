// When the client sends a request again, and how long it waits first: exponential backoff with
// jitter, Retry-After honoured, and a rule per kind of operation so that a request that may have
// had an effect on the server is never sent twice (docs/Client.md#retries).
import { isModelportError, type ModelportError } from "./errors.js";

/**
 * How an operation may be retried.
 * - "idempotent": GETs, DELETE (cancel), and POSTs that carry an Idempotency-Key (jobs.submit).
 *   Retried on any network error, on 408, 429, 502, 503 and 504, and on a 500 the server marks
 *   retryable.
 * - "unsafe": predict, predictTensors, infer and jobs.retry. Retried only when the request surely
 *   had no effect: a 429 or 503 the server marks retryable (a `retryable: true` body, or a
 *   Retry-After header on the OIP and OpenAI error shapes), or a connection that failed before
 *   any byte was sent (see CONNECT_ERRORS).
 */
export type RetryKind = "idempotent" | "unsafe";

export interface BackoffOptions {
  /** The first retry waits about this long (default 200 ms); each later one twice as long. */
  baseMs?: number;
  /** No backoff wait is longer (default 20,000 ms). */
  maxMs?: number;
  /**
   * A Retry-After longer than this (default 60,000 ms) ends the retries: the error is thrown
   * rather than the server asked sooner than it said.
   */
  maxRetryAfterMs?: number;
}

/**
 * Node's error codes (undici's `cause.code`) for a connection that failed before the request was
 * written: nothing reached the server, so even an unsafe operation is sent again. Browsers do not
 * say why a fetch failed, so there an unsafe operation is not retried on network errors at all.
 */
export const CONNECT_ERRORS: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
]);

const IDEMPOTENT_STATUSES: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);

/** The `code` of an error or of any error in its `cause` chain that is one of CONNECT_ERRORS. */
export function connectErrorCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && typeof e === "object" && e !== null; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && CONNECT_ERRORS.has(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Whether `err` (a ModelportError from the transport) may be retried for an operation of `kind`. */
export function mayRetry(kind: RetryKind, err: ModelportError): boolean {
  if (!isModelportError(err)) return false;
  if (err.code === "MP_ERR_CLIENT_TIMEOUT") return false;
  if (err.status === 0) {
    if (err.code !== "MP_ERR_CLIENT_NETWORK") return false;
    return kind === "idempotent" || connectErrorCode(err) !== undefined;
  }
  if (kind === "unsafe") return (err.status === 429 || err.status === 503) && err.retryable;
  return IDEMPOTENT_STATUSES.has(err.status) || (err.status === 500 && err.retryable);
}

/**
 * The wait before retry number `retry` (1 for the first): the answer's Retry-After when it has
 * one (plus up to 10% so clients told the same do not return together), else
 * min(maxMs, baseMs × 2^(retry−1)) scaled by a random 50–100%. Undefined: do not retry (the
 * Retry-After is beyond maxRetryAfterMs).
 */
export function retryDelay(
  retry: number,
  err: ModelportError,
  options: BackoffOptions = {},
  random: () => number = Math.random,
): number | undefined {
  const baseMs = options.baseMs ?? 200;
  const maxMs = options.maxMs ?? 20_000;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
  if (err.retryAfterMs !== undefined && (err.status === 429 || err.status === 503)) {
    if (err.retryAfterMs > maxRetryAfterMs) return undefined;
    return Math.ceil(err.retryAfterMs * (1 + 0.1 * random()));
  }
  const cap = Math.min(maxMs, baseMs * 2 ** (retry - 1));
  return Math.round(cap * (0.5 + 0.5 * random()));
}
