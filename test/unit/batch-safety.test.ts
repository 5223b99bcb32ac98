// The batch path's safety, around scoring functions that misbehave: requests of different
// layouts (trailing dims, datatypes, input names) never share a batch and none starves; a
// runner answer of the wrong size, or a runner that throws, fails only the requests concerned
// and never escapes as an unhandled rejection; a deadline answers 504 even while the runner
// still computes (and for requests queued behind it); a batch past the hard limit is reported
// once.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ModelportError } from "../../src/errors.js";
import { Batcher, type BatcherOptions } from "../../src/runner/batcher.js";
import { concatBatch, joinable, splitBatch } from "../../src/runner/tensor-batch.js";
import type { TensorMap } from "../../src/tensor.js";

const t = (shape: number[], values?: number[], name = "x"): TensorMap => ({
  [name]: {
    datatype: "FP32",
    shape,
    data: Float32Array.from(values ?? Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => i)),
  },
});

const base: BatcherOptions = {
  maxBatchRows: 64,
  maxDelayMs: 30,
  maxInFlight: 1,
  adaptive: false,
  maxQueueRows: 1000,
  batchable: true,
};

const code = (c: string) => (e: unknown) => e instanceof ModelportError && e.code === c;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Identity runner that records the shape of each batch it saw. */
function identity() {
  const batches: number[][] = [];
  const run = async (inputs: TensorMap): Promise<TensorMap> => {
    batches.push([...inputs.x!.shape]);
    await sleep(1);
    return { y: { ...inputs.x! } };
  };
  return { run, batches };
}

const unhandled: unknown[] = [];
const onUnhandled = (err: unknown) => unhandled.push(err);
before(() => process.on("unhandledRejection", onUnhandled));
after(() => process.off("unhandledRejection", onUnhandled));

describe("tensor-batch", () => {
  it("joinable compares names, datatypes, rank and the dims after dim 0", () => {
    assert.ok(joinable(t([1, 2]), t([5, 2])));
    assert.ok(!joinable(t([1, 2]), t([1, 8])), "another width");
    assert.ok(!joinable(t([1, 2]), t([2])), "another rank");
    assert.ok(!joinable(t([1, 2]), t([1, 2], undefined, "z")), "another name");
    assert.ok(!joinable(t([1, 2]), { ...t([1, 2]), ...t([1, 2], undefined, "z") }), "an extra input");
    const ints: TensorMap = { x: { datatype: "INT32", shape: [1, 2], data: new Int32Array(2) } };
    assert.ok(!joinable(t([1, 2]), ints), "another datatype");
    assert.ok(!joinable(t([]), t([])), "scalars have no batch dim");
  });

  it("concatBatch refuses parts that do not line up, and data that does not fill its shape", () => {
    assert.throws(() => concatBatch([t([1, 2]), t([1, 8])]), code("MP_ERR_INFERENCE_FAILED"));
    const short: TensorMap = { x: { datatype: "FP32", shape: [1, 8], data: new Float32Array(2) } };
    assert.throws(() => concatBatch([t([1, 8]), short]), code("MP_ERR_INFERENCE_FAILED"));
  });

  it("splitBatch verifies dim 0 and sizes instead of reading past the data", () => {
    assert.throws(() => splitBatch(t([3, 2]), [1, 1]), code("MP_ERR_INFERENCE_FAILED"));
    const lying: TensorMap = { y: { datatype: "FP32", shape: [2, 8], data: new Float32Array(10) } };
    assert.throws(() => splitBatch(lying, [1, 1]), code("MP_ERR_INFERENCE_FAILED"));
    assert.throws(() => splitBatch(lying, [2]), code("MP_ERR_INFERENCE_FAILED"));
    assert.throws(() => splitBatch(t([]), [1, 1]), code("MP_ERR_INFERENCE_FAILED"));
    const [a, b] = splitBatch(t([3, 2]), [1, 2]);
    assert.deepEqual(Array.from(a!.x!.data as Float32Array), [0, 1]);
    assert.deepEqual(Array.from(b!.x!.data as Float32Array), [2, 3, 4, 5]);
  });
});

