// The batcher's inline lane: a request that finds the model idle goes to the in-thread copy only
// once enough batches have been measured and the predicted time is within maxMs; anything queued
// or running, a pause, a big request or a slow model keeps requests on the runner; a call far over
// its limit drops the lane for good. Time is a fake clock that the scoring functions advance by
// what they "cost", so the decisions are exact and independent of the machine's speed.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ModelportError } from "../../src/errors.js";
import {
  Batcher,
  type BatcherOptions,
  INLINE_MIN_SAMPLES,
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
  inlineMs?: (rows: number) => number;
  maxMs?: number;
  inlineError?: Error;
  extra?: Partial<BatcherOptions>;
}) {
  let now = 0;
  const calls = { runner: 0, inline: 0 };
  const slow: number[] = [];
  const cost = (inputs: TensorMap) => inputs.x!.shape[0]!;
  const b = new Batcher(
    async (inputs) => {
      calls.runner++;
      await new Promise((r) => setImmediate(r));
      now += opts.runnerMs(cost(inputs));
      return doubled(inputs);
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
          now += (opts.inlineMs ?? opts.runnerMs)(cost(inputs));
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
  return { b, calls, slow, loop };
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

  it(`a call ${INLINE_SLOW_FACTOR}x over maxMs drops the lane: later requests go to the runner`, async () => {
    let inlineCost = 0.2;
    const { b, calls, slow, loop } = setup({ runnerMs: () => 0.2, inlineMs: () => inlineCost });
    await loop(INLINE_MIN_SAMPLES + 1);
    assert.equal(calls.inline, 1);
    inlineCost = INLINE_SLOW_FACTOR * 1 + 0.1;
    await loop(1); // answered (the work was done), then the lane is dropped
    assert.equal(slow.length, 1);
    inlineCost = 0.2;
    await loop(10);
    assert.equal(calls.inline, 2, "no inline call after the slow one");
    assert.deepEqual(b.inlineStatus, { active: false, calls: 2 });
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
