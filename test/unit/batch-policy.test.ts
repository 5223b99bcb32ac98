// The batching policy as pure functions of state and a clock: no timers, no models.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  ArrivalRate,
  type BatchSettings,
  type BatchState,
  CostModel,
  decide,
} from "../../src/runner/batch-policy.js";

const settings: BatchSettings = { maxBatchRows: 32, maxDelayMs: 5, maxInFlight: 1, adaptive: true };
const cost = (rows: number) => 0.05 * rows + 1; // 1 ms fixed, 50 µs per row
const state = (over: Partial<BatchState> = {}): BatchState => ({
  now: 100,
  queuedRows: 1,
  oldestAt: 100,
  newestAt: 100,
  earliestDeadline: Number.POSITIVE_INFINITY,
  inFlight: 0,
  ...over,
});

describe("decide", () => {
  it("idle with nothing queued, busy while the runner is full", () => {
    assert.deepEqual(decide(state({ queuedRows: 0 }), settings, cost, 0), { kind: "idle" });
    assert.deepEqual(decide(state({ inFlight: 1 }), settings, cost, 10), { kind: "busy" });
  });

  it("a full batch goes at once, capped at maxBatchRows", () => {
    const d = decide(state({ queuedRows: 50 }), settings, cost, 10);
    assert.deepEqual(d, { kind: "dispatch", rows: 32, why: "full" });
  });

  it("at low load a lone request goes at once: waiting would not gather company", () => {
    // 0.1 rows/ms: one request every 10 ms, while a batch costs ~1 ms.
    const d = decide(state(), settings, cost, 0.1);
    assert.equal(d.kind, "dispatch");
  });

  it("under load it waits while rows keep arriving, never past maxDelayMs", () => {
    // 4 rows/ms: the batch that keeps up is λb/(1−λa) = 4/(0.8) = 5 rows.
    const d = decide(state({ queuedRows: 2, newestAt: 100 }), settings, cost, 4);
    assert.equal(d.kind, "wait");
    if (d.kind === "wait") {
      assert.ok(d.until > 100 && d.until <= 105, `until ${d.until}`);
      assert.equal(d.until, 100 + 2 * (1 / 4)); // the next arrival is due within 2 gaps
    }
    const late = decide(state({ queuedRows: 2, oldestAt: 94, newestAt: 99.9, now: 100 }), settings, cost, 4);
    assert.deepEqual(late, { kind: "dispatch", rows: 2, why: "max delay" });
  });

  it("dispatches when the target batch is reached or arrivals stall", () => {
    assert.deepEqual(decide(state({ queuedRows: 5 }), settings, cost, 4), {
      kind: "dispatch",
      rows: 5,
      why: "target",
    });
    const stalled = decide(state({ queuedRows: 2, newestAt: 99, now: 100 }), settings, cost, 4);
    assert.deepEqual(stalled, { kind: "dispatch", rows: 2, why: "stalled" });
  });

  it("saturated arrivals aim for full batches", () => {
    // λa ≥ 1: rows arrive faster than one row's cost: wait for a full batch (within maxDelay).
    const d = decide(state({ queuedRows: 20, newestAt: 100 }), settings, cost, 25);
    assert.equal(d.kind, "wait");
  });

  it("never waits past what the earliest deadline allows", () => {
    // A full batch costs 2.6 ms; the deadline at 102 leaves no room to wait.
    const d = decide(state({ queuedRows: 2, earliestDeadline: 102 }), settings, cost, 4);
    assert.deepEqual(d, { kind: "dispatch", rows: 2, why: "deadline" });
    const w = decide(state({ queuedRows: 2, earliestDeadline: 103, newestAt: 100 }), settings, cost, 1000);
    assert.equal(w.kind, "wait");
    if (w.kind === "wait") assert.ok(w.until <= 103 - cost(32) + 1e-9);
  });

  it("classic mode waits for a full batch or maxDelayMs", () => {
    const classic = { ...settings, adaptive: false };
    assert.deepEqual(decide(state(), classic, cost, 0.001), { kind: "wait", until: 105 });
    assert.deepEqual(decide(state({ now: 105 }), classic, cost, 0.001), {
      kind: "dispatch",
      rows: 1,
      why: "max delay",
    });
  });
});

describe("CostModel", () => {
  it("fits a·rows + b from observed batches", () => {
    const m = new CostModel();
    for (const rows of [1, 2, 4, 8, 16, 32, 1, 8]) m.observe(rows, 0.2 * rows + 3);
    const { a, b } = m.coefficients;
    assert.ok(Math.abs(a - 0.2) < 1e-9, `a ${a}`);
    assert.ok(Math.abs(b - 3) < 1e-9, `b ${b}`);
    assert.ok(Math.abs(m.estimate(10) - 5) < 1e-9);
  });

  it("forgets old batches beyond its window, and never goes negative", () => {
    const m = new CostModel(4);
    for (let i = 0; i < 10; i++) m.observe(1 + i, 100);
    for (let i = 0; i < 4; i++) m.observe(1 + i, 1 + i);
    assert.ok(Math.abs(m.estimate(2) - 2) < 1e-9);
    const n = new CostModel();
    n.observe(10, 1);
    n.observe(1, 5);
    assert.ok(n.coefficients.a >= 0 && n.coefficients.b >= 0);
  });
});

describe("ArrivalRate", () => {
  it("tracks rows per ms and decays when arrivals stop", () => {
    const r = new ArrivalRate(50);
    for (let t = 0; t <= 500; t += 1) r.observe(2, t);
    assert.ok(Math.abs(r.at(500) - 2) < 0.05, `rate ${r.at(500)}`);
    assert.ok(r.at(600) < 0.6, "halves every 50 ms without arrivals");
  });
});
