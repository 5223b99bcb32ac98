// Tensors as the client sends and receives them in binary: typed arrays with a shape, and their
// wire bytes as modelport's binary protocol lays them out (little-endian, row-major; BOOL one
// byte 0/1; FP16 IEEE half, carried as Float32Array values; a BYTES element a 4-byte
// little-endian length and its UTF-8 bytes). Mirrors src/protocol/tensor-bytes.ts with the
// client's own errors; it shares only the two modules of src/ that import nothing (the tensor
// types and the half-float conversion), which run in browsers as they are.
import { fromHalfBits, toHalfBits } from "../src/protocol/float16.js";
import type { Datatype, TensorData } from "../src/tensor.js";

/** The Open Inference Protocol's datatypes and their data kinds, shared with the server (types only). */
export type { Datatype, TensorData };

/** The data array a datatype travels in: BOOL as 0/1 bytes, FP16 as float32, 64-bit as BigInt arrays. */
export type DataFor<D extends Datatype> = D extends "FP32" | "FP16"
  ? Float32Array
  : D extends "FP64"
    ? Float64Array
    : D extends "INT8"
      ? Int8Array
      : D extends "INT16"
        ? Int16Array
        : D extends "INT32"
          ? Int32Array
          : D extends "INT64"
            ? BigInt64Array
            : D extends "UINT8" | "BOOL"
              ? Uint8Array
              : D extends "UINT16"
                ? Uint16Array
                : D extends "UINT32"
                  ? Uint32Array
                  : D extends "UINT64"
                    ? BigUint64Array
                    : D extends "BYTES"
                      ? string[]
                      : never;

/**
 * A tensor to send: its data (row-major) and shape. `datatype` defaults to the data's own
 * (Float32Array → FP32, Uint8Array → UINT8, …); give it for BOOL (a Uint8Array of 0/1) and FP16
 * (a Float32Array, converted to half precision on the wire).
 */
export interface TensorInput<T extends TensorData = TensorData> {
  data: T;
  shape: readonly number[];
  datatype?: Datatype;
}

/** A tensor received: datatype, shape and the data array of that datatype (see DataFor). */
export interface Tensor<T extends TensorData = TensorData> {
  datatype: Datatype;
  shape: number[];
  data: T;
}

/** Bytes per element of each fixed-size datatype. */
export const ELEMENT_BYTES: Readonly<Record<Exclude<Datatype, "BYTES">, number>> = {
  BOOL: 1,
  UINT8: 1,
  INT8: 1,
  UINT16: 2,
  INT16: 2,
  FP16: 2,
  UINT32: 4,
  INT32: 4,
  FP32: 4,
  UINT64: 8,
  INT64: 8,
  FP64: 8,
};

/** Shorthand for a TensorInput: `tensor(new Float32Array([...]), [2, 6])`. */
export function tensor<T extends TensorData>(
  data: T,
  shape: readonly number[],
  datatype?: Datatype,
): TensorInput<T> {
  return datatype === undefined ? { data, shape } : { data, shape, datatype };
}

/** The datatype a data array carries by default. */
export function datatypeOf(data: TensorData): Datatype {
  if (Array.isArray(data)) return "BYTES";
  if (data instanceof Float32Array) return "FP32";
  if (data instanceof Float64Array) return "FP64";
  if (data instanceof Int8Array) return "INT8";
  if (data instanceof Int16Array) return "INT16";
  if (data instanceof Int32Array) return "INT32";
  if (data instanceof BigInt64Array) return "INT64";
  if (data instanceof Uint8Array) return "UINT8";
  if (data instanceof Uint16Array) return "UINT16";
  if (data instanceof Uint32Array) return "UINT32";
  if (data instanceof BigUint64Array) return "UINT64";
  throw new TypeError("tensor data must be a typed array or an array of strings");
}

/** The datatype `t` goes out as, checked against its data. @throws TypeError on a mismatch. */
export function datatypeFor(name: string, t: TensorInput): Datatype {
  const own = datatypeOf(t.data);
  const given = t.datatype ?? own;
  const ok = given === own || (given === "BOOL" && own === "UINT8") || (given === "FP16" && own === "FP32");
  if (!ok) throw new TypeError(`tensor '${name}': datatype ${given} cannot be sent from ${own} data`);
  const count = t.shape.reduce((n, d) => n * d, 1);
  if (!t.shape.every((d) => Number.isSafeInteger(d) && d >= 0) || count !== t.data.length) {
    throw new TypeError(
      `tensor '${name}': shape [${t.shape.join(", ")}] holds ${count} elements but the data has ${t.data.length}`,
    );
  }
  return given;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function swapBytes(bytes: Uint8Array, size: number): void {
  for (let i = 0; i < bytes.length; i += size) bytes.subarray(i, i + size).reverse();
}

/** A tensor's data as wire bytes for `datatype` (a view without copying where the host is little-endian). */
export function tensorToBytes(datatype: Datatype, data: TensorData): Uint8Array {
  if (Array.isArray(data)) {
    const encoder = new TextEncoder();
    const parts = data.map((s) => encoder.encode(s));
    const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.length, 0));
    const view = new DataView(out.buffer);
    let at = 0;
    for (const p of parts) {
      view.setUint32(at, p.length, true);
      out.set(p, at + 4);
      at += 4 + p.length;
    }
    return out;
  }
  const typed = datatype === "FP16" ? toHalfBits(data as Float32Array) : data;
  const bytes = new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
  if (LITTLE_ENDIAN || typed.BYTES_PER_ELEMENT === 1) return bytes;
  const copy = bytes.slice();
  swapBytes(copy, typed.BYTES_PER_ELEMENT);
  return copy;
}

