// FP32 values as JSON text: the fewest significant digits that read back as the same FP32 value,
// written straight into a byte buffer. This is how Go's encoding/json, Rust's serde_json and
// orjson write float32 (and numpy's repr of a float32). A client reads the number as a double and
// rounds it to FP32 (Float32Array, numpy's float32, a C float) and has the model's bits exactly.
//
// JSON.stringify of the same values writes the shortest text of the *double* each FP32 value
// widens to (0.00008486588922096416 for what is here 0.00008486589): about 1.7 times the bytes,
// and on 265,000 of the image model's outputs about three times the time of this writer with the
// packed array it needs (docs/PERFORMANCE.md).
//
// The method: scale the value and the edges of its rounding interval (halfway to the FP32
// neighbours) to nine significant digits, take the largest power of ten with a multiple in the
// interval, and the multiple nearest to the value. The scaling is a double multiplication, so
// each result is checked by reading it back as a client would (exact arithmetic up to 10^±22, the
// text parsed beyond); a value that fails the check, and a subnormal, is written by the
// reference method: toPrecision with 1 to 9 digits until one reads back. Number notation follows
// ECMAScript's Number::toString, as JSON.stringify writes it (1e-7, 0.000001, 123.5, 1e+21).
// NaN and ±Infinity have no JSON form: `null`, as JSON.stringify writes them.
//
// Speed (docs/PERFORMANCE.md): the per-exponent constants come from tables, digits are stored four
// at a time through a DataView, and the common form of small values (0.000ddddddd) is written as
// fixed-width stores that may run past the text's end (never more than FLOAT32_TEXT_MAX bytes from
// where the value starts) and are overwritten by what follows. The search and the common forms are
// one function: TurboFan did not inline the search into its caller, and that call cost a fifth.

/** Powers of ten as doubles: exact up to 1e22, correctly rounded above. */
const POW10 = Array.from({ length: 60 }, (_, i) => Number(`1e${i}`));
/** 10^-i, to within a rounding. */
const INVERSE10 = Array.from({ length: 12 }, (_, i) => 1 / POW10[i]!);
/** Per exponent field f (1 to 254): k such that a × 10^k has nine digits (or ten: then k - 1). */
const K = Int32Array.from({ length: 256 }, (_, f) => 8 - Math.floor((f - 127) * 0.3010299956639812));
/** Per exponent field: half an FP32 ulp, 2^(f - 127 - 24). */
const HALF = Float64Array.from({ length: 256 }, (_, f) => 2 ** (f - 151));
/** "0000" to "9999", each as the four character codes of a little-endian 32-bit store. */
const DIGITS4 = Uint32Array.from({ length: 10000 }, (_, i) => {
  let word = 0;
  for (let d = 0, x = i; d < 4; d++, x = (x / 10) | 0) word |= (48 + (x % 10)) << (8 * (3 - d));
  return word >>> 0;
});
/** "00" to "99" as little-endian 16-bit stores. */
const DIGITS2 = Uint16Array.from({ length: 100 }, (_, i) => (48 + ((i / 10) | 0)) | ((48 + (i % 10)) << 8));
const NULL = Uint8Array.from([110, 117, 108, 108]);
const fround = Math.fround;

/** Longest text this writes for one value: a sign and 21 digits (ECMAScript writes up to 1e21 whole). */
export const FLOAT32_TEXT_MAX = 22;

/**
 * Writes data[from, to) comma-separated at `out[pos]` (`bits`: the same memory as IEEE 754 bits;
 * `view`: viewOf(out)); returns the end. Each value may store up to FLOAT32_TEXT_MAX bytes from
 * where it starts.
 */
export function writeFloat32s(
  data: Float32Array,
  bits: Uint32Array,
  out: Uint8Array,
  view: DataView,
  pos: number,
  from: number,
  to: number,
): number {
  for (let i = from; i < to; i++) {
    if (i > from) out[pos++] = 44;
    pos = write(data[i]!, bits[i]!, out, view, pos);
  }
  return pos;
}

/** Writes `value` (an FP32 value; `bits` its IEEE 754 bits) at `out[pos]`; returns the end. */
export function writeFloat32(value: number, bits: number, out: Uint8Array, pos: number): number {
  return write(value, bits, out, viewOf(out), pos);
}

const scratch = Buffer.alloc(64);
const scratchView = new DataView(scratch.buffer, scratch.byteOffset, scratch.byteLength);

/** The text writeFloat32 writes for `value`, as a string (for answers made as strings). */
export function float32Text(value: number, bits: number): string {
  return scratch.toString("latin1", 0, write(value, bits, scratch, scratchView, 0));
}

/**
 * The number a client reads from the text writeFloat32 writes for `value` (JSON.stringify writes
 * that text for it): for the JSON values of an FP32 tensor. NaN and ±Infinity are returned as they are.
 */
