// The upstream retry policy: which answers are retried and how long to wait before the next attempt.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { backoffDelay, parseRetryAfter, retryableStatus } from "../../src/backends/upstream/retry.js";

describe("upstream retry policy", () => {
  it("retries 429, 408 and 5xx only", () => {
    for (const s of [429, 408, 500, 502, 503, 504]) assert.equal(retryableStatus(s), true, String(s));
    for (const s of [400, 401, 403, 404, 422]) assert.equal(retryableStatus(s), false, String(s));
  });

  it("reads Retry-After as seconds or an HTTP date", () => {
    assert.equal(parseRetryAfter("2"), 2000);
    assert.equal(parseRetryAfter("0.5"), 500);
    const now = Date.parse("2026-11-30T00:00:00Z");
    assert.equal(parseRetryAfter("Mon, 30 Nov 2026 00:00:03 GMT", now), 3000);
    assert.equal(parseRetryAfter(undefined), undefined);
    assert.equal(parseRetryAfter("soon"), undefined);
  });

  it("backs off exponentially, lets Retry-After win, and caps both", () => {
    const s = { backoffMs: 100, maxBackoffMs: 1000 };
    assert.deepEqual(
      [0, 1, 2, 3, 4].map((n) => backoffDelay(n, undefined, s)),
      [100, 200, 400, 800, 1000],
    );
    assert.equal(backoffDelay(0, 700, s), 700);
    assert.equal(backoffDelay(0, 60_000, s), 1000);
  });
});
