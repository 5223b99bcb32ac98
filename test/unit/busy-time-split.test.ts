// The machine time of llama.cpp generations that share a model (src/llm/busy-time-split.ts): each
// interval between starts and ends goes to the generations running in it by the tokens each
// evaluated, equally when none did; idle time to no one; the shares add up to the busy time.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BusyTimeSplit } from "../../src/llm/busy-time-split.js";

const close = (a: number, b: number, eps = 1e-9) => assert.ok(Math.abs(a - b) <= eps, `${a} ≈ ${b}`);

describe("BusyTimeSplit", () => {
  it("a generation alone is billed its whole wall time", () => {
    const s = new BusyTimeSplit();
    const a = s.begin(100, 12);
    s.progress(a, 5);
    assert.equal(s.running, 1);
    assert.equal(s.end(a, 350), 250);
    assert.equal(s.running, 0);
    assert.equal(s.busyMs, 250);
  });

  it("an interval shared by two goes by the tokens each evaluated in it", () => {
    const s = new BusyTimeSplit();
    const a = s.begin(0, 30); // A's prompt: 30 tokens
    s.progress(a, 10); // [0, 100): A alone, 40 tokens
    const b = s.begin(100, 10); // B's prompt: 10 tokens
    s.progress(a, 10); // [100, 200): A 10, B 10 + 30 = 40 tokens
    s.progress(b, 30);
    const msA = s.end(a, 200);
    s.progress(b, 5); // [200, 260): B alone
    const msB = s.end(b, 260);
    close(msA, 100 + (100 * 10) / 50);
    close(msB, (100 * 40) / 50 + 60);
    close(msA + msB, 260);
    assert.equal(s.busyMs, 260);
  });

  it("splits equally an interval in which no one reported tokens", () => {
    const s = new BusyTimeSplit();
    const a = s.begin(0);
    const b = s.begin(0);
    const c = s.begin(0);
    close(s.end(a, 90), 30);
    close(s.end(b, 90), 30);
    close(s.end(c, 90), 30);
  });

  it("idle time between generations is billed to no one", () => {
    const s = new BusyTimeSplit();
    const a = s.begin(0, 1);
    assert.equal(s.end(a, 10), 10);
    const b = s.begin(1000, 1);
    assert.equal(s.end(b, 1004), 4);
    assert.equal(s.busyMs, 14);
  });

  it("the shares of many overlapping generations add up to the busy time exactly", () => {
    const s = new BusyTimeSplit();
    // A deterministic pseudo-random schedule of starts, tokens and ends.
    let seed = 7;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    let now = 0;
    let billed = 0;
    const open: number[] = [];
    for (let step = 0; step < 2000; step++) {
      now += rnd() * 3;
      const r = rnd();
      if (r < 0.3 && open.length < 4) open.push(s.begin(now, Math.floor(rnd() * 50)));
      else if (r < 0.55 && open.length > 0)
        billed += s.end(open.splice(Math.floor(rnd() * open.length), 1)[0]!, now);
      else if (open.length > 0) s.progress(open[Math.floor(rnd() * open.length)]!, 1 + Math.floor(rnd() * 3));
      else now += rnd() * 20; // idle
    }
    for (const id of open.splice(0)) billed += s.end(id, now);
    close(billed, s.busyMs, 1e-6);
    assert.ok(s.busyMs > 0 && s.busyMs < now);
  });

  it("ignores unknown and ended ids", () => {
    const s = new BusyTimeSplit();
    const a = s.begin(0, 1);
    assert.equal(s.end(a, 5), 5);
    s.progress(a, 10);
    assert.equal(s.end(a, 9), 0);
    assert.equal(s.end(42, 9), 0);
    assert.equal(s.busyMs, 5);
  });
});