export function float32Value(value: number, bits: number): number {
  if (value === 0) return 0;
  if (!Number.isFinite(value)) return value;
  lastRead = Number.NaN;
  const end = write(value, bits, scratch, scratchView, 0);
  // The search's own reading when it wrote the value (the reference method's text otherwise).
  if (!Number.isNaN(lastRead)) return value < 0 ? -lastRead : lastRead;
  return Number(scratch.toString("latin1", 0, end));
}

/** What the last value the search wrote reads back as (its magnitude), for float32Value. */
let lastRead = 0;

/** A DataView over `out`'s bytes (for the stores of two and four digits). */
export function viewOf(out: Uint8Array): DataView {
  return new DataView(out.buffer, out.byteOffset, out.byteLength);
}

function write(value: number, bits: number, out: Uint8Array, view: DataView, pos: number): number {
  const field = (bits >>> 23) & 0xff;
  if (field === 0 || field === 255) return special(value, out, pos);
  let a = value;
  if (a < 0) {
    out[pos++] = 45;
    a = -a;
  }
  // Nine significant digits: s = a × 10^k; floor(log10(a)) is the table's estimate or one more.
  let k = K[field]!;
  let s = k >= 0 ? a * POW10[k]! : a / POW10[-k]!;
  if (s >= 1e9) s = --k >= 0 ? a * POW10[k]! : a / POW10[-k]!;
  const half = HALF[field]!;
  const below = (bits & 0x7fffff) === 0 && field > 1 ? half / 2 : half;
  const lo = Math.ceil(k >= 0 ? (a - below) * POW10[k]! : (a - below) / POW10[-k]!);
  const hi = Math.floor(k >= 0 ? (a + half) * POW10[k]! : (a + half) / POW10[-k]!);
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
  if (fround(read) !== a) return writeReference(a, out, pos);
  lastRead = read;
  if (e >= 7 && e <= 13 && r < POW10[e]! && r >= POW10[e - 6]!) {
    // 0.000ddddddd (the value is below 1 and at least 10^-6): "0." and six zeros, r as nine digits
    // ending where the text ends (its leading zeros land on zeros), then "0." again over any of
    // them that reached it.
    view.setUint32(pos, 0x30302e30, true);
    view.setUint32(pos + 4, 0x30303030, true);
    const end = pos + 2 + e;
    const q = (r / 10000) >>> 0;
    const t = (q / 10000) >>> 0;
    view.setUint32(end - 4, DIGITS4[r - q * 10000]!, true);
    view.setUint32(end - 8, DIGITS4[q - t * 10000]!, true);
    out[end - 9] = 48 + t;
    view.setUint16(pos, 0x2e30, true);
    return end;
  }
  return writeDigits(r, e, out, view, pos);
}

/** Zero, subnormals, NaN and ±Infinity. */
function special(value: number, out: Uint8Array, pos: number): number {
  if (value === 0) {
    out[pos] = 48;
    return pos + 1;
  }
  if (!Number.isFinite(value)) {
    out.set(NULL, pos);
    return pos + 4;
  }
  if (value > 0) return writeReference(value, out, pos);
  out[pos] = 45;
  return writeReference(-value, out, pos + 1);
}

/** Writes r × 10^-e (r a positive integer below 2^31) in ECMAScript's notation; returns the end. */
function writeDigits(r: number, e: number, out: Uint8Array, view: DataView, pos: number): number {
  const len = digitCount(r);
  const n = len - e; // the value is 0.d1d2…dlen × 10^n
  if (n > 0 && n <= 21) {
    if (len <= n) {
      put(view, pos + len, r, len);
      for (let i = len; i < n; i++) out[pos + i] = 48;
      return pos + n;
    }
    // n digits, the point, then the rest: the rest first, from the right.
    const point = pos + n;
    put(view, point, put(view, pos + len + 1, r, len - n), n);
    out[point] = 46;
    return pos + len + 1;
  }
  if (n <= 0 && n > -6) {
    out[pos++] = 48;
    out[pos++] = 46;
    for (let i = n; i < 0; i++) out[pos++] = 48;
    put(view, pos + len, r, len);
    return pos + len;
  }
  const lead = put(view, pos + len + 1, r, len - 1);
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

/** Writes `x`, an integer from 0 to 2^32 - 1, at byte `pos` of `view`; returns the end. */
export function writeUnsigned(x: number, view: DataView, pos: number): number {
  const len = digitCount(x);
  put(view, pos + len, x, len);
  return pos + len;
}

/** Writes the last `count` digits of `x` (below 2^32) to end just before `end`; returns x without them. */
function put(view: DataView, end: number, x: number, count: number): number {
  let c = count;
  for (; c >= 4; c -= 4) {
    const q = (x / 10000) >>> 0;
    end -= 4;
    view.setUint32(end, DIGITS4[x - q * 10000]!, true);
    x = q;
  }
  if (c >= 2) {
    const q = (x / 100) >>> 0;
    end -= 2;
    view.setUint16(end, DIGITS2[x - q * 100]!, true);
    x = q;
    c -= 2;
  }
  if (c === 1) {
    const q = (x / 10) >>> 0;
    view.setUint8(end - 1, 48 + x - q * 10);
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
