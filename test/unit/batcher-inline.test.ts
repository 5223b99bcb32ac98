// The batcher's inline lane: a request that finds the process idle goes to the in-thread copy only
// once enough batches have been measured and the predicted time is within maxMs; anything queued or
// running (in any model of the process), a pause, a big request, a slow model or a recent call that
// other requests arrived during keeps requests on the runner; a call far over its limit drops the
// lane for good. Time is a fake clock that the scoring functions advance by what they "cost", so
// the decisions are exact and independent of the machine's speed.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ModelportError } from "../../src/errors.js";
import {
  Batcher,
  type BatcherOptions,
  INLINE_CROWDED_MS,
  INLINE_MIN_SAMPLES,
  INLINE_SLOW_CALLS,
  INLINE_SLOW_FACTOR,
} from "../../src/runner/batcher.js";
import type { TensorMap } from "../../src/tensor.js";

const rows = (n: number, v = 1): TensorMap => ({
  x: { datatype: "FP32", shape: [n, 1], data: new Float32Array(n).fill(v) },
});
const doubled = (inputs: TensorMap): TensorMap => {
  const x = inputs.x!;
  return { y: { datatype: "FP32", shape: [...x.shape], data: (x.data as Float32Array).map((v) => v * 2) } };
};

/** A batcher whose runner and inline copy cost `runnerMs(rows)` / `inlineMs(rows)` on a fake clock. */
function setup(opts: {
  runnerMs: (rows: number) => number;
  /** The model's own time within runnerMs, as a worker reports it (default: all of it). */
  computeMs?: (rows: number) => number;
  inlineMs?: (rows: number) => number;
  maxMs?: number;
  inlineError?: Error;
  extra?: Partial<BatcherOptions>;
}) {
  let now = 0;
  const calls = { runner: 0, inline: 0 };
  const slow: number[] = [];
  const cost = (inputs: TensorMap) => inputs.x!.shape[0]!;
  const b: Batcher = new Batcher(
    async (inputs) => {
      calls.runner++;
      await new Promise((r) => setImmediate(r));
      now += opts.runnerMs(cost(inputs));
      const outputs = doubled(inputs);
      b.observeCompute(outputs, (opts.computeMs ?? opts.runnerMs)(cost(inputs)));
      return outputs;
    },
    {
      maxBatchRows: 64,
      maxDelayMs: 0,
      maxInFlight: 2,
      adaptive: true,
      maxQueueRows: 1000,
      batchable: true,
      clock: () => now,
      inline: {
        maxMs: opts.maxMs ?? 1,
        predict: async (inputs) => {
          calls.inline++;
          now += (opts.inlineMs ?? opts.computeMs ?? opts.runnerMs)(cost(inputs));
          if (opts.inlineError) throw opts.inlineError;
          return doubled(inputs);
        },
      },
      onInlineSlow: (ms) => slow.push(ms),
      ...opts.extra,
    },
  );
  /** Sequential requests of `n` rows: each waits for the previous answer, like a loop at concurrency 1. */
  const loop = async (count: number, n = 1) => {
    for (let i = 0; i < count; i++) {
      const out = await b.submit(rows(n, i));
      assert.deepEqual(Array.from(out.y!.data as Float32Array), new Array(n).fill(2 * i));
      // The next request comes over the network: the batcher has finished its bookkeeping by then.
      await new Promise((r) => setImmediate(r));
    }
  };
  return { b, calls, slow, loop, advance: (ms: number) => (now += ms) };
}

