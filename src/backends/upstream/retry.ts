// When to try an upstream call again and how long to wait first: pure functions, so the policy
// is tested without a clock. 429 and 5xx answers and connection failures are worth another
// attempt (the request never reached a model, or the upstream asked us to slow down); other
// 4xx answers are the request's or the key's fault and are not.

export interface BackoffSettings {
  /** First wait; doubles with each attempt. */
  backoffMs: number;
  /** Cap on any wait, including one a Retry-After header asks for. */
  maxBackoffMs: number;
}

/** True for statuses another attempt may fix. */
export function retryableStatus(status: number): boolean {
  return status === 429 || status === 408 || status >= 500;
}

/**
 * Milliseconds to wait for a Retry-After header (delta-seconds or an HTTP date), or undefined
 * when it is absent or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (value === null || value === undefined || value.trim() === "") return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The wait before attempt `attempt + 1` (attempt 0 is the first try that failed): the upstream's
 * Retry-After when it gave one, else backoffMs × 2^attempt; capped at maxBackoffMs either way.
 */
export function backoffDelay(attempt: number, retryAfterMs: number | undefined, s: BackoffSettings): number {
  const wait = retryAfterMs ?? s.backoffMs * 2 ** attempt;
  return Math.min(s.maxBackoffMs, Math.max(0, wait));
}
