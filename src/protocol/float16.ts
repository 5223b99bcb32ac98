// IEEE 754 half-precision conversion: modelport carries FP16 as float32 numbers and converts at
// the wire (binary tensor bytes) and at the onnxruntime boundary, which want raw half bits.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float32 values → half bits, rounding to nearest even. */
export function toHalfBits(values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    f32[0] = values[i]!;
    const x = u32[0]!;
    const sign = (x >>> 16) & 0x8000;
    const exp = (x >>> 23) & 0xff;
    let mant = x & 0x7fffff;
    if (exp === 0xff) {
      out[i] = sign | 0x7c00 | (mant ? 0x200 : 0);
      continue;
    }
    let e = exp - 127 + 15;
    if (e >= 0x1f) {
      out[i] = sign | 0x7c00;
      continue;
    }
    if (e <= 0) {
      if (e < -10) {
        out[i] = sign;
        continue;
      }
      mant |= 0x800000;
      const shift = 14 - e;
      let half = mant >>> shift;
      const rest = mant & ((1 << shift) - 1);
      const midpoint = 1 << (shift - 1);
      if (rest > midpoint || (rest === midpoint && half & 1)) half++;
      out[i] = sign | half;
      continue;
    }
    let half = (e << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && half & 1)) half++;
    e = half;
    out[i] = sign | e;
  }
  return out;
}

/** half bits → float32 values. */
export function fromHalfBits(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const h = bits[i]!;
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 0) out[i] = sign * 2 ** -14 * (mant / 1024);
    else if (exp === 0x1f) out[i] = mant ? Number.NaN : sign * Number.POSITIVE_INFINITY;
    else out[i] = sign * 2 ** (exp - 15) * (1 + mant / 1024);
  }
  return out;
}
