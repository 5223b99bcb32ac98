// Tensor data as wire bytes: little-endian and row-major; BOOL is one byte (0/1); FP16 is IEEE
// half; a BYTES element is a 4-byte little-endian length followed by its bytes. Shared by the
// OIP binary extension, the native raw body and the API tier's calls to its runners.
import { ModelportError } from "../errors.js";
import type { Datatype, Tensor, TensorData } from "../tensor.js";
import { isBodyMemory } from "./body-memory.js";
import { fromHalfBits, toHalfBits } from "./float16.js";

/** Bytes per element of every fixed-size datatype (BYTES has none). */
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

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Reverses the bytes of each `size`-byte element in place (only on big-endian hosts). */
function swapBytes(bytes: Uint8Array, size: number): void {
  for (let i = 0; i < bytes.length; i += size) bytes.subarray(i, i + size).reverse();
}

/** Tensors this small are copied even out of a body's own memory (see typedFrom). */
export const VIEW_MIN_BYTES = 16384;

/**
 * `bytes` as a typed array. A view of them where they lie in a request body's own memory
 * (protocol/body-memory.ts), aligned for the element size, on a little-endian host, and at least
 * 16 KiB (a small tensor copied cannot keep a large body alive). Else a copy into a fresh,
 * aligned buffer of its own, not zeroed first since every byte is written: a typed array's own
 * zeroing doubled the time of copying a 4.9 MB input (docs/PERFORMANCE.md).
 */
function typedFrom<T extends Exclude<TensorData, string[]>>(
  make: (buffer: ArrayBuffer, byteOffset: number, length: number) => T,
  bytes: Uint8Array,
  size: number,
): T {
  if (
    LITTLE_ENDIAN &&
    bytes.byteLength >= VIEW_MIN_BYTES &&
    bytes.byteOffset % size === 0 &&
    isBodyMemory(bytes.buffer)
  ) {
    return make(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength / size);
  }
  const copy = Buffer.allocUnsafeSlow(bytes.length);
  copy.set(bytes);
  if (!LITTLE_ENDIAN && size > 1) swapBytes(copy, size);
  return make(copy.buffer as ArrayBuffer, 0, bytes.length / size);
}

export function sizeError(what: string, message: string): ModelportError {
  return new ModelportError("MP_ERR_BINARY_DATA_SIZE", `${what}: ${message}`);
}

/** BYTES elements: each a 4-byte little-endian length, then that many bytes (read as UTF-8). */
function readBytesElements(bytes: Uint8Array, count: number, what: string): string[] {
  // Each element takes at least its 4-byte length: a count beyond that is refused before the
  // array is made (a shape can claim far more elements than an array may hold).
  if (count > bytes.length / 4) {
    throw sizeError(
      what,
      `${bytes.length} bytes cannot hold ${count} BYTES elements (each takes at least its 4-byte length)`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder();
  const out = new Array<string>(count);
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (at + 4 > bytes.length)
      throw sizeError(what, `${bytes.length} bytes end before element ${i} of ${count}`);
    const len = view.getUint32(at, true);
    at += 4;
    if (at + len > bytes.length)
      throw sizeError(what, `element ${i} says ${len} bytes but only ${bytes.length - at} remain`);
    out[i] = decoder.decode(bytes.subarray(at, at + len));
    at += len;
  }
  if (at !== bytes.length)
    throw sizeError(what, `${bytes.length} bytes but its ${count} BYTES elements use ${at}`);
  return out;
}

/**
 * Converts `bytes` to `count` elements of `datatype` (the representation of tensor.ts: FP16 as
 * float32, BOOL as 0/1, 64-bit integers as BigInt arrays). `what` names the bytes in errors.
 * @throws ModelportError MP_ERR_BINARY_DATA_SIZE when the byte count is not count × element size,
 *   MP_ERR_INPUT_DATATYPE when a BOOL byte is neither 0 nor 1.
 */
export function tensorDataFromBytes(
  datatype: Datatype,
  count: number,
  bytes: Uint8Array,
  what: string,
): TensorData {
  if (datatype === "BYTES") return readBytesElements(bytes, count, what);
  const size = ELEMENT_BYTES[datatype];
  if (bytes.length !== count * size) {
    throw sizeError(
      what,
      `${bytes.length} bytes, but ${count} ${datatype} elements need ${count * size} (${size} bytes each)`,
    );
  }
  switch (datatype) {
    case "BOOL": {
      const out = typedFrom((b, o, n) => new Uint8Array(b, o, n), bytes, 1);
      const bad = out.findIndex((v) => v > 1);
      if (bad >= 0) {
        throw new ModelportError(
          "MP_ERR_INPUT_DATATYPE",
          `${what}: element ${bad} is the byte ${out[bad]}; expected 0 or 1 (BOOL)`,
          { index: bad, expected: "BOOL" },
        );
      }
      return out;
    }
    case "UINT8":
      return typedFrom((b, o, n) => new Uint8Array(b, o, n), bytes, 1);
    case "INT8":
      return typedFrom((b, o, n) => new Int8Array(b, o, n), bytes, 1);
    case "UINT16":
      return typedFrom((b, o, n) => new Uint16Array(b, o, n), bytes, 2);
    case "INT16":
      return typedFrom((b, o, n) => new Int16Array(b, o, n), bytes, 2);
    case "FP16":
      return fromHalfBits(typedFrom((b, o, n) => new Uint16Array(b, o, n), bytes, 2));
    case "UINT32":
      return typedFrom((b, o, n) => new Uint32Array(b, o, n), bytes, 4);
    case "INT32":
      return typedFrom((b, o, n) => new Int32Array(b, o, n), bytes, 4);
    case "FP32":
      return typedFrom((b, o, n) => new Float32Array(b, o, n), bytes, 4);
    case "UINT64":
      return typedFrom((b, o, n) => new BigUint64Array(b, o, n), bytes, 8);
    case "INT64":
      return typedFrom((b, o, n) => new BigInt64Array(b, o, n), bytes, 8);
    case "FP64":
      return typedFrom((b, o, n) => new Float64Array(b, o, n), bytes, 8);
  }
}

/** A tensor's data as wire bytes (a view without copying where the host is little-endian). */
export function tensorToBytes(tensor: Tensor): Uint8Array {
  const data = tensor.data;
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
  const typed = tensor.datatype === "FP16" ? toHalfBits(data as Float32Array) : data;
  const bytes = new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
  if (LITTLE_ENDIAN || typed.BYTES_PER_ELEMENT === 1) return bytes;
  const copy = bytes.slice();
  swapBytes(copy, typed.BYTES_PER_ELEMENT);
  return copy;
}
