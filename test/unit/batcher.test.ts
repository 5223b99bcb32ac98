// The batcher around a scoring function: results reach the right callers in order, big
// requests are split and reassembled, deadlines drop work before it runs, a disconnect removes
// queued work, and a full queue refuses with Retry-After. The scoring function here doubles
// its input and records each batch it saw; the real models are covered by integration tests.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CancelHandle } from "../../src/cancel.js";
import { ModelportError } from "../../src/errors.js";
import { Batcher, type BatcherOptions } from "../../src/runner/batcher.js";
import type { TensorMap } from "../../src/tensor.js";

const rowsOf = (...values: number[][]): TensorMap => ({
  x: { datatype: "FP32", shape: [values.length, values[0]!.length], data: Float32Array.from(values.flat()) },
});

function doubler(delayMs = 5) {
  const batches: number[][] = [];
  const run = async (inputs: TensorMap): Promise<TensorMap> => {
    const x = inputs.x!;
    batches.push(Array.from(x.data as Float32Array));
    await new Promise((r) => setTimeout(r, delayMs));
    return { y: { datatype: "FP32", shape: [...x.shape], data: (x.data as Float32Array).map((v) => v * 2) } };
  };
  return { run, batches };
}

const base: BatcherOptions = {
  maxBatchRows: 8,
  maxDelayMs: 20,
  maxInFlight: 1,
  adaptive: false,
  maxQueueRows: 100,
  batchable: true,
};
const values = (out: TensorMap) => Array.from(out.y!.data as Float32Array);
const code = (c: string) => (e: unknown) => e instanceof ModelportError && e.code === c;

