// Reads the header of a GGUF file (metadata and tensor table, not the weights) and checks that
// a llama-architecture file has what llama.cpp needs. This runs before the file reaches
// llama.cpp because some missing keys (llama.feed_forward_length, llama.attention.head_count)
// make llama.cpp abort the whole process with a GGML_ASSERT instead of throwing.
import { open } from "node:fs/promises";

/** GGUF metadata value types (gguf.h). */
export const GgufType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** ggml tensor types this project writes or recognises by name. */
export const GgmlType = { F32: 0, F16: 1 } as const;

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian uint32
export const GGUF_DEFAULT_ALIGNMENT = 32;

export type GgufValue = number | bigint | boolean | string | GgufValue[];

export interface GgufTensorInfo {
  name: string;
  /** ggml order: the input (row) dimension first. */
  dims: number[];
  type: number;
  /** Offset from the start of the data section. */
  offset: number;
}

export interface GgufHeader {
  version: number;
  metadata: Map<string, GgufValue>;
  tensors: GgufTensorInfo[];
  /** Byte offset where the tensor data section starts. */
  dataOffset: number;
}

class OutOfData extends Error {}

/** A cursor over a buffer that throws OutOfData when a read would pass its end. */
class Cursor {
  pos = 0;
  constructor(readonly buf: Buffer) {}
  private need(n: number): void {
    if (this.pos + n > this.buf.length) throw new OutOfData();
  }
  u8(): number {
    this.need(1);
    return this.buf.readUInt8(this.pos++);
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  u64(): bigint {
    this.need(8);
    const v = this.buf.readBigUInt64LE(this.pos);
    this.pos += 8;
    return v;
  }
  /** A u64 used as a count or size; refuses values no real file has. */
  size(what: string): number {
    const v = this.u64();
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`GGUF ${what} ${v} is not a plausible size`);
    return Number(v);
  }
  string(): string {
    const n = this.size("string length");
    this.need(n);
    const s = this.buf.toString("utf8", this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  value(type: number): GgufValue {
    const b = this.buf;
    switch (type) {
      case GgufType.UINT8:
        return this.u8();
      case GgufType.INT8:
        this.need(1);
        return b.readInt8(this.pos++);
      case GgufType.UINT16:
        this.need(2);
        this.pos += 2;
        return b.readUInt16LE(this.pos - 2);
      case GgufType.INT16:
        this.need(2);
        this.pos += 2;
        return b.readInt16LE(this.pos - 2);
      case GgufType.UINT32:
        return this.u32();
      case GgufType.INT32:
        this.need(4);
        this.pos += 4;
        return b.readInt32LE(this.pos - 4);
      case GgufType.FLOAT32:
        this.need(4);
        this.pos += 4;
        return b.readFloatLE(this.pos - 4);
      case GgufType.BOOL:
        return this.u8() !== 0;
      case GgufType.STRING:
        return this.string();
      case GgufType.UINT64:
        return this.u64();
      case GgufType.INT64:
        this.need(8);
        this.pos += 8;
        return b.readBigInt64LE(this.pos - 8);
      case GgufType.FLOAT64:
        this.need(8);
        this.pos += 8;
        return b.readDoubleLE(this.pos - 8);
      case GgufType.ARRAY: {
        const elemType = this.u32();
        const n = this.size("array length");
        const out: GgufValue[] = new Array(n);
        for (let i = 0; i < n; i++) out[i] = this.value(elemType);
        return out;
      }
      default:
        throw new Error(`unknown GGUF value type ${type} at byte ${this.pos}`);
    }
  }
}

function parseHeader(buf: Buffer): GgufHeader {
  const c = new Cursor(buf);
  const magic = c.u32();
  if (magic !== GGUF_MAGIC) throw new Error("not a GGUF file (the first 4 bytes are not 'GGUF')");
  const version = c.u32();
  if (version < 2 || version > 3) throw new Error(`GGUF version ${version} is not supported (2 or 3)`);
  const tensorCount = c.size("tensor count");
  const kvCount = c.size("metadata count");
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < kvCount; i++) {
    const key = c.string();
    metadata.set(key, c.value(c.u32()));
  }
  const tensors: GgufTensorInfo[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string();
    const nDims = c.u32();
    const dims: number[] = [];
    for (let d = 0; d < nDims; d++) dims.push(c.size("tensor dim"));
    const type = c.u32();
    tensors.push({ name, dims, type, offset: c.size("tensor offset") });
  }
  const align = Number(metadata.get("general.alignment") ?? GGUF_DEFAULT_ALIGNMENT);
  const dataOffset = Math.ceil(c.pos / align) * align;
  return { version, metadata, tensors, dataOffset };
}

/**
 * Reads the metadata and tensor table of the GGUF file at `path`, reading only as much of the
 * file as the header takes.
 * @throws Error when the file is not a readable GGUF file.
 */
export async function readGgufHeader(path: string): Promise<GgufHeader> {
  const fh = await open(path, "r");
  try {
    const { size } = await fh.stat();
    let want = Math.min(size, 1 << 20);
    for (;;) {
      const buf = Buffer.alloc(want);
      const { bytesRead } = await fh.read(buf, 0, want, 0);
      try {
        return parseHeader(buf.subarray(0, bytesRead));
      } catch (err) {
        if (!(err instanceof OutOfData)) throw err;
        if (want >= size) throw new Error(`GGUF header runs past the end of the file (${size} bytes)`);
        want = Math.min(size, want * 4);
      }
    }
  } finally {
    await fh.close();
  }
}

/** Metadata llama.cpp needs for a llama-architecture model; the first two abort the process when missing. */
const REQUIRED_LLAMA_KEYS: readonly [string, "uint" | "float" | "string" | "array"][] = [
  ["llama.feed_forward_length", "uint"],
  ["llama.attention.head_count", "uint"],
  ["llama.context_length", "uint"],
  ["llama.embedding_length", "uint"],
  ["llama.block_count", "uint"],
  ["llama.attention.layer_norm_rms_epsilon", "float"],
  ["tokenizer.ggml.model", "string"],
  ["tokenizer.ggml.tokens", "array"],
];

function isUint(v: GgufValue | undefined): boolean {
  return (typeof v === "number" && Number.isInteger(v) && v > 0) || (typeof v === "bigint" && v > 0n);
}

/**
 * What keeps llama.cpp from loading this file safely, one line per problem; empty when none.
 * Only llama-architecture files are checked in depth; others pass through to llama.cpp.
 */
export function llamaMetadataProblems(header: GgufHeader): string[] {
  const m = header.metadata;
  const problems: string[] = [];
  const arch = m.get("general.architecture");
  if (typeof arch !== "string") return ["general.architecture is missing"];
  if (arch !== "llama") return problems;
  for (const [key, kind] of REQUIRED_LLAMA_KEYS) {
    const v = m.get(key);
    if (v === undefined) problems.push(`${key} is missing`);
    else if (kind === "uint" && !isUint(v))
      problems.push(`${key} must be a positive integer, got ${String(v)}`);
    else if (kind === "float" && !(typeof v === "number" && v > 0))
      problems.push(`${key} must be a positive number, got ${String(v)}`);
    else if (kind === "string" && typeof v !== "string") problems.push(`${key} must be a string`);
    else if (kind === "array" && !(Array.isArray(v) && v.length > 0))
      problems.push(`${key} must be a non-empty array`);
  }
  const embd = Number(m.get("llama.embedding_length"));
  const heads = Number(m.get("llama.attention.head_count"));
  const kvHeads = Number(m.get("llama.attention.head_count_kv") ?? heads);
  if (heads > 0 && embd > 0 && embd % heads !== 0)
    problems.push(`llama.embedding_length ${embd} is not a multiple of llama.attention.head_count ${heads}`);
  if (kvHeads > 0 && heads > 0 && heads % kvHeads !== 0)
    problems.push(`llama.attention.head_count ${heads} is not a multiple of head_count_kv ${kvHeads}`);
  const tokens = m.get("tokenizer.ggml.tokens");
  const nVocab = Array.isArray(tokens) ? tokens.length : 0;
  for (const key of ["tokenizer.ggml.scores", "tokenizer.ggml.token_type"]) {
    const v = m.get(key);
    if (v !== undefined && (!Array.isArray(v) || v.length !== nVocab))
      problems.push(`${key} must have one entry per token (${nVocab})`);
  }
  for (const key of ["tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"]) {
    const v = m.get(key);
    if (v !== undefined && !(Number(v) >= 0 && Number(v) < nVocab))
      problems.push(`${key} ${String(v)} is outside the vocabulary (0..${nVocab - 1})`);
  }
  const embdTensor = header.tensors.find((t) => t.name === "token_embd.weight");
  if (!embdTensor) problems.push("tensor token_embd.weight is missing");
  else if (embdTensor.dims[0] !== embd || embdTensor.dims[1] !== nVocab)
    problems.push(
      `tensor token_embd.weight has dims [${embdTensor.dims}]; expected [${embd}, ${nVocab}] (embedding_length, tokens)`,
    );
  return problems;
}
