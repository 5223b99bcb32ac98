// A tensor's data as JSON: its JSON values (toJsonArray), and the same text written as bytes
// without building JS arrays first (JsonWriter; for a handful of values, made as a string): flat
// (the Open Inference Protocol's `data`) or nested by the tensor's shape (the native protocol's
// outputs). FP32 values (FP16 travels as FP32)
// take float32-text's shortest form; 8- to 32-bit integers are written digit by digit and BOOL as
// true/false. FP64, the 64-bit integers and BYTES go through JSON.stringify.
import { elementCount, nest, type Tensor } from "../tensor.js";
import {
  FLOAT32_TEXT_MAX,
  float32Text,
  float32Value,
  viewOf,
  writeFloat32s,
  writeUnsigned,
} from "./float32-text.js";

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

/** Writes elements [from, to) comma-separated at `pos` (`view`: a DataView of `out`); returns the end. */
type WriteRun = (out: Uint8Array, view: DataView, pos: number, from: number, to: number) => number;
/** Element `i`'s text, as WriteRun writes it. */
type ElementText = (i: number) => string;

/** Text that is JSON already, and its length in bytes. */
interface TextPart {
  text: string;
  bytes: number;
}

/**
 * A tensor's data: `rows` runs of `width` elements, each run an array inside `depth` enclosing
 * arrays (flat data: one run, depth 0; a scalar: one element, no brackets).
 */
interface DataPart {
  shape: readonly number[];
  rows: number;
  width: number;
  depth: number;
  brackets: boolean;
  widest: number;
  write: WriteRun;
  element: ElementText;
}

/** Elements written between checks for room; small enough that a chunk fills evenly. */
const BATCH = 2048;

/**
 * JSON text assembled from strings (already JSON) and tensors' data, written once: into one buffer
 * sized for the longest text the parts can take (finish), or chunk by chunk (next), for answers
 * sent while they are written.
 */
export class JsonWriter {
  readonly #parts: (TextPart | DataPart)[] = [];
  #bound = 0;
  // Where writing stands: the part, and in a data part the run, the element in it, and the index
  // of the run in each enclosing dimension.
  #part = 0;
  #row = 0;
  #element = 0;
  #index: number[] = [];

  /** At least the bytes of the whole text. */
  get bound(): number {
    return this.#bound;
  }

  /** Opens an object with the fields of `fields` (JSON.stringify's), then `"key":`. */
  open(fields: Record<string, unknown>, key: string): this {
    const head = JSON.stringify(fields);
    return this.text(`${head.slice(0, -1)}${head.length > 2 ? "," : ""}${JSON.stringify(key)}:`);
  }

  /** Appends `json`, text that is JSON already (joined to a text part before it: one write). */
  text(json: string): this {
    const bytes = Buffer.byteLength(json);
    const last = this.#parts[this.#parts.length - 1];
    if (last !== undefined && "text" in last) {
      last.text += json;
      last.bytes += bytes;
    } else this.#parts.push({ text: json, bytes });
    this.#bound += bytes;
    return this;
  }

