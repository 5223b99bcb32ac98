// FP32 values as JSON text: the fewest significant digits that read back as the same FP32 value,
// written straight into a byte buffer. This is how Go's encoding/json, Rust's serde_json and
// orjson write float32 (and numpy's repr of a float32). A client reads the number as a double and
// rounds it to FP32 (Float32Array, numpy's float32, a C float) and has the model's bits exactly.
//
// JSON.stringify of the same values writes the shortest text of the *double* each FP32 value
// widens to (0.00008486588922096416 for what is here 0.00008486589): about 1.7 times the bytes,
// and on 265,000 of the image model's outputs 36–54 ms with the packed array it needs, against
// 16–19 ms here (docs/PERFORMANCE.md).
//
// The method: scale the value and the edges of its rounding interval (halfway to the FP32
// neighbours) to nine significant digits, take the largest power of ten with a multiple in the
// interval, and the multiple nearest to the value. The scaling is a double multiplication, so
// each result is checked by reading it back as a client would (exact arithmetic up to 10^±22, the
// text parsed beyond); a value that fails the check, and a subnormal, is written by the
// reference method: toPrecision with 1 to 9 digits until one reads back. Number notation follows
// ECMAScript's Number::toString, as JSON.stringify writes it (1e-7, 0.000001, 123.5, 1e+21).
// NaN and ±Infinity have no JSON form: `null`, as JSON.stringify writes them.

/** Powers of ten as doubles: exact up to 1e22, correctly rounded above. */
const POW10 = Array.from({ length: 60 }, (_, i) => Number(`1e${i}`));
/** 10^-i, to within a rounding. */
const INVERSE10 = Array.from({ length: 12 }, (_, i) => 1 / POW10[i]!);
/** 2^(i - 174): half an FP32 ulp is 2^(e2 - 24). */
const POW2 = Float64Array.from({ length: 320 }, (_, i) => 2 ** (i - 174));
/** "00" to "99" as character codes. */
const PAIRS = Uint8Array.from({ length: 200 }, (_, i) => 48 + (i & 1 ? (i >> 1) % 10 : ((i >> 1) / 10) | 0));
const fround = Math.fround;

/** Longest text this writes for one value: a sign and 21 digits (ECMAScript writes up to 1e21 whole). */
export const FLOAT32_TEXT_MAX = 22;

/** Writes `value` (an FP32 value; `bits` its IEEE 754 bits) at `out[pos]`; returns the end. */
export function writeFloat32(value: number, bits: number, out: Uint8Array, pos: number): number {
  if (value === 0) {
    out[pos] = 48;
    return pos + 1;
  }
  if (!Number.isFinite(value)) {
    out.set(NULL, pos);
    return pos + 4;
  }
  let a = value;
  if (a < 0) {
    out[pos++] = 45;
    a = -a;
  }
  return shortest(a, bits) ? writeDigits(found.r, found.e, out, pos) : writeReference(a, out, pos);
}

/**
 * The number a client reads from the text writeFloat32 writes for `value` (JSON.stringify writes
 * that text for it): for the JSON values of an FP32 tensor. NaN and ±Infinity are returned as they are.
 */
export function float32Value(value: number, bits: number): number {
  if (value === 0) return 0;
  if (!Number.isFinite(value)) return value;
  const a = value < 0 ? -value : value;
  const read = shortest(a, bits) ? found.read : Number(a.toPrecision(referenceDigits(a)));
  return value < 0 ? -read : read;
}

/** What shortest() found: the value is r × 10^-e (r a positive integer below 2^31), read as `read`. */
const found = { r: 0, e: 0, read: 0 };

