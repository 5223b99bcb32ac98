// A request's own deadline, X-Request-Timeout-Ms (an HTTP header, or gRPC metadata), read the
// same way on every surface.
import { ModelportError } from "../errors.js";
import { TIMEOUT_HEADER } from "./headers.js";

/** The longest deadline a request may ask for: one hour. */
export const MAX_REQUEST_TIMEOUT_MS = 3_600_000;

/**
 * The timeout a request asked for in ms, or undefined when it sent none.
 * @throws ModelportError MP_ERR_REQUEST_INVALID unless it is an integer from 1 to 3600000.
 */
export function requestTimeoutMs(value: string | string[] | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0 || n > MAX_REQUEST_TIMEOUT_MS) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `${TIMEOUT_HEADER} must be an integer from 1 to ${MAX_REQUEST_TIMEOUT_MS} (ms), got '${value}'`,
    );
  }
  return n;
}
