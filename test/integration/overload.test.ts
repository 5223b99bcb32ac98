// Ten times more traffic than the model can serve: accepted requests still meet their
// deadline, the excess gets a fast 503 with Retry-After, no other 5xx appears, memory stays
// bounded, and the model is fine afterwards. Wall-clock bars that a busy machine can break are
// not asserted here: "the refusal does not wait" is proven with a model held by a gate.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createGate } from "../helpers/gate.js";
import { testModels } from "../helpers/models.js";
import { type ChildServer, postJson, startChild, startInProcess, waitReady } from "../helpers/server.js";

let child: ChildServer;
const TIMEOUT_MS = 1000;

before(async () => {
  const models = await testModels();
  // slow.onnx: ~50 ms per row on one thread, so capacity is ~20 rows/s.
  child = await startChild([
    join(models, "slow.onnx"),
    "--max-queue-rows",
    "8",
    "--timeout-ms",
    String(TIMEOUT_MS),
  ]);
  assert.equal((await waitReady(child.url)).status, 200);
});

after(() => child.stop("SIGKILL"));

async function rssBytes(): Promise<number> {
  const text = await (await fetch(`${child.url}/metrics`)).text();
  return Number(/^modelport_process_resident_memory_bytes (\d+)/m.exec(text)![1]);
}

describe("overload", () => {
  it("10× capacity: accepted requests meet their deadline, the rest get 503 + Retry-After, nothing else fails", async (t) => {
    const rssBefore = await rssBytes();
    const results: { status: number; ms: number; code?: string; retryAfter: string | null }[] = [];
    const pending: Promise<void>[] = [];
    const offered = 200; // per second, open loop: ten times what the model can do
    const seconds = 3;
    const started = performance.now();
    for (let i = 0; i < offered * seconds; i++) {
      const due = started + (i * 1000) / offered;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const t0 = performance.now();
      pending.push(
        postJson(`${child.url}/v1/models/slow/predict`, { rows: [[i % 7, 1, 2, 3, 4, 5, 6, 7]] }).then(
          (r) => {
            results.push({
              status: r.status,
              ms: performance.now() - t0,
              code: r.body?.error?.code,
              retryAfter: r.headers.get("retry-after"),
            });
          },
        ),
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
    // Deadlines are judged before inference from the measured batch cost (with a 1.25 margin);
    // allow that much scheduling slack again on a 2-core machine shared with the load generator.
    // A sudden CPU steal by another process can still stretch a batch already judged on time, so
    // the check is statistical: a systematic failure to enforce deadlines makes most requests late.
    const overdue = ok.filter((r) => r.ms > TIMEOUT_MS * 1.25 + 100);
    const slowest = Math.max(...ok.map((r) => r.ms));
    assert.ok(
      overdue.length <= Math.max(1, Math.floor(ok.length * 0.05)),
      `${overdue.length} of ${ok.length} accepted requests overran the deadline; slowest ${slowest.toFixed(0)} ms (${summary})`,
    );
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
    const gate = createGate();
    const file = join(mkdtempSync(join(tmpdir(), "modelport-overload-")), "gate.yaml");
    writeFileSync(file, ["limits: {maxQueueRows: 2}", "models:", gate.modelYaml("gate")].join("\n"));
    const srv = await startInProcess({ file });
    try {
      const depth = async () => ((await (await fetch(`${srv.url}/v1/models/gate`)).json()) as any).batching;
      const settled = new Set<number>();
      const send = (x: number) =>
        postJson(`${srv.url}/v1/models/gate/predict`, { rows: [[x]] }).finally(() => settled.add(x));
      // Two requests on the runner (maxInFlight 2; the first is in the handler), two in the queue.
      const accepted = [send(1)];
      await gate.started(1);
      accepted.push(send(2));
      for (let i = 0; (await depth()).inFlight < 2; i++) {
        assert.ok(i < 3000, "the second request never reached the runner");
        await new Promise((r) => setTimeout(r, 10));
      }
      accepted.push(send(3), send(4));
      for (let i = 0; (await depth()).queuedRows < 2; i++) {
        assert.ok(i < 3000, "the queue never filled");
        await new Promise((r) => setTimeout(r, 10));
      }
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

  it("a deadline the model cannot meet is answered 504 before inference", async () => {
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
    assert.equal(res.body.error.code, "MP_ERR_DEADLINE_EXCEEDED");
    await Promise.all(busy);
    const bad = await postJson(
      `${child.url}/v1/models/slow/predict`,
      { rows: [[1, 2, 3, 4, 5, 6, 7, 8]] },
      { "x-request-timeout-ms": "soon" },
    );
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /x-request-timeout-ms must be an integer/);
  });

  it("a client that disconnects has its queued work removed", async () => {
    const patient = { "x-request-timeout-ms": "60000" };
    // Two batches on the runner (one computing, one waiting its turn), so the next request queues.
    const depth = async () => ((await (await fetch(`${child.url}/v1/models/slow`)).json()) as any).batching;
    const until = async (ok: (d: { queuedRows: number; inFlight: number }) => boolean) => {
      for (let i = 0; i < 200 && !ok(await depth()); i++) await new Promise((r) => setTimeout(r, 2));
    };
    const busy: ReturnType<typeof postJson>[] = [];
    for (let i = 0; i < 2; i++) {
      busy.push(
        postJson(`${child.url}/v1/models/slow/predict`, { rows: [[2, 2, 2, 2, 2, 2, 2, 2]] }, patient),
      );
      await until((d) => d.inFlight === i + 1);
    }
    const before = await (await fetch(`${child.url}/metrics`)).text();
    const canceledBefore = Number(
      /modelport_rejections_total\{model="slow",reason="canceled"\} (\d+)/.exec(before)?.[1] ?? 0,
    );
    const abort = new AbortController();
    const gone = fetch(`${child.url}/v1/models/slow/predict`, {
      method: "POST",
      headers: { "content-type": "application/json", ...patient },
      body: JSON.stringify({ rows: [[9, 9, 9, 9, 9, 9, 9, 9]] }),
      signal: abort.signal,
    }).then(
      (r) => `answered ${r.status}`,
      (e: Error) => e.name,
    );
    await until((d) => d.queuedRows === 1);
    assert.equal((await depth()).queuedRows, 1, "the request is waiting in the queue");
    abort.abort();
    assert.equal(await gone, "AbortError");
    for (const r of await Promise.all(busy)) assert.equal(r.status, 200);
    await new Promise((r) => setTimeout(r, 50));
    const after = await (await fetch(`${child.url}/metrics`)).text();
    const canceledAfter = Number(
      /modelport_rejections_total\{model="slow",reason="canceled"\} (\d+)/.exec(after)?.[1] ?? 0,
    );
    assert.equal(
      canceledAfter,
      canceledBefore + 1,
      "the abandoned request was removed from the queue, not computed",
    );
  });
});