  /** Appends `t`'s data: a flat array, or arrays nested by `t.shape` (a scalar: its value). */
  data(t: Tensor, nested: boolean): this {
    const plan = runWriter(t);
    // A shape that does not match the data (a handler's bug) is left to nest() as before, and
    // data with no elements is only brackets.
    if (!plan || (nested && elementCount(t.shape) !== t.data.length) || t.data.length === 0) {
      if (nested && t.data.length === 0 && elementCount(t.shape) === 0) return this.text(emptyJson(t.shape));
      const flat = toJsonArray(t);
      return this.text(JSON.stringify(nested ? nest(flat, t.shape) : flat));
    }
    const shape = nested ? t.shape : [t.data.length];
    const depth = Math.max(shape.length - 1, 0);
    const width = shape.length === 0 ? 1 : shape[shape.length - 1]!;
    const rows = t.data.length / width;
    // Every array opened costs at most "[],": 3 bytes.
    let arrays = 1;
    for (let i = 0, count = 1; i < depth; i++) arrays += count *= shape[i]!;
    this.#parts.push({
      shape,
      rows,
      width,
      depth,
      brackets: shape.length > 0,
      widest: plan.widest,
      write: plan.write,
      element: plan.element,
    });
    this.#bound += t.data.length * (plan.widest + 1) + 3 * arrays;
    return this;
  }

  /**
   * The whole text as a string, for a small answer (JSON_TEXT_BELOW): for a few values, making the
   * string costs less than sizing, filling and slicing a buffer (churn-tree's answer: 1.9 us as
   * bytes), and node:http sends a string body with its headers in one piece.
   */
  toText(): string {
    let text = "";
    for (const part of this.#parts) {
      if ("text" in part) text += part.text;
      else if (!part.brackets) text += part.element(0);
      else text += arrayText(part.shape, 0, 0, part.element);
    }
    return text;
  }

  /** The whole text in one buffer. */
  finish(): Buffer {
    const out = Buffer.allocUnsafe(this.#bound);
    const end = this.#fill(out, 0);
    if (this.#part < this.#parts.length) throw new Error("JsonWriter: the text outgrew its bound");
    return out.subarray(0, end);
  }

  /** The next piece of the text, of about `chunkBytes` (more where one part needs it); undefined at the end. */
  next(chunkBytes: number): Buffer | undefined {
    const part = this.#parts[this.#part];
    if (!part) return undefined;
    // Room for a text part whole, or for a run's brackets and one element.
    const least = "text" in part ? part.bytes : 2 * part.depth + part.widest + 4;
    const out = Buffer.allocUnsafe(Math.max(chunkBytes, least));
    return out.subarray(0, this.#fill(out, 0));
  }

  /** Writes from where writing stands while the next step fits in `out`; returns the end. */
  #fill(out: Buffer, pos: number): number {
    const view = viewOf(out);
    for (; this.#part < this.#parts.length; this.#part++) {
      const part = this.#parts[this.#part]!;
      if ("text" in part) {
        if (pos + part.bytes > out.length) return pos;
        pos += out.write(part.text, pos);
        continue;
      }
      pos = this.#fillData(part, out, view, pos);
      if (this.#row < part.rows) return pos;
      this.#row = 0;
    }
    return pos;
  }

  #fillData(part: DataPart, out: Buffer, view: DataView, pos: number): number {
    const { rows, width, depth, widest, write, shape } = part;
    const index = this.#index;
    // Room kept for the brackets that close a run.
    const closing = part.brackets ? depth + 1 : 0;
    for (; this.#row < rows; this.#row++) {
      if (this.#element === 0) {
        // A comma, then "[" for the run and for each enclosing array that starts with it.
        if (pos + 2 * depth + widest + 4 > out.length) return pos;
        let opens = 0;
        if (this.#row === 0) {
          index.length = depth;
          index.fill(0);
          opens = part.brackets ? depth + 1 : 0;
        } else {
          out[pos++] = 44;
          opens = 1;
          for (let d = depth - 1; d >= 0 && index[d] === 0; d--) opens++;
        }
        for (let i = 0; i < opens; i++) out[pos++] = 91;
      }
      const start = this.#row * width;
      while (this.#element < width) {
        const room = Math.floor((out.length - pos - closing) / (widest + 1));
        const count = Math.min(width - this.#element, BATCH, room);
        if (count <= 0) return pos;
        if (this.#element > 0) out[pos++] = 44;
        pos = write(out, view, pos, start + this.#element, start + this.#element + count);
        this.#element += count;
      }
      this.#element = 0;
      if (!part.brackets) continue;
      // "]" for the run and for each enclosing array that ends with it.
      out[pos++] = 93;
      for (let d = depth - 1; d >= 0; d--) {
        if (++index[d]! < shape[d]!) break;
        index[d] = 0;
        out[pos++] = 93;
      }
    }
    return pos;
  }
}

/** The JSON of a tensor with no elements nested by `shape`: arrays down to the first empty dimension. */
function emptyJson(shape: readonly number[]): string {
  if (shape.length === 0 || shape[0] === 0) return "[]";
  const inner = emptyJson(shape.slice(1));
  return `[${Array.from({ length: shape[0]! }, () => inner).join(",")}]`;
}

/** The array of `shape[dim]` elements (or arrays) starting at element `offset`, as text. */
function arrayText(shape: readonly number[], dim: number, offset: number, element: ElementText): string {
  const n = shape[dim]!;
  let text = "[";
  if (dim === shape.length - 1) {
    for (let i = 0; i < n; i++) text += i ? `,${element(offset + i)}` : element(offset);
  } else {
    let stride = 1;
    for (let d = dim + 1; d < shape.length; d++) stride *= shape[d]!;
    for (let i = 0; i < n; i++) {
      if (i) text += ",";
      text += arrayText(shape, dim + 1, offset + i * stride, element);
    }
  }
  return `${text}]`;
}

/** How to write `t`'s elements, and the widest one; undefined: JSON.stringify writes it. */
function runWriter(t: Tensor): { write: WriteRun; widest: number; element: ElementText } | undefined {
  const data = t.data;
  if (data instanceof Float32Array) {
    const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
    return {
      widest: FLOAT32_TEXT_MAX,
      write: (out, view, pos, from, to) => writeFloat32s(data, bits, out, view, pos, from, to),
      element: (i) => float32Text(data[i]!, bits[i]!),
    };
  }
  if (t.datatype === "BOOL") {
    const bools = data as Uint8Array;
    return {
      widest: 5,
      element: (i) => (bools[i] ? "true" : "false"),
      write: (out, _view, pos, from, to) => {
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
      element: (i) => String(ints[i]!),
      write: (out, view, pos, from, to) => {
        for (let i = from; i < to; i++) {
          if (i > from) out[pos++] = 44;
          pos = writeInteger(ints[i]!, out, view, pos);
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
function writeInteger(v: number, out: Uint8Array, view: DataView, pos: number): number {
  if (v >= 0) return writeUnsigned(v, view, pos);
  out[pos] = 45;
  return writeUnsigned(-v, view, pos + 1);
}