describe("Batcher inline lane", () => {
  it("measures on the runner first, then sends requests to an idle, short model in-thread", async () => {
    const { b, calls, loop } = setup({ runnerMs: () => 0.2 });
    await loop(INLINE_MIN_SAMPLES);
    assert.deepEqual(
      calls,
      { runner: INLINE_MIN_SAMPLES, inline: 0 },
      "nothing inline before it is measured",
    );
    await loop(20);
    assert.deepEqual(calls, { runner: INLINE_MIN_SAMPLES, inline: 20 });
    assert.deepEqual(b.inlineStatus, { active: true, calls: 20 });
  });

  it("goes by the model's own compute time, not by batch times inflated by the hop and wake-ups", async () => {
    // A sleeping worker makes every batch look like 3 ms; the model itself takes 0.1 ms.
    const { calls, loop } = setup({ runnerMs: () => 3, computeMs: () => 0.1 });
    await loop(INLINE_MIN_SAMPLES + 5);
    assert.deepEqual(calls, { runner: INLINE_MIN_SAMPLES, inline: 5 });
  });

  it("a model measured slower than maxMs never runs in-thread", async () => {
    const { calls, loop } = setup({ runnerMs: () => 1.5, maxMs: 1 });
    await loop(30);
    assert.deepEqual(calls, { runner: 30, inline: 0 });
  });

  it("judges each request by its predicted time: a small request in-thread, a big one on the runner", async () => {
    // 0.1 ms + 0.05 ms a row: 1 row 0.15 ms, 30 rows 1.6 ms (over maxMs 1).
    const { calls, loop } = setup({ runnerMs: (n) => 0.1 + 0.05 * n });
    for (let i = 0; i < INLINE_MIN_SAMPLES; i++) await loop(1, 1 + (i % 4) * 8);
    calls.runner = 0;
    await loop(5, 1);
    await loop(5, 30);
    assert.deepEqual(calls, { runner: 5, inline: 5 });
  });

  it("a request that arrives while another is in flight or queued goes to the runner", async () => {
    const { b, calls, loop } = setup({ runnerMs: () => 0.2 });
    await loop(INLINE_MIN_SAMPLES);
    calls.runner = 0;
    // Three at once: the first finds the model idle, the others find it busy.
    const answers = await Promise.all([b.submit(rows(1, 1)), b.submit(rows(1, 2)), b.submit(rows(1, 3))]);
    assert.deepEqual(
      answers.map((a) => a.y!.data[0]),
      [2, 4, 6],
    );
    assert.equal(calls.inline, 1);
    assert.ok(calls.runner >= 1, "the busy-time requests went to the runner");
  });

  it("a request while another model's request is unanswered goes to the runner", async () => {
    const { b, calls, loop } = setup({ runnerMs: () => 0.2 });
    await loop(INLINE_MIN_SAMPLES);
    calls.runner = 0;
    // Another model (another batcher in this process) holds a request on its runner.
    let release = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const other = new Batcher(
      async (inputs) => {
        await gate;
        return doubled(inputs);
      },
      { maxBatchRows: 8, maxDelayMs: 0, maxInFlight: 1, adaptive: false, maxQueueRows: 10, batchable: true },
    );
    const held = other.submit(rows(1, 7));
    assert.equal((await b.submit(rows(1, 3))).y!.data[0], 6);
    assert.deepEqual(calls, { runner: 1, inline: 0 }, "the HTTP thread is left to the other request");
    release();
    assert.equal((await held).y!.data[0], 14);
    await new Promise((r) => setImmediate(r));
    await loop(1);
    assert.equal(calls.inline, 1, "alone again: in-thread");
  });

  it("a paused model (its runner being replaced) takes nothing in-thread", async () => {
    const { b, calls, loop } = setup({ runnerMs: () => 0.2 });
    await loop(INLINE_MIN_SAMPLES);
    b.pause();
    const pending = b.submit(rows(1, 5));
    await new Promise((r) => setImmediate(r));
    assert.equal(calls.inline, 0);
    b.resume();
    assert.equal((await pending).y!.data[0], 10);
    assert.equal(calls.inline, 0, "it ran on the runner after resume");
  });

  it("one slow in-thread call alone (the machine, not the model) keeps the lane", async () => {
    let inlineCost = 0.2;
    const { b, calls, slow, loop } = setup({ runnerMs: () => 0.2, inlineMs: () => inlineCost });
    await loop(INLINE_MIN_SAMPLES + 1);
    inlineCost = INLINE_SLOW_FACTOR + 0.1;
    await loop(1);
    inlineCost = 0.2;
    await loop(100);
    assert.equal(slow.length, 0);
    assert.equal(b.inlineStatus.active, true);
    assert.ok(calls.inline > 50, `${calls.inline} in-thread calls`);
  });

  it(`in-thread calls that keep taking ${INLINE_SLOW_FACTOR}x maxMs drop the lane for good`, async () => {
    let inlineCost = 0.2;
    const { b, calls, slow, loop } = setup({ runnerMs: () => 0.2, inlineMs: () => inlineCost });
    await loop(INLINE_MIN_SAMPLES + 1);
    // Data-dependent work: every in-thread call is now slow, while the runner's reports stay short,
    // so the fitted estimate keeps letting an occasional request in until the lane is dropped.
    inlineCost = INLINE_SLOW_FACTOR + 0.1;
    for (let i = 0; i < 500 && slow.length === 0; i++) await loop(1);
    assert.equal(slow.length, 1, "dropped once");
    assert.equal(b.inlineStatus.active, false);
    const inlineCalls = calls.inline;
    await loop(20);
    assert.equal(calls.inline, inlineCalls, "no in-thread call after the drop");
    assert.ok(inlineCalls - 1 >= INLINE_SLOW_CALLS, `${inlineCalls - 1} slow calls before the drop`);
  });

  it("a burst that arrives during in-thread calls does not count as the model's time", async () => {
    // onnxruntime-node runs a session in a setImmediate callback: requests arriving meanwhile are
    // read and parsed before it runs, and their time lies inside the in-thread call's.
    let burst = false;
    const { b, calls, slow, loop, advance } = setup({
      runnerMs: () => 0.2,
      inlineMs: () => (burst ? INLINE_SLOW_FACTOR + 0.1 : 0.2),
    });
    await loop(INLINE_MIN_SAMPLES);
    burst = true;
    for (let round = 0; round < 2 * INLINE_SLOW_CALLS; round++) {
      const inlineBefore = calls.inline;
      const first = b.submit(rows(1, 1));
      // 63 more requests while the first is on the in-thread copy: they queue for the runner.
      const others = Array.from({ length: 63 }, () => b.submit(rows(1, 2)));
      await Promise.all([first, ...others]);
      assert.equal(calls.inline, inlineBefore + 1, "the burst's first request ran in-thread");
      await new Promise((r) => setImmediate(r));
      advance(INLINE_CROWDED_MS);
    }
    assert.deepEqual(slow, [], "not dropped");
    burst = false;
    const inlineBefore = calls.inline;
    await loop(20);
    assert.equal(b.inlineStatus.active, true);
    assert.equal(calls.inline, inlineBefore + 20, "requests alone still run in-thread");
  });

  it(`under concurrent load the lane steps aside for ${INLINE_CROWDED_MS} ms after a crowded call`, async () => {
    const { b, calls, loop, advance } = setup({ runnerMs: () => 0.2 });
    await loop(INLINE_MIN_SAMPLES);
    // Concurrency 64: the process is idle only between a batch's answers and the next arrivals.
    const burst = () => Promise.all(Array.from({ length: 64 }, (_, i) => b.submit(rows(1, i))));
    const inlineBefore = calls.inline;
    await burst();
    assert.equal(calls.inline, inlineBefore + 1, "the first burst's first request ran in-thread");
    for (let round = 0; round < 20; round++) {
      await burst();
      advance(INLINE_CROWDED_MS / 40);
    }
    assert.equal(calls.inline, inlineBefore + 1, "no in-thread call while bursts keep coming");
    advance(INLINE_CROWDED_MS);
    await loop(20);
    assert.equal(calls.inline, inlineBefore + 21, "requests alone run in-thread again");
    assert.equal(b.inlineStatus.active, true);
  });

  it("an in-thread failure reaches its caller with its code, and the lane stays", async () => {
    const err = new ModelportError("MP_ERR_INFERENCE_FAILED", "bad input for this model");
    const { b, calls, loop } = setup({ runnerMs: () => 0.2, inlineError: err });
    await loop(INLINE_MIN_SAMPLES);
    await assert.rejects(b.submit(rows(1)), (e) => e instanceof ModelportError && e.code === err.code);
    assert.equal(calls.inline, 1);
    assert.equal(b.inlineStatus.active, true);
    assert.deepEqual(b.depth, { queuedRows: 0, inFlight: 0 }, "nothing left in flight");
  });
});
