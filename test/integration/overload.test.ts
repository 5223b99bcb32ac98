// Ten times more traffic than the model can serve (measured first): the excess gets 503 with
// Retry-After, no other 5xx appears, every accepted request is answered within a bound, memory
// stays bounded, and the model is fine afterwards. Wall-clock bars that a busy machine can break
// are not asserted: that a refusal waits for no inference, that work which cannot meet its
// deadline is refused before it runs, and that a disconnected client's queued work is removed
// are shown with a model held by a gate, or by the server's own counters.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createGate } from "../helpers/gate.js";
import { testModels } from "../helpers/models.js";
import { type ChildServer, postJson, startChild, startInProcess, waitReady } from "../helpers/server.js";

let child: ChildServer;

before(async () => {
  const models = await testModels();
  // slow.onnx: ~50 ms per row on one thread on a quiet machine (capacity ~20 rows/s).
  child = await startChild([join(models, "slow.onnx"), "--max-queue-rows", "8"]);
  assert.equal((await waitReady(child.url)).status, 200);
});

/** An in-process server with one gated model (its requests wait until the test opens them). */
async function gateServer(maxQueueRows: number) {
  const gate = createGate();
  const file = join(mkdtempSync(join(tmpdir(), "modelport-overload-")), "gate.yaml");
  writeFileSync(
    file,
    [`limits: {maxQueueRows: ${maxQueueRows}, timeoutMs: 600000}`, "models:", gate.modelYaml("gate")].join(
      "\n",
    ),
  );
  const srv = await startInProcess({ file });
  const depth = async (): Promise<{ queuedRows: number; inFlight: number }> =>
    ((await (await fetch(`${srv.url}/v1/models/gate`)).json()) as any).batching;
  /** Waits (by count, not time) until the model's queue satisfies `ok`. */
  const until = async (what: string, ok: (d: { queuedRows: number; inFlight: number }) => boolean) => {
    for (let i = 0; !ok(await depth()); i++) {
      assert.ok(i < 3000, `${what}: ${JSON.stringify(await depth())}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  return { gate, srv, until };
}

/** What one row costs on this machine now: the median of a few requests one after another, in ms. */
async function rowCost(): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 7; i++) {
    const t0 = performance.now();
    const r = await postJson(`${child.url}/v1/models/slow/predict`, { rows: [[i, 1, 2, 3, 4, 5, 6, 7]] });
    assert.equal(r.status, 200);
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b)[3]!;
}

after(() => child.stop("SIGKILL"));

async function rssBytes(): Promise<number> {
  const text = await (await fetch(`${child.url}/metrics`)).text();
  return Number(/^modelport_process_resident_memory_bytes (\d+)/m.exec(text)![1]);
}

describe("overload", () => {
  it("10× capacity: accepted requests meet their deadline, the rest get 503 + Retry-After, nothing else fails", async (t) => {
    // Capacity and deadline follow this machine's speed now, so a busy machine gets a test of the
    // same shape: ten times what the model can do, and a deadline of twenty rows' time (the
    // queue holds 8 rows, so an accepted request can make it; at least the 1 s the test had).
    const cost = await rowCost();
    const capacity = 1000 / cost; // rows per second
    const offered = Math.round(10 * capacity); // per second, open loop
    const TIMEOUT_MS = Math.max(1000, Math.round(20 * cost));
    t.diagnostic(`one row ${cost.toFixed(1)} ms: offering ${offered}/s with a ${TIMEOUT_MS} ms deadline`);
    const rssBefore = await rssBytes();
    const results: { status: number; ms: number; code?: string; retryAfter: string | null }[] = [];
    const pending: Promise<void>[] = [];
    const seconds = 3;
    const started = performance.now();
    for (let i = 0; i < offered * seconds; i++) {
      const due = started + (i * 1000) / offered;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const t0 = performance.now();
      pending.push(
        postJson(
          `${child.url}/v1/models/slow/predict`,
          { rows: [[i % 7, 1, 2, 3, 4, 5, 6, 7]] },
          { "x-request-timeout-ms": String(TIMEOUT_MS) },
        ).then((r) => {
          results.push({
            status: r.status,
            ms: performance.now() - t0,
            code: r.body?.error?.code,
            retryAfter: r.headers.get("retry-after"),
          });
        }),
      );
    }
    await Promise.all(pending);

    const by = (s: number) => results.filter((r) => r.status === s);
    const ok = by(200);
    const overloaded = by(503);
    const late = by(504);
    const other = results.filter((r) => ![200, 503, 504].includes(r.status));
    const summary = `200: ${ok.length}, 503: ${overloaded.length}, 504: ${late.length}, other: ${other.map((r) => r.status).join(",")}`;
    assert.equal(other.length, 0, summary);
    assert.ok(ok.length >= 5, `some work was done (${summary})`);
    assert.ok(overloaded.length >= offered * seconds * 0.5, `most of the excess was refused (${summary})`);
    for (const r of overloaded) {
      assert.equal(r.code, "MP_ERR_MODEL_OVERLOADED");
      assert.ok(Number(r.retryAfter) >= 1, "Retry-After in seconds");
    }
    for (const r of late) assert.equal(r.code, "MP_ERR_DEADLINE_EXCEEDED");
    // Deadlines are judged before inference from the measured batch cost (with a 1.25 margin), and
    // work already late is dropped with 504 before it runs (the next tests prove both without a
    // clock). Whether an accepted request then finishes in time depends on this machine staying as
    // fast as it was when the request was judged, which a shared machine does not promise: the
    // overruns are reported, and only a bound no working queue comes near is asserted (8 queued
    // rows take 8 rows' time; unbounded queueing of 10× traffic would take tens of seconds).
    const overdue = ok.filter((r) => r.ms > TIMEOUT_MS * 1.25 + 100);
    const slowest = Math.max(...ok.map((r) => r.ms));
    t.diagnostic(
      `${overdue.length} of ${ok.length} accepted requests overran the deadline; slowest ${slowest.toFixed(0)} ms`,
    );
    assert.ok(slowest < 10 * TIMEOUT_MS, `an accepted request took ${slowest.toFixed(0)} ms (${summary})`);
    // How fast refusals came back depends on the machine: reported, not asserted (the next test
    // proves that a refusal waits for no inference).
    const refusals = overloaded.map((r) => r.ms).sort((a, b) => a - b);
    t.diagnostic(`median refusal ${refusals[Math.floor(refusals.length / 2)]?.toFixed(1)} ms (${summary})`);

    const rssAfter = await rssBytes();
    assert.ok(
      rssAfter - rssBefore < 150 * 1024 * 1024,
      `RSS grew by ${((rssAfter - rssBefore) / 1048576).toFixed(0)} MiB`,
    );
    const metrics = await (await fetch(`${child.url}/metrics`)).text();
    assert.match(metrics, /modelport_rejections_total\{model="slow",reason="overloaded"\} [1-9]/);
    assert.match(metrics, /modelport_batch_rows_count\{model="slow"\} [1-9]/);
    assert.match(metrics, /modelport_queue_wait_seconds_count\{model="slow"\} [1-9]/);
    assert.match(metrics, /modelport_queue_depth_rows\{model="slow"\} \d/);

    // And the model is ready and correct afterwards.
    assert.equal((await fetch(`${child.url}/readyz`)).status, 200);
    const after = await postJson(`${child.url}/v1/models/slow/predict`, { rows: [[0, 1, 2, 3, 4, 5, 6, 7]] });
    assert.equal(after.status, 200);
  });

  it("beyond the queue limit the refusal waits for nothing: 503 while every accepted request is still held", async () => {
    const { gate, srv, until } = await gateServer(2);
    try {
      const settled = new Set<number>();
      const send = (x: number) =>
        postJson(`${srv.url}/v1/models/gate/predict`, { rows: [[x]] }).finally(() => settled.add(x));
      // Two requests on the runner (maxInFlight 2; the first is in the handler), two in the queue.
      const accepted = [send(1)];
      await gate.started(1);
      accepted.push(send(2));
      await until("the second request never reached the runner", (d) => d.inFlight === 2);
      accepted.push(send(3), send(4));
      await until("the queue never filled", (d) => d.queuedRows === 2);
      const refused = await postJson(`${srv.url}/v1/models/gate/predict`, { rows: [[5]] });
      assert.equal(refused.status, 503, JSON.stringify(refused.body));
      assert.equal(refused.body.error.code, "MP_ERR_MODEL_OVERLOADED");
      assert.ok(Number(refused.headers.get("retry-after")) >= 1, "Retry-After in seconds");
      // Nothing ahead of it has finished: the gate is still shut.
      assert.equal(settled.size, 0, `settled before the refusal: ${[...settled].join(",")}`);
      gate.openAll();
      const results = await Promise.all(accepted);
      assert.deepEqual(
        results.map((r) => r.body.outputs.y),
        [[[2]], [[4]], [[6]], [[8]]],
      );
    } finally {
      gate.openAll();
      await srv.close();
    }
  });

  it("a deadline the model cannot meet is answered 504 before inference; one shorter than its own run is not retryable", async () => {
    // Occupy the model, then ask for an answer within 5 ms.
    const busy = Array.from({ length: 4 }, () =>
      postJson(`${child.url}/v1/models/slow/predict`, { rows: [[1, 1, 1, 1, 1, 1, 1, 1]] }),
    );
    await new Promise((r) => setTimeout(r, 20));
    const res = await postJson(
      `${child.url}/v1/models/slow/predict`,
      { rows: [[1, 2, 3, 4, 5, 6, 7, 8]] },
      { "x-request-timeout-ms": "5" },
    );
    assert.equal(res.status, 504);
    assert.ok(
      ["MP_ERR_DEADLINE_EXCEEDED", "MP_ERR_DEADLINE_TOO_SHORT"].includes(res.body.error.code),
      JSON.stringify(res.body),
    );
    await Promise.all(busy);
    // On the idle model, 5 ms is still shorter than its own ~50 ms run: waiting cannot help, so the
    // answer says so and carries no Retry-After (docs/Errors.md, "Does a retry help?").
    const tooShort = await postJson(
      `${child.url}/v1/models/slow/predict`,
      { rows: [[1, 2, 3, 4, 5, 6, 7, 8]] },
      { "x-request-timeout-ms": "5" },
    );
    assert.equal(tooShort.status, 504, JSON.stringify(tooShort.body));
    assert.equal(tooShort.body.error.code, "MP_ERR_DEADLINE_TOO_SHORT");
    assert.equal(tooShort.body.error.retryable, false);
    assert.equal(tooShort.headers.get("retry-after"), null);
    assert.ok(tooShort.body.error.details.runMs > 5, JSON.stringify(tooShort.body));
    assert.doesNotMatch(tooShort.body.error.message, /less busy/);
    assert.match(tooShort.body.error.message, /shorter than the model's own run.*Raise X-Request-Timeout-Ms/);
    const bad = await postJson(
      `${child.url}/v1/models/slow/predict`,
      { rows: [[1, 2, 3, 4, 5, 6, 7, 8]] },
      { "x-request-timeout-ms": "soon" },
    );
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /x-request-timeout-ms must be an integer/);
  });

  it("a client that disconnects has its queued work removed", async () => {
    const { gate, srv, until } = await gateServer(8);
    try {
      // Two requests on the runner (held by the gate), so the next one queues.
      const busy = [postJson(`${srv.url}/v1/models/gate/predict`, { rows: [[1]] })];
      await gate.started(1);
      busy.push(postJson(`${srv.url}/v1/models/gate/predict`, { rows: [[2]] }));
      await until("the second request never reached the runner", (d) => d.inFlight === 2);
      const canceled = async () =>
        Number(
          /modelport_rejections_total\{model="gate",reason="canceled"\} (\d+)/.exec(
            await (await fetch(`${srv.url}/metrics`)).text(),
          )?.[1] ?? 0,
        );
      const canceledBefore = await canceled();
      const abort = new AbortController();
      const gone = fetch(`${srv.url}/v1/models/gate/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ rows: [[9]] }),
        signal: abort.signal,
      }).then(
        (r) => `answered ${r.status}`,
        (e: Error) => e.name,
      );
      await until("the request never queued", (d) => d.queuedRows === 1);
      abort.abort();
      assert.equal(await gone, "AbortError");
      await until("the abandoned request stayed in the queue", (d) => d.queuedRows === 0);
      assert.equal(await canceled(), canceledBefore + 1);
      gate.openAll();
      for (const r of await Promise.all(busy)) assert.equal(r.status, 200);
      // It was removed, not computed: the handler never saw it.
      assert.equal(existsSync(join(gate.dir, "started-9")), false, "the abandoned request reached the model");
    } finally {
      gate.openAll();
      await srv.close();
    }
  });
});
