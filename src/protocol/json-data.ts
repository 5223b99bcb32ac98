// A tensor's data as JSON: its JSON values (toJsonArray), and the same text written as bytes
// without building JS arrays first (JsonWriter): flat (the Open Inference Protocol's `data`) or
// nested by the tensor's shape (the native protocol's outputs). FP32 values (FP16 travels as FP32)
// take float32-text's shortest form; 8- to 32-bit integers are written digit by digit and BOOL as
// true/false. FP64, the 64-bit integers and BYTES go through JSON.stringify.
import { elementCount, nest, type Tensor } from "../tensor.js";
import { FLOAT32_TEXT_MAX, float32Value, writeFloat32, writeUnsigned } from "./float32-text.js";

/**
 * Plain JS values for JSON output, the values JsonWriter writes: FP32 as the shortest decimal that
 * reads back as the same FP32 value, 64-bit integers as numbers, BOOL as true/false.
 */
export function toJsonArray(tensor: Tensor): (number | boolean | string)[] {
  const data = tensor.data;
  if (tensor.datatype === "BOOL") return Array.from(data as Uint8Array, (v) => v !== 0);
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
    const out = new Array<number>(data.length);
    for (let i = 0; i < data.length; i++) out[i] = Number(data[i]);
    return out;
  }
  if (Array.isArray(data)) return data;
  // A counted loop into a packed array, not Array.from (the iterator protocol).
  const numbers = data as ArrayLike<number>;
  const out = new Array<number>(numbers.length).fill(0);
  if (data instanceof Float32Array) {
    const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
    for (let i = 0; i < data.length; i++) out[i] = float32Value(data[i]!, bits[i]!);
  } else for (let i = 0; i < numbers.length; i++) out[i] = numbers[i]!;
  return out;
}

/** Writes elements [from, to) comma-separated at `pos`; returns the end. */
type WriteRun = (out: Uint8Array, pos: number, from: number, to: number) => number;

/**
 * JSON text assembled from strings (already JSON) and tensors' data, written once into one buffer
 * sized for the longest text the parts can take.
 */
export class JsonWriter {
  readonly #parts: (string | { shape: readonly number[]; write: WriteRun })[] = [];
  #bound = 0;

  /** Opens an object with the fields of `fields` (JSON.stringify's), then `"key":`. */
  open(fields: Record<string, unknown>, key: string): this {
    const head = JSON.stringify(fields);
    return this.text(`${head.slice(0, -1)}${head.length > 2 ? "," : ""}${JSON.stringify(key)}:`);
  }

  /** Appends `json`, text that is JSON already. */
  text(json: string): this {
    this.#parts.push(json);
    this.#bound += Buffer.byteLength(json);
    return this;
  }

  /** Appends `t`'s data: a flat array, or arrays nested by `t.shape` (a scalar: its value). */
  data(t: Tensor, nested: boolean): this {
    const plan = runWriter(t);
    // A shape that does not match the data (a handler's bug) is left to nest() as before.
    if (!plan || (nested && elementCount(t.shape) !== t.data.length)) {
      const flat = toJsonArray(t);
      return this.text(JSON.stringify(nested ? nest(flat, t.shape) : flat));
    }
    const shape = nested ? t.shape : [t.data.length];
    // Every array opened costs at most "[],": 3 bytes.
    let arrays = 1;
    for (let i = 0, count = 1; i < shape.length - 1; i++) arrays += count *= shape[i]!;
    const bound = t.data.length * (plan.widest + 1) + 3 * arrays;
    this.#parts.push({ shape, write: plan.write });
    this.#bound += bound;
    return this;
  }

  finish(): Buffer {
    const out = Buffer.allocUnsafe(this.#bound);
    let pos = 0;
    for (const part of this.#parts) {
      if (typeof part === "string") pos += out.write(part, pos);
      else if (part.shape.length === 0) pos = part.write(out, pos, 0, 1);
      else pos = writeLevel(out, pos, part.shape, 0, 0, elementCount(part.shape), part.write);
    }
    return out.subarray(0, pos);
  }
}

/** Dimension `dim` of `shape`, from flat element `offset` over `size` elements. */
function writeLevel(
  out: Uint8Array,
  pos: number,
  shape: readonly number[],
  dim: number,
  offset: number,
  size: number,
  write: WriteRun,
): number {
  out[pos++] = 91;
  if (dim === shape.length - 1) pos = write(out, pos, offset, offset + size);
  else {
    const count = shape[dim]!;
    const inner = count === 0 ? 0 : size / count;
    for (let i = 0; i < count; i++) {
      if (i > 0) out[pos++] = 44;
      pos = writeLevel(out, pos, shape, dim + 1, offset + i * inner, inner, write);
    }
  }
  out[pos++] = 93;
  return pos;
}

/** How to write `t`'s elements, and the widest one; undefined: JSON.stringify writes it. */
function runWriter(t: Tensor): { write: WriteRun; widest: number } | undefined {
  const data = t.data;
  if (data instanceof Float32Array) {
    const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
    return {
      widest: FLOAT32_TEXT_MAX,
      write: (out, pos, from, to) => {
        for (let i = from; i < to; i++) {
          if (i > from) out[pos++] = 44;
          pos = writeFloat32(data[i]!, bits[i]!, out, pos);
        }
        return pos;
      },
    };
  }
  if (t.datatype === "BOOL") {
    const bools = data as Uint8Array;
    return {
      widest: 5,
      write: (out, pos, from, to) => {
        for (let i = from; i < to; i++) {
          if (i > from) out[pos++] = 44;
          out.set(bools[i] ? TRUE : FALSE, pos);
          pos += bools[i] ? 4 : 5;
        }
        return pos;
      },
    };
  }
  if (
    data instanceof Int8Array ||
    data instanceof Uint8Array ||
    data instanceof Int16Array ||
    data instanceof Uint16Array ||
    data instanceof Int32Array ||
    data instanceof Uint32Array
  ) {
    const ints: ArrayLike<number> = data;
    return {
      widest: 11,
      write: (out, pos, from, to) => {
        for (let i = from; i < to; i++) {
          if (i > from) out[pos++] = 44;
          pos = writeInteger(ints[i]!, out, pos);
        }
        return pos;
      },
    };
  }
  return undefined;
}

const TRUE = Buffer.from("true");
const FALSE = Buffer.from("false");

/** An integer of at most 32 bits, signed or not. */
function writeInteger(v: number, out: Uint8Array, pos: number): number {
  if (v >= 0) return writeUnsigned(v, out, pos);
  out[pos] = 45;
  return writeUnsigned(-v, out, pos + 1);
}
