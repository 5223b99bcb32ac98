// The client's retries against tiny node:http servers that misbehave on purpose: 503 with
// Retry-After (waited for, measured by the server's own clock, lower bounds only), a connection
// dropped after the request arrived (retried for reads and keyed submits, never for predict),
// a connection refused before any byte was sent (retried even for predict), the retry budget,
// Retry-After beyond the cap, deadlines, aborts; and the retry rules and backoff as functions.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import { ModelportError } from "../../client/errors.js";
import { createClient, isModelportError } from "../../client/index.js";
import { mayRetry, retryDelay } from "../../client/retry.js";

interface Seen {
  at: number;
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

interface Stub {
  url: string;
  seen: Seen[];
  server: Server;
}

const servers: Server[] = [];
after(() => {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
});

/** A server that records every request (time, headers, body) and lets `handle` answer it (n from 0). */
async function stub(
  handle: (n: number, req: IncomingMessage, res: ServerResponse) => void,
  port = 0,
): Promise<Stub> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ at: performance.now(), method: req.method!, url: req.url!, headers: req.headers, body });
      handle(seen.length - 1, req, res);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", "x-request-id": "stub-id", ...headers });
  res.end(JSON.stringify(body));
}

const OVERLOADED = {
  error: { code: "MP_ERR_MODEL_OVERLOADED", message: "queue full", retryable: true, details: { queued: 9 } },
};
const PREDICTED = { model: "m", model_version: "1", outputs: { y: [1] } };
const JOB = { id: "j1", model: "m", status: "queued", links: {} };
const FAST = { baseMs: 5, maxMs: 20 };

async function rejection(p: Promise<unknown>): Promise<ModelportError> {
  try {
    await p;
  } catch (err) {
    assert.ok(isModelportError(err), `not a ModelportError: ${err}`);
    return err;
  }
  assert.fail("expected a rejection");
}