/** The fewest digits for `a` (positive, finite) into `found`; false where the reference must write it. */
function shortest(a: number, bits: number): boolean {
  const field = (bits >>> 23) & 0xff;
  if (field === 0) return false;
  const e2 = field - 127;
  // floor(log10(a)) is this estimate or one more; k scales a to nine significant digits.
  let k = 8 - Math.floor(e2 * 0.3010299956639812);
  let s = scale(a, k);
  if (s >= 1e9) s = scale(a, --k);
  const half = POW2[e2 + 150]!;
  const below = (bits & 0x7fffff) === 0 && field > 1 ? half / 2 : half;
  const lo = Math.ceil(scale(a - below, k));
  const hi = Math.floor(scale(a + half, k));
  // The largest power of ten 10^j with a multiple in [lo, hi]: floor(hi / 10^j) > floor((lo - 1) / 10^j),
  // found by integer division by 10 (a multiplication once compiled).
  let under = (lo - 1) | 0;
  let over = hi | 0;
  let j = 0;
  for (;;) {
    const u = (under / 10) | 0;
    const o = (over / 10) | 0;
    if (o <= u) break;
    under = u;
    over = o;
    j++;
  }
  // The multiple of p = 10^j nearest to s: r × p, with under < r <= over.
  const p = POW10[j]!;
  let r = Math.round(s * INVERSE10[j]!);
  const d = s - r * p;
  if (d > p / 2) r++;
  else if (d < -p / 2) r--;
  if (r <= under) r = under + 1;
  else if (r > over) r = over;
  r |= 0;
  let e = k - j;
  for (;;) {
    const q = (r / 10) | 0;
    if (q * 10 !== r) break;
    r = q;
    e--;
  }
  // r × 10^-e as a client reads it: with exact operands one division or product is the correctly
  // rounded double; beyond 10^22 the decimal is parsed.
  const read = e >= 0 && e <= 22 ? r / POW10[e]! : e < 0 && e >= -22 ? r * POW10[-e]! : Number(`${r}e${-e}`);
  found.r = r;
  found.e = e;
  found.read = read;
  return fround(read) === a;
}

const NULL = Uint8Array.from([110, 117, 108, 108]);

function scale(x: number, k: number): number {
  return k >= 0 ? x * POW10[k]! : x / POW10[-k]!;
}

/** Writes r × 10^-e (r a positive integer below 2^31) in ECMAScript's notation; returns the end. */
function writeDigits(r: number, e: number, out: Uint8Array, pos: number): number {
  const len = digitCount(r);
  const n = len - e; // the value is 0.d1d2…dlen × 10^n
  if (n > 0 && n <= 21) {
    if (len <= n) {
      pos = writeUnsigned(r, out, pos);
      for (let i = len; i < n; i++) out[pos++] = 48;
      return pos;
    }
    // n digits, the point, then the rest: the rest first, from the right.
    const point = pos + n;
    fill(out, point, fill(out, pos + len + 1, r, len - n), n);
    out[point] = 46;
    return pos + len + 1;
  }
  if (n <= 0 && n > -6) {
    out[pos++] = 48;
    out[pos++] = 46;
    for (let i = n; i < 0; i++) out[pos++] = 48;
    return writeUnsigned(r, out, pos);
  }
  const lead = fill(out, pos + len + 1, r, len - 1);
  out[pos] = 48 + lead;
  if (len > 1) {
    out[pos + 1] = 46;
    pos += len + 1;
  } else pos++;
  out[pos++] = 101;
  let x = n - 1;
  out[pos++] = x < 0 ? 45 : 43;
  if (x < 0) x = -x;
  if (x >= 10) out[pos++] = 48 + ((x / 10) | 0);
  out[pos++] = 48 + (x % 10);
  return pos;
}

function digitCount(r: number): number {
  if (r < 1e4) return r < 100 ? (r < 10 ? 1 : 2) : r < 1e3 ? 3 : 4;
  if (r < 1e6) return r < 1e5 ? 5 : 6;
  if (r < 1e8) return r < 1e7 ? 7 : 8;
  return r < 1e9 ? 9 : 10;
}

/** Writes `x`, an integer from 0 to 2^32 - 1, at `out[pos]`; returns the end. */
export function writeUnsigned(x: number, out: Uint8Array, pos: number): number {
  const len = digitCount(x);
  fill(out, pos + len, x, len);
  return pos + len;
}

/** Writes the last `count` digits of `x` (below 2^32) to end just before out[end]; returns x without them. */
function fill(out: Uint8Array, end: number, x: number, count: number): number {
  let i = end;
  let c = count;
  for (; c >= 2; c -= 2) {
    const q = (x / 100) >>> 0;
    const pair = (x - q * 100) << 1;
    out[--i] = PAIRS[pair + 1]!;
    out[--i] = PAIRS[pair]!;
    x = q;
  }
  if (c === 1) {
    const q = (x / 10) >>> 0;
    out[--i] = 48 + x - q * 10;
    x = q;
  }
  return x;
}

/** The reference: the fewest significant digits (1 to 9) whose nearest decimal reads back. */
function referenceDigits(a: number): number {
  let digits = 1;
  while (digits < 9 && fround(Number(a.toPrecision(digits))) !== a) digits++;
  return digits;
}

function writeReference(a: number, out: Uint8Array, pos: number): number {
  const s = String(Number(a.toPrecision(referenceDigits(a))));
  for (let i = 0; i < s.length; i++) out[pos++] = s.charCodeAt(i);
  return pos;
}