describe("Batcher", () => {
  it("joins concurrent requests into one batch and returns each caller its own rows, in order", async () => {
    const { run, batches } = doubler();
    const b = new Batcher(run, base);
    const results = await Promise.all([1, 2, 3, 4].map((v) => b.submit(rowsOf([v, v + 0.5]))));
    assert.deepEqual(results.map(values), [
      [2, 3],
      [4, 5],
      [6, 7],
      [8, 9],
    ]);
    assert.equal(batches.length, 1, "one batch");
    assert.deepEqual(batches[0], [1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5]);
  });

  it("honours maxDelayMs: a lone request waits at most that long (classic mode)", async () => {
    const { run } = doubler(0);
    const b = new Batcher(run, { ...base, maxDelayMs: 30 });
    const t0 = performance.now();
    await b.submit(rowsOf([1]));
    const waited = performance.now() - t0;
    assert.ok(waited >= 28, `waited ${waited} ms`);
    // Generous: a busy machine delays timers, but not by seconds.
    assert.ok(waited < 30 + 2000, `waited ${waited} ms`);
  });

  it("a full batch does not wait for maxDelayMs", async () => {
    const { run, batches } = doubler(0);
    const b = new Batcher(run, { ...base, maxDelayMs: 5000 });
    const t0 = performance.now();
    await Promise.all(Array.from({ length: 8 }, (_, i) => b.submit(rowsOf([i]))));
    assert.ok(performance.now() - t0 < 1000);
    assert.equal(batches.length, 1);
  });

  it("joins requests only up to maxBatchBytes; a single request larger than it still runs", async () => {
    const { run, batches } = doubler(0);
    // Each request is 2 rows x 500 FP32 = 4,000 bytes: two fit in 10,000, a third does not.
    const b = new Batcher(run, { ...base, maxBatchRows: 64, maxBatchBytes: 10_000 });
    const row = (v: number) => new Array(500).fill(v);
    const results = await Promise.all([1, 2, 3, 4, 5].map((v) => b.submit(rowsOf(row(v), row(v)))));
    assert.deepEqual(
      results.map((r) => values(r)[0]),
      [2, 4, 6, 8, 10],
    );
    assert.deepEqual(
      batches.map((x) => x.length / 500),
      [4, 4, 2],
      "batches of 2, 2 and 1 requests",
    );
    const big = await new Batcher(run, { ...base, maxBatchBytes: 100 }).submit(rowsOf(row(7), row(7)));
    assert.equal(values(big)[999], 14);
  });

  it("splits a request larger than a batch and reassembles it in order", async () => {
    const { run, batches } = doubler(0);
    const b = new Batcher(run, { ...base, maxDelayMs: 0 });
    const big = Array.from({ length: 20 }, (_, i) => [i]);
    const out = await b.submit(rowsOf(...big));
    assert.deepEqual(out.y!.shape, [20, 1]);
    assert.deepEqual(
      values(out),
      big.map(([v]) => v! * 2),
    );
    assert.deepEqual(
      batches.map((x) => x.length),
      [8, 8, 4],
    );
  });

  it("drops work whose deadline cannot be met before it runs (504), and runs the rest", async () => {
    const { run, batches } = doubler(50);
    const b = new Batcher(run, { ...base, maxBatchRows: 1, maxDelayMs: 0 });
    const first = b.submit(rowsOf([1]));
    // Queued behind a 50 ms batch with a 20 ms budget: by its turn the deadline has passed.
    const late = b.submit(rowsOf([2]), { deadline: performance.now() + 20 });
    const patient = b.submit(rowsOf([3]), { deadline: performance.now() + 10_000 });
    await assert.rejects(late, code("MP_ERR_DEADLINE_EXCEEDED"));
    assert.deepEqual(values(await first), [2]);
    assert.deepEqual(values(await patient), [6]);
    assert.deepEqual(batches, [[1], [3]], "the late request never reached the model");
  });

  it("refuses at once a deadline shorter than the known cost of a batch", async () => {
    const { run } = doubler(30);
    const b = new Batcher(run, { ...base, maxDelayMs: 0 });
    for (let i = 0; i < 5; i++) await b.submit(rowsOf([i])); // learn the ~30 ms cost
    await assert.rejects(
      b.submit(rowsOf([1]), { deadline: performance.now() + 5 }),
      code("MP_ERR_DEADLINE_TOO_SHORT"),
    );
  });

  it("removes queued work when the client disconnects", async () => {
    const { run, batches } = doubler(40);
    const b = new Batcher(run, { ...base, maxBatchRows: 1, maxDelayMs: 0 });
    const running = b.submit(rowsOf([1]));
    const cancel = new CancelHandle();
    const gone = b.submit(rowsOf([2]), { cancel });
    const kept = b.submit(rowsOf([3]));
    assert.equal(b.depth.queuedRows, 2);
    cancel.cancel();
    await assert.rejects(gone, code("MP_ERR_REQUEST_CANCELED"));
    assert.equal(b.depth.queuedRows, 1);
    await running;
    await kept;
    assert.deepEqual(batches, [[1], [3]]);
  });

  it("a full queue refuses with 503 MP_ERR_MODEL_OVERLOADED and a Retry-After estimate", async () => {
    const { run } = doubler(20);
    const b = new Batcher(run, { ...base, maxBatchRows: 2, maxQueueRows: 4, maxDelayMs: 0 });
    const accepted = Array.from({ length: 5 }, (_, i) => b.submit(rowsOf([i])));
    await assert.rejects(b.submit(rowsOf([9])), (e: unknown) => {
      assert.ok(e instanceof ModelportError);
      assert.equal(e.code, "MP_ERR_MODEL_OVERLOADED");
      assert.equal(e.status, 503);
      assert.ok((e.details?.retryAfterSeconds as number) >= 1);
      return true;
    });
    // Every accepted request still gets its own answer.
    assert.deepEqual((await Promise.all(accepted)).map(values), [[0], [2], [4], [6], [8]]);
  });

  it("a failing request does not fail the others in its batch", async () => {
    const calls: number[][] = [];
    const run = async (inputs: TensorMap): Promise<TensorMap> => {
      const data = inputs.x!.data as Float32Array;
      calls.push(Array.from(data));
      if (data.includes(13)) throw new ModelportError("MP_ERR_INFERENCE_FAILED", "unlucky row");
      return { y: { datatype: "FP32", shape: [...inputs.x!.shape], data: data.map((v) => v * 2) } };
    };
    const b = new Batcher(run, base);
    const [a, bad, c] = await Promise.allSettled([
      b.submit(rowsOf([1])),
      b.submit(rowsOf([13])),
      b.submit(rowsOf([3])),
    ]);
    assert.equal(a.status, "fulfilled");
    assert.deepEqual(values(a.value), [2]);
    assert.equal(c.status, "fulfilled");
    assert.deepEqual(values(c.value), [6]);
    assert.equal(bad.status, "rejected");
    assert.ok(code("MP_ERR_INFERENCE_FAILED")(bad.reason), String(bad.reason));
    assert.match((bad.reason as Error).message, /unlucky row/);
    // They were tried together first: the isolation happened after a joint batch failed.
    assert.deepEqual(calls[0], [1, 13, 3]);
  });

  it("a non-batchable model gets one request per call", async () => {
    const { run, batches } = doubler(0);
    const b = new Batcher(run, { ...base, batchable: false });
    await Promise.all([b.submit(rowsOf([1], [2])), b.submit(rowsOf([3]))]);
    assert.deepEqual(batches, [[1, 2], [3]]);
  });

  it("background work waits behind synchronous requests", async () => {
    const { run, batches } = doubler(20);
    const b = new Batcher(run, { ...base, maxBatchRows: 1, maxDelayMs: 0 });
    const first = b.submit(rowsOf([1]));
    const jobs = [b.submit(rowsOf([10]), { background: true }), b.submit(rowsOf([11]), { background: true })];
    const sync = b.submit(rowsOf([2]));
    await Promise.all([first, sync, ...jobs]);
    assert.deepEqual(batches, [[1], [2], [10], [11]]);
  });
});