describe("client retries against misbehaving servers", () => {
  it("503 with Retry-After: 1 twice, then 200: predict is sent three times, each retry at least ~1 s later", async () => {
    const s = await stub((n, _req, res) =>
      n < 2 ? send(res, 503, OVERLOADED, { "retry-after": "1" }) : send(res, 200, PREDICTED),
    );
    const retries: number[] = [];
    const client = createClient({ baseUrl: s.url, onRetry: (i) => retries.push(i.delayMs) });
    const out = await client.predict("m", { rows: [[1]] });
    assert.deepEqual(out.outputs, { y: [1] });
    assert.equal(s.seen.length, 3);
    // The server's clock: each retry came no sooner than Retry-After (a little slack for timer rounding).
    assert.ok(s.seen[1]!.at - s.seen[0]!.at >= 950, `${s.seen[1]!.at - s.seen[0]!.at} ms`);
    assert.ok(s.seen[2]!.at - s.seen[1]!.at >= 950, `${s.seen[2]!.at - s.seen[1]!.at} ms`);
    assert.equal(retries.length, 2);
    for (const d of retries) assert.ok(d >= 1000, `delay ${d}`);
    assert.equal(s.seen[2]!.body, s.seen[0]!.body);
  });

  it("a 503 the server marks not retryable is not retried, even for a read; its fields reach the error", async () => {
    const s = await stub((_n, _req, res) =>
      send(res, 503, { error: { code: "MP_ERR_MODEL_LOAD_FAILED", message: "no file", retryable: false } }),
    );
    const client = createClient({ baseUrl: s.url, backoff: FAST });
    const err = await rejection(client.predict("m", { rows: [[1]] }));
    assert.equal(err.code, "MP_ERR_MODEL_LOAD_FAILED");
    assert.equal(err.status, 503);
    assert.equal(err.retryable, false);
    assert.equal(err.requestId, "stub-id");
    assert.equal(s.seen.length, 1);
  });

  it("a 429 with Retry-After on a read is retried; one beyond maxRetryAfterMs is not waited for", async () => {
    const s = await stub((n, _req, res) =>
      n === 0
        ? send(res, 429, { error: "slow down", code: "MP_ERR_RATE_LIMITED" }, { "retry-after": "0" })
        : send(res, 200, JOB),
    );
    const client = createClient({ baseUrl: s.url, backoff: FAST });
    assert.equal((await client.jobs.get("j1")).id, "j1");
    assert.equal(s.seen.length, 2);
    const far = await stub((_n, _req, res) => send(res, 429, OVERLOADED, { "retry-after": "120" }));
    const farClient = createClient({ baseUrl: far.url, backoff: { ...FAST, maxRetryAfterMs: 5000 } });
    const err = await rejection(farClient.jobs.get("j1"));
    assert.equal(err.retryAfterMs, 120_000);
    assert.equal(far.seen.length, 1);
  });

  it("a connection dropped after the request arrived: a GET and a keyed submit are sent again, the submit with the same key", async () => {
    const s = await stub((n, req, res) => {
      if (n % 2 === 0) req.socket.destroy();
      else send(res, n === 1 ? 200 : 202, JOB);
    });
    const client = createClient({ baseUrl: s.url, backoff: FAST });
    assert.equal((await client.jobs.get("j1")).id, "j1");
    assert.equal((await client.jobs.submit("m", { rows: [[1]] })).id, "j1");
    assert.equal(s.seen.length, 4);
    const [, , first, second] = s.seen;
    assert.equal(first!.method, "POST");
    assert.match(String(first!.headers["idempotency-key"]), /^[0-9a-f-]{36}$/);
    assert.equal(second!.headers["idempotency-key"], first!.headers["idempotency-key"]);
    assert.equal(second!.body, first!.body);
  });

  it("predict is not sent again when the connection drops after the request was sent", async () => {
    const s = await stub((_n, req) => req.socket.destroy());
    const client = createClient({ baseUrl: s.url, backoff: FAST });
    const err = await rejection(client.predict("m", { rows: [[1]] }));
    assert.equal(err.code, "MP_ERR_CLIENT_NETWORK");
    assert.equal(err.status, 0);
    assert.equal(s.seen.length, 1);
    // The same for binary tensors and OIP infer.
    await rejection(client.predictTensors("m", { x: { data: new Float32Array([1]), shape: [1] } }));
    await rejection(client.infer("m", { inputs: [] }));
    assert.equal(s.seen.length, 3);
  });

  it("predict is sent again when the connection was refused before any byte was sent", async () => {
    // Take a free port, close it, and listen on it only once the first attempt has been refused.
    const probe = await stub(() => {});
    const port = Number(new URL(probe.url).port);
    await new Promise((r) => probe.server.close(r));
    let calls = 0;
    let later: Stub | undefined;
    const client = createClient({
      baseUrl: probe.url,
      backoff: FAST,
      fetch: async (input, init) => {
        calls++;
        try {
          return await fetch(input, init);
        } finally {
          later ??= await stub((_n, _req, res) => send(res, 200, PREDICTED), port);
        }
      },
    });
    const out = await client.predict("m", { rows: [[1]] });
    assert.deepEqual(out.outputs, { y: [1] });
    assert.equal(calls, 2);
    assert.equal(later!.seen.length, 1);
  });

  it("retries stop after `retries`; the last error is thrown", async () => {
    const s = await stub((_n, _req, res) => send(res, 503, OVERLOADED));
    const client = createClient({ baseUrl: s.url, retries: 2, backoff: FAST });
    const err = await rejection(client.predict("m", { rows: [[1]] }));
    assert.equal(err.code, "MP_ERR_MODEL_OVERLOADED");
    assert.equal(s.seen.length, 3);
    const none = createClient({ baseUrl: s.url, retries: 0 });
    await rejection(none.jobs.get("x"));
    assert.equal(s.seen.length, 4);
  });

  it("timeoutMs: X-Request-Timeout-Ms carries the time left; a server that never answers ends in MP_ERR_CLIENT_TIMEOUT", async () => {
    const s = await stub(() => {});
    const client = createClient({ baseUrl: s.url, apiKey: "k-1", deadlineGraceMs: 50 });
    const err = await rejection(client.predict("m", { rows: [[1]] }, { timeoutMs: 200, requestId: "r-7" }));
    assert.equal(err.code, "MP_ERR_CLIENT_TIMEOUT");
    assert.equal(err.status, 0);
    assert.equal(err.requestId, "r-7");
    const h = s.seen[0]!.headers;
    const left = Number(h["x-request-timeout-ms"]);
    assert.ok(left >= 1 && left <= 200, `x-request-timeout-ms ${left}`);
    assert.equal(h["x-request-id"], "r-7");
    assert.equal(h.authorization, "Bearer k-1");
  });

  it("an AbortSignal ends the call, also during a retry's wait, with the signal's reason", async () => {
    const s = await stub((_n, _req, res) => send(res, 503, OVERLOADED, { "retry-after": "30" }));
    const client = createClient({ baseUrl: s.url });
    const controller = new AbortController();
    const reason = new Error("stop");
    const call = client.predict("m", { rows: [[1]] }, { signal: controller.signal });
    while (s.seen.length === 0) await new Promise((r) => setTimeout(r, 5));
    controller.abort(reason);
    await assert.rejects(call, (e) => e === reason);
    assert.equal(s.seen.length, 1);
  });
});

