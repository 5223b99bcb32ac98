// Writes GGUF v3 files byte by byte: typed metadata, then the tensor table, then F32 tensor data,
// each tensor aligned to 32 bytes. Enough of the format for the project's test language models;
// the layout constants come from the reader in src/backends/llama-cpp/gguf-file.ts.
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GgmlType,
  GgufType,
} from "../../src/backends/llama-cpp/gguf-file.js";

/** A metadata value with its GGUF type spelled out: JavaScript cannot tell 1 (u32) from 1.0 (f32). */
export type GgufEntry =
  | { type: "u32"; value: number }
  | { type: "i32"; value: number }
  | { type: "f32"; value: number }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "string[]"; value: readonly string[] }
  | { type: "f32[]"; value: ArrayLike<number> }
  | { type: "i32[]"; value: ArrayLike<number> };

export interface GgufTensor {
  name: string;
  /** ggml order: the input (row) dimension first, e.g. [n_embd, n_vocab] for token_embd. */
  dims: readonly number[];
  data: Float32Array;
}

export const u32 = (value: number): GgufEntry => ({ type: "u32", value });
export const f32 = (value: number): GgufEntry => ({ type: "f32", value });
export const str = (value: string): GgufEntry => ({ type: "string", value });

/** A growable little-endian byte builder. */
class Bytes {
  private buf = Buffer.alloc(1 << 16);
  length = 0;
  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = Buffer.alloc(size);
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u32(v: number): void {
    this.room(4);
    this.buf.writeUInt32LE(v, this.length);
    this.length += 4;
  }
  i32(v: number): void {
    this.room(4);
    this.buf.writeInt32LE(v, this.length);
    this.length += 4;
  }
  u64(v: number): void {
    this.room(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  f32(v: number): void {
    this.room(4);
    this.buf.writeFloatLE(v, this.length);
    this.length += 4;
  }
  u8(v: number): void {
    this.room(1);
    this.buf[this.length++] = v;
  }
  string(s: string): void {
    const b = Buffer.from(s, "utf8");
    this.u64(b.length);
    this.room(b.length);
    b.copy(this.buf, this.length);
    this.length += b.length;
  }
  pad(align: number): void {
    const n = (align - (this.length % align)) % align;
    this.room(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

function writeEntry(out: Bytes, e: GgufEntry): void {
  switch (e.type) {
    case "u32":
      out.u32(GgufType.UINT32);
      out.u32(e.value);
      return;
    case "i32":
      out.u32(GgufType.INT32);
      out.i32(e.value);
      return;
    case "f32":
      out.u32(GgufType.FLOAT32);
      out.f32(e.value);
      return;
    case "bool":
      out.u32(GgufType.BOOL);
      out.u8(e.value ? 1 : 0);
      return;
    case "string":
      out.u32(GgufType.STRING);
      out.string(e.value);
      return;
    case "string[]":
      out.u32(GgufType.ARRAY);
      out.u32(GgufType.STRING);
      out.u64(e.value.length);
      for (const s of e.value) out.string(s);
      return;
    case "f32[]":
      out.u32(GgufType.ARRAY);
      out.u32(GgufType.FLOAT32);
      out.u64(e.value.length);
      for (let i = 0; i < e.value.length; i++) out.f32(e.value[i]!);
      return;
    case "i32[]":
      out.u32(GgufType.ARRAY);
      out.u32(GgufType.INT32);
      out.u64(e.value.length);
      for (let i = 0; i < e.value.length; i++) out.i32(e.value[i]!);
      return;
  }
}

/**
 * The bytes of a GGUF v3 file holding `metadata` (in the given order) and F32 `tensors`.
 * @throws Error when a tensor's data does not fill its dims.
 */
export function encodeGguf(metadata: ReadonlyMap<string, GgufEntry>, tensors: readonly GgufTensor[]): Buffer {
  const align = GGUF_DEFAULT_ALIGNMENT;
  const head = new Bytes();
  head.u32(GGUF_MAGIC);
  head.u32(3);
  head.u64(tensors.length);
  head.u64(metadata.size);
  for (const [key, entry] of metadata) {
    head.string(key);
    writeEntry(head, entry);
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    const n = t.dims.reduce((a, b) => a * b, 1);
    if (n !== t.data.length)
      throw new Error(`tensor ${t.name} [${t.dims}] needs ${n} values, got ${t.data.length}`);
    head.string(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(d);
    head.u32(GgmlType.F32);
    head.u64(offset);
    offsets.push(offset);
    offset += Math.ceil(t.data.byteLength / align) * align;
  }
  head.pad(align);
  const header = head.bytes();
  const file = Buffer.alloc(header.length + offset);
  header.copy(file, 0);
  tensors.forEach((t, i) => {
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    // Float32Array is host-endian; every machine this runs on is little-endian, as GGUF is.
    bytes.copy(file, header.length + offsets[i]!);
  });
  return file;
}
