// The idle-cores hint: a model whose runner was busy nearly all of a window while the process
// left cores idle gets one warning naming more threads and `modelport tune`; a model that is not
// the bottleneck, a machine with no idle core, a model already on every core, or a runner that
// restarted (its counter went back) gets none. Windows and CPU time are given, not measured.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { IdleCoresWatch, type RunnerLoad } from "../../src/lifecycle/idle-cores.js";

function watch(cores: number, loads: RunnerLoad[]) {
  const lines: string[] = [];
  const w = new IdleCoresWatch(cores, () => loads, {
    warn: (_o: unknown, msg?: string) => lines.push(msg ?? ""),
  });
  return { w, lines };
}

describe("IdleCoresWatch", () => {
  it("warns once about a saturated runner beside an idle core", () => {
    const m = { name: "wide", threads: 1, runnerBusyMs: 0 };
    const { w, lines } = watch(2, [m]);
    w.check(0, 0);
    m.runnerBusyMs = 29_500; // 98% of a 30 s window
    assert.deepEqual(w.check(30_000, 36e6), ["wide"]); // 36 s of CPU in 30 s: 1.2 cores of 2
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /wide: its runner was busy 98% .* used 1\.2 of 2 cores/);
    assert.match(lines[0]!, /threads: 2/);
    assert.match(lines[0]!, /modelport tune/);
    m.runnerBusyMs += 30_000;
    assert.deepEqual(w.check(60_000, 72e6), [], "once per model");
  });

  it("stays quiet when the runner is not the bottleneck, or no core is idle", () => {
    const m = { name: "m", threads: 1, runnerBusyMs: 0 };
    const { w, lines } = watch(2, [m]);
    w.check(0, 0);
    m.runnerBusyMs = 15_000; // 50%
    assert.deepEqual(w.check(30_000, 30e6), []);
    m.runnerBusyMs += 30_000; // saturated, but the process used 1.9 of 2 cores
    assert.deepEqual(w.check(60_000, 30e6 + 57e6), []);
    assert.equal(lines.length, 0);
  });

  it("stays quiet for a model already on every core, and after a runner restart", () => {
    const all = { name: "all", threads: 2, runnerBusyMs: 0 };
    const restarted = { name: "restarted", threads: 1, runnerBusyMs: 50_000 };
    const { w, lines } = watch(2, [all, restarted]);
    w.check(0, 0);
    all.runnerBusyMs = 30_000;
    restarted.runnerBusyMs = 100; // a fresh batcher counts from zero
    assert.deepEqual(w.check(30_000, 30e6), []);
    assert.equal(lines.length, 0);
  });
});
