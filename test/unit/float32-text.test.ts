// FP32 values as JSON text (src/protocol/float32-text.ts): every text must be valid JSON, read back
// as the same FP32 value, have no more significant digits than the nearest decimal of the fewest
// digits that reads back (the reference), and look as JSON.stringify writes that number.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FLOAT32_TEXT_MAX, writeFloat32 } from "../../src/protocol/float32-text.js";

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const out = Buffer.alloc(64);

function text(bits: number): { value: number; text: string } {
  u32[0] = bits;
  const value = f32[0]!;
  const end = writeFloat32(value, bits, out, 0);
  assert.ok(end <= FLOAT32_TEXT_MAX, `${value} took ${end} bytes`);
  return { value, text: out.toString("latin1", 0, end) };
}

const ofValue = (x: number) => {
  f32[0] = x;
  return text(u32[0]!).text;
};

/** The nearest decimal with the fewest significant digits (1 to 9) that reads back as `a` (> 0). */
function reference(a: number): number {
  for (let digits = 1; digits < 9; digits++) {
    const v = Number(a.toPrecision(digits));
    if (Math.fround(v) === a) return v;
  }
  return Number(a.toPrecision(9));
}

const significant = (s: string) =>
  s.replace(/^-/, "").replace(/e.*$/, "").replace(".", "").replace(/^0+/, "").replace(/0+$/, "").length;

/** Checks one bit pattern; returns a description of what is wrong, or "". */
function problem(bits: number): string {
  const { value, text: s } = text(bits);
  if (!Number.isFinite(value)) return s === "null" ? "" : `${value} → ${s}`;
  let read: number;
  try {
    read = JSON.parse(s) as number;
  } catch {
    return `${value} → ${s}: not JSON`;
  }
  if (value === 0) return s === "0" ? "" : `${value} → ${s}`;
  if (Math.fround(read) !== value) return `${value} → ${s} reads back as ${Math.fround(read)}`;
  const ref = reference(Math.abs(value));
  if (significant(s) > significant(String(ref))) return `${value} → ${s}, longer than ${ref}`;
  if (JSON.stringify(read) !== s)
    return `${value} → ${s}, where JSON.stringify writes ${JSON.stringify(read)}`;
  return "";
}

function check(patterns: Iterable<number>): void {
  const wrong: string[] = [];
  let count = 0;
  for (const bits of patterns) {
    count++;
    const p = problem(bits >>> 0);
    if (p && wrong.push(p) >= 5) break;
  }
  assert.deepEqual(wrong, [], `${wrong.length} of ${count} patterns`);
}

/** xorshift32: the same patterns on every run. */
function* random(count: number, seed: number): Generator<number> {
  let x = seed;
  for (let i = 0; i < count; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    yield x >>> 0;
  }
}

function* around(values: readonly number[], radius: number): Generator<number> {
  for (const v of values) {
    f32[0] = v;
    const center = u32[0]!;
    for (let d = -radius; d <= radius; d++) {
      const bits = center + d;
      if (bits < 0 || bits > 0x7fffffff) continue;
      yield bits;
      yield (bits | 0x80000000) >>> 0;
    }
  }
}

describe("FP32 values as JSON text", () => {
  it("writes chosen values as the fewest digits, in JSON.stringify's notation", () => {
    assert.equal(ofValue(0), "0");
    assert.equal(ofValue(-0), "0");
    assert.equal(ofValue(Number.NaN), "null");
    assert.equal(ofValue(Number.POSITIVE_INFINITY), "null");
    assert.equal(ofValue(Number.NEGATIVE_INFINITY), "null");
    assert.equal(ofValue(0.1), "0.1");
    assert.equal(ofValue(-2.5), "-2.5");
    assert.equal(ofValue(1 / 3), "0.33333334");
    assert.equal(ofValue(0.00008486588922096416), "0.00008486589");
    assert.equal(ofValue(16777216), "16777216");
    assert.equal(ofValue(1e9), "1000000000");
    assert.equal(ofValue(1e-7), "1e-7");
    assert.equal(ofValue(0.000001), "0.000001");
    assert.equal(ofValue(1e21), "1e+21");
    assert.equal(ofValue(123456789), "123456790");
    assert.equal(ofValue(3.4028234663852886e38), "3.4028235e+38");
    assert.equal(ofValue(1.1754943508222875e-38), "1.1754944e-38");
    assert.equal(ofValue(1.401298464324817e-45), "1e-45");
    // A power of two: its interval reaches further up than down, and a shorter text lies above it
    // than the nearest 9-digit one below.
    assert.equal(ofValue(2 ** -96), "1.2621775e-29");
  });

  it("every text of 300,000 random bit patterns reads back, is shortest and is JSON.stringify's", () => {
    check(random(300_000, 0x9e3779b9));
  });

  it("runs of neighbours around powers of ten, the fast range's edges, and the extremes", () => {
    const values = [1, 0.001, 1e-6, 1e-7, 1e-13, 1e-14, 1e-15, 1e8, 1e9, 1e20, 1e21, 1e22, 2 ** 24];
    const extremes = [1.1754943508222875e-38, 3.4028234663852886e38, 1.401298464324817e-45];
    check(around([...values, ...extremes], 2000));
  });

  it("the ends of every binade", () => {
    check(
      (function* () {
        for (let field = 0; field < 255; field++)
          for (let m = 0; m < 64; m++) {
            yield (field << 23) | m;
            yield (field << 23) | (0x7fffff - m);
          }
      })(),
    );
  });
});