describe("Batcher with mixed layouts", () => {
  it("joins only requests of the same layout, oldest layout first, and answers each with its own data", async () => {
    const { run, batches } = identity();
    const b = new Batcher(run, base);
    const widths = [2, 8, 2, 8, 3, 2];
    const sent = widths.map((w, i) =>
      t(
        [1, w],
        Array.from({ length: w }, (_, c) => i * 100 + c),
      ),
    );
    const answers = await Promise.all(sent.map((s) => b.submit(s)));
    for (const [i, a] of answers.entries()) assert.deepEqual(a.y!.data, sent[i]!.x!.data, `request ${i}`);
    // Oldest first: the width-2 batch, then width 8, then width 3; nobody of another width joined.
    assert.deepEqual(batches, [
      [3, 2],
      [2, 8],
      [1, 3],
    ]);
  });

  it("a layout that keeps arriving does not starve an older request of another layout", async () => {
    const { run, batches } = identity();
    const b = new Batcher(run, { ...base, maxBatchRows: 4, maxDelayMs: 0 });
    const pending: Promise<TensorMap>[] = [];
    for (let i = 0; i < 8; i++) pending.push(b.submit(t([1, 2])));
    const odd = b.submit(t([1, 5]));
    for (let i = 0; i < 8; i++) pending.push(b.submit(t([1, 2])));
    await odd;
    // The odd one goes as soon as it is the oldest: after the 8 width-2 rows queued before it,
    // and at most the rest of one batch of later ones that joined the last of those.
    const at = batches.findIndex((s) => s[1] === 5);
    const rowsBefore = batches.slice(0, at).reduce((n, s) => n + s[0]!, 0);
    assert.ok(rowsBefore < 8 + 4, `${rowsBefore} rows of the other width ran first`);
    await Promise.all(pending);
  });
});

describe("Batcher failures stay contained", () => {
  it("a runner answer of the wrong size fails those requests with MP_ERR_INFERENCE_FAILED", async () => {
    const b = new Batcher(async (inputs) => {
      const rows = inputs.x!.shape[0]!;
      return { y: { datatype: "FP32", shape: [rows, 4], data: new Float32Array(rows) } };
    }, base);
    const all = await Promise.allSettled([b.submit(t([1, 4])), b.submit(t([2, 4]))]);
    for (const r of all) {
      assert.equal(r.status, "rejected");
      assert.ok(code("MP_ERR_INFERENCE_FAILED")((r as PromiseRejectedResult).reason));
    }
  });

  it("a runner that throws synchronously, or rejects with a non-Error, fails its requests only", async () => {
    let calls = 0;
    const b = new Batcher(
      (() => {
        calls++;
        if (calls === 1) throw new Error("sync throw");
        return Promise.reject("a string");
      }) as unknown as (inputs: TensorMap) => Promise<TensorMap>,
      { ...base, maxDelayMs: 0 },
    );
    await assert.rejects(b.submit(t([1, 2])), /sync throw/);
    await assert.rejects(b.submit(t([1, 2])), code("MP_ERR_SERVER_INTERNAL"));
    const { run } = identity();
    const ok = new Batcher(run, base);
    assert.equal((await ok.submit(t([1, 2]))).y!.shape[0], 1);
  });

  it("no unhandled rejection came out of any of this", async () => {
    await sleep(10);
    assert.deepEqual(unhandled, []);
  });
});

describe("Batcher deadlines on the runner", () => {
  it("answers 504 at the deadline while the runner still computes, and for the request queued behind it", async () => {
    let release: () => void = () => {};
    // A runner that never answers by itself; its timer stands for the thread that keeps a real
    // runner's process alive.
    const run = (inputs: TensorMap) =>
      new Promise<TensorMap>((resolve) => {
        const hold = setTimeout(() => {}, 60_000);
        release = () => {
          clearTimeout(hold);
          resolve({ y: { ...inputs.x! } });
        };
      });
    const b = new Batcher(run, { ...base, maxDelayMs: 0 });
    const t0 = performance.now();
    const running = b.submit(t([1, 2]), { deadline: t0 + 150 });
    await sleep(20);
    const queued = b.submit(t([1, 2]), { deadline: t0 + 250 });
    await assert.rejects(running, code("MP_ERR_DEADLINE_EXCEEDED"));
    await assert.rejects(queued, code("MP_ERR_DEADLINE_EXCEEDED"));
    // Bounded by the deadlines, not by the runner, which has not answered at all.
    assert.ok(performance.now() - t0 < 5000);
    release();
    await sleep(10);
    assert.deepEqual(b.depth, { queuedRows: 0, inFlight: 0 });
  });

  it("reports a batch on the runner past the hard limit, once", async () => {
    const stuck: number[] = [];
    let release: () => void = () => {};
    // A runner that never answers by itself; its timer stands for the thread that keeps a real
    // runner's process alive.
    const run = (inputs: TensorMap) =>
      new Promise<TensorMap>((resolve) => {
        const hold = setTimeout(() => {}, 60_000);
        release = () => {
          clearTimeout(hold);
          resolve({ y: { ...inputs.x! } });
        };
      });
    const b = new Batcher(run, {
      ...base,
      maxDelayMs: 0,
      hardTimeoutMs: 100,
      onStuck: (ms, rows) => stuck.push(rows, ms),
    });
    const answer = b.submit(t([3, 2]));
    await sleep(400);
    assert.equal(stuck.length, 2, "called once");
    assert.equal(stuck[0], 3);
    assert.ok(stuck[1]! >= 100);
    release();
    assert.equal((await answer).y!.shape[0], 3);
  });
});