function readStrings(bytes: Uint8Array, count: number, what: string): string[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder();
  const out: string[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (at + 4 > bytes.length) throw new RangeError(`${what}: the bytes end before BYTES element ${i}`);
    const len = view.getUint32(at, true);
    at += 4;
    if (at + len > bytes.length) throw new RangeError(`${what}: BYTES element ${i} runs past the bytes`);
    out.push(decoder.decode(bytes.subarray(at, at + len)));
    at += len;
  }
  return out;
}

/** A fresh, aligned typed array holding a copy of `bytes`, byte-swapped on a big-endian host. */
function copyInto<T extends Exclude<TensorData, string[]>>(
  make: (n: number) => T,
  bytes: Uint8Array,
  size: number,
): T {
  const out = make(bytes.length / size);
  const view = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  view.set(bytes);
  if (!LITTLE_ENDIAN && size > 1) swapBytes(view, size);
  return out;
}

/**
 * Wire bytes → `count` elements of `datatype` (FP16 as Float32Array, BOOL as a Uint8Array of 0/1).
 * @throws RangeError when the byte count does not fit the datatype and count.
 */
export function tensorFromBytes(
  datatype: Datatype,
  count: number,
  bytes: Uint8Array,
  what: string,
): TensorData {
  if (datatype === "BYTES") return readStrings(bytes, count, what);
  const size = ELEMENT_BYTES[datatype];
  if (size === undefined) throw new RangeError(`${what}: unknown datatype ${datatype}`);
  if (bytes.length !== count * size) {
    throw new RangeError(
      `${what}: ${bytes.length} bytes, but ${count} ${datatype} elements need ${count * size}`,
    );
  }
  switch (datatype) {
    case "BOOL":
    case "UINT8":
      return copyInto((n) => new Uint8Array(n), bytes, 1);
    case "INT8":
      return copyInto((n) => new Int8Array(n), bytes, 1);
    case "UINT16":
      return copyInto((n) => new Uint16Array(n), bytes, 2);
    case "INT16":
      return copyInto((n) => new Int16Array(n), bytes, 2);
    case "FP16":
      return fromHalfBits(copyInto((n) => new Uint16Array(n), bytes, 2));
    case "UINT32":
      return copyInto((n) => new Uint32Array(n), bytes, 4);
    case "INT32":
      return copyInto((n) => new Int32Array(n), bytes, 4);
    case "FP32":
      return copyInto((n) => new Float32Array(n), bytes, 4);
    case "UINT64":
      return copyInto((n) => new BigUint64Array(n), bytes, 8);
    case "INT64":
      return copyInto((n) => new BigInt64Array(n), bytes, 8);
    case "FP64":
      return copyInto((n) => new Float64Array(n), bytes, 8);
  }
}

/** JSON `data` (flat or nested numbers, booleans, strings) → the data array of `datatype`. */
export function tensorFromJson(datatype: Datatype, data: unknown): TensorData {
  const flat = (Array.isArray(data) ? data.flat(Number.POSITIVE_INFINITY) : [data]) as unknown[];
  switch (datatype) {
    case "BYTES":
      return flat.map(String);
    case "BOOL":
      return Uint8Array.from(flat, (v) => (v === true || v === 1 ? 1 : 0));
    case "INT64":
      return BigInt64Array.from(flat, (v) => BigInt(v as number));
    case "UINT64":
      return BigUint64Array.from(flat, (v) => BigInt(v as number));
    case "FP16":
    case "FP32":
      return Float32Array.from(flat as number[]);
    case "FP64":
      return Float64Array.from(flat as number[]);
    case "INT8":
      return Int8Array.from(flat as number[]);
    case "INT16":
      return Int16Array.from(flat as number[]);
    case "INT32":
      return Int32Array.from(flat as number[]);
    case "UINT8":
      return Uint8Array.from(flat as number[]);
    case "UINT16":
      return Uint16Array.from(flat as number[]);
    case "UINT32":
      return Uint32Array.from(flat as number[]);
  }
}