describe("retry rules and backoff", () => {
  const error = (status: number, retryable: boolean, code = "MP_ERR_X", cause?: unknown) =>
    new ModelportError({ code, message: "m", status, retryable, cause });

  it("idempotent operations: network errors, 408/429/502/503/504, and a retryable 500", () => {
    assert.equal(mayRetry("idempotent", error(0, true, "MP_ERR_CLIENT_NETWORK")), true);
    for (const s of [408, 429, 502, 503, 504])
      assert.equal(mayRetry("idempotent", error(s, false)), true, `${s}`);
    assert.equal(mayRetry("idempotent", error(500, true)), true);
    assert.equal(mayRetry("idempotent", error(500, false)), false);
    assert.equal(mayRetry("idempotent", error(409, true)), false);
    assert.equal(mayRetry("idempotent", error(400, false)), false);
    assert.equal(mayRetry("idempotent", error(0, false, "MP_ERR_CLIENT_TIMEOUT")), false);
  });

  it("unsafe operations: only a retryable 429/503, or a connection refused before sending", () => {
    assert.equal(mayRetry("unsafe", error(503, true)), true);
    assert.equal(mayRetry("unsafe", error(429, true)), true);
    assert.equal(mayRetry("unsafe", error(503, false)), false);
    assert.equal(mayRetry("unsafe", error(504, true)), false);
    assert.equal(mayRetry("unsafe", error(502, true)), false);
    const refused = new TypeError("fetch failed", {
      cause: Object.assign(new Error("x"), { code: "ECONNREFUSED" }),
    });
    assert.equal(mayRetry("unsafe", error(0, true, "MP_ERR_CLIENT_NETWORK", refused)), true);
    const reset = new TypeError("fetch failed", {
      cause: Object.assign(new Error("x"), { code: "UND_ERR_SOCKET" }),
    });
    assert.equal(mayRetry("unsafe", error(0, true, "MP_ERR_CLIENT_NETWORK", reset)), false);
  });

  it("backoff doubles from baseMs up to maxMs, scaled by 50-100%; Retry-After wins and is never shortened", () => {
    const e = error(502, false);
    const opts = { baseMs: 100, maxMs: 1000 };
    assert.equal(
      retryDelay(1, e, opts, () => 0),
      50,
    );
    assert.equal(
      retryDelay(1, e, opts, () => 1),
      100,
    );
    assert.equal(
      retryDelay(3, e, opts, () => 1),
      400,
    );
    assert.equal(
      retryDelay(10, e, opts, () => 1),
      1000,
    );
    const after = new ModelportError({
      code: "X",
      message: "m",
      status: 503,
      retryable: true,
      retryAfterMs: 2000,
    });
    assert.equal(
      retryDelay(1, after, opts, () => 0),
      2000,
    );
    assert.equal(
      retryDelay(1, after, opts, () => 1),
      2200,
    );
    assert.equal(retryDelay(1, after, { maxRetryAfterMs: 1000 }), undefined);
  });
});
