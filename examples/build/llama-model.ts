// A llama-architecture language model generated in TypeScript: a SentencePiece-style vocabulary
// with byte fallback (or a byte-level BPE one, bpe-vocabulary.ts), seeded F32 weights, the GGUF metadata llama.cpp needs, and a float64
// reference forward pass with greedy decoding. The reference is what golden files are made from,
// so a passing golden check shows llama.cpp computes this very model (as the ONNX examples'
// goldens come from their TypeScript models, never from onnxruntime).
//
// Weights are random, so the text is word salad; two choices keep it readable and testable:
// dimension 0 of the residual stream is held constant (its writers are zeroed), and the output
// rows read it with +1 for word pieces and -4 for byte, control and end tokens. So greedy decoding
// emits whole pieces (valid UTF-8, no early end) and the answers run to max_tokens.
import { fromHalfBits, toHalfBits } from "../../src/protocol/float16.js";
import { buildBpeVocabulary, fromByteLevel } from "./bpe-vocabulary.js";
import { encodeGguf, f32, type GgufEntry, type GgufTensor, str, u32 } from "./gguf-writer.js";
import { Random } from "./random.js";

export interface LlamaSpec {
  name: string;
  seed: number;
  /** Words that become pieces, with every left prefix of "▁word" also a piece. */
  words: readonly string[];
  embd: number;
  heads: number;
  kvHeads: number;
  ff: number;
  layers: number;
  contextLength: number;
  chatTemplate?: string;
  /** Standard deviation of the random weights (uniform with this spread). */
  weightScale: number;
  /**
   * The vocabulary: SentencePiece with byte fallback (the default), or byte-level BPE as GPT-2
   * and Llama 3 have it, optionally without the single-character tokens of `withoutSingle`.
   */
  tokenizer?: { kind: "bpe"; withoutSingle?: string };
}

export const SPACE = "\u2581"; // SentencePiece's visible space
export const BOS = 1;
export const EOS = 2;
const RMS_EPS = 1e-5;
const ROPE_BASE = 10_000;
/** Value of residual dimension 0 (see the top comment): large, so RMS normalisation keeps it dominant. */
const BIAS_CHANNEL = 16;

/** Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type). */
const NORMAL = 1;
const UNKNOWN = 2;
const CONTROL = 3;
const BYTE = 6;

export interface Vocabulary {
  /** tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE). */
  model: "llama" | "gpt2";
  pieces: string[];
  scores: Float32Array;
  types: Int32Array;
  ids: Map<string, number>;
  /** BPE only: "left right" merges, highest priority first. */
  merges?: string[];
  bos: number;
  eos: number;
}

/** The BPE vocabulary's control tokens: GPT-2's end of text (its BOS and EOS), then ChatML's. */
const BPE_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/**
 * `<unk> <s> </s> <|im_start|> <|im_end|>`, the 256 byte tokens `<0x00>`…`<0xFF>`, single
 * characters, then every left prefix of "▁word" for each word. Longer pieces score higher, so
 * SentencePiece's merges build whole words when they can.
 */
export function buildVocabulary(words: readonly string[]): Vocabulary {
  const pieces: string[] = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"];
  const types: number[] = [UNKNOWN, CONTROL, CONTROL, CONTROL, CONTROL];
  for (let b = 0; b < 256; b++) {
    pieces.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(BYTE);
  }
  const seen = new Set(pieces);
  const add = (p: string) => {
    if (seen.has(p)) return;
    seen.add(p);
    pieces.push(p);
    types.push(NORMAL);
  };
  add(SPACE);
  for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-:;\n") add(c);
  for (const w of words) {
    const full = SPACE + w;
    for (let n = 2; n <= [...full].length; n++) add([...full].slice(0, n).join(""));
  }
  const scores = Float32Array.from(pieces, (p, i) => (types[i] === NORMAL ? [...p].length : 0));
  return {
    model: "llama",
    pieces,
    scores,
    types: Int32Array.from(types),
    ids: new Map(pieces.map((p, i) => [p, i])),
    bos: BOS,
    eos: EOS,
  };
}

/** The vocabulary `spec` asks for. */
export function vocabularyOf(spec: LlamaSpec): Vocabulary {
  if (!spec.tokenizer) return buildVocabulary(spec.words);
  const { tokens, merges } = buildBpeVocabulary(BPE_SPECIALS, spec.words, spec.tokenizer);
  const types = Int32Array.from(tokens, (_, i) => (i < BPE_SPECIALS.length ? CONTROL : NORMAL));
  return {
    model: "gpt2",
    pieces: tokens,
    scores: new Float32Array(tokens.length),
    types,
    ids: new Map(tokens.map((p, i) => [p, i])),
    merges,
    bos: 0,
    eos: 0,
  };
}

/** Row-major [rows][cols] as ggml stores a [cols, rows] tensor: row r holds output r. */
type Matrix = { rows: number; cols: number; data: Float32Array };

export interface LlamaWeights {
  vocab: Vocabulary;
  embedding: Matrix; // [vocab][embd]
  output: Matrix; // [vocab][embd]
  outputNorm: Float32Array;
  layers: {
    attnNorm: Float32Array;
    q: Matrix; // [embd][embd]
    k: Matrix; // [kvDim][embd]
    v: Matrix; // [kvDim][embd]
    o: Matrix; // [embd][embd]
    ffnNorm: Float32Array;
    gate: Matrix; // [ff][embd]
    up: Matrix; // [ff][embd]
    down: Matrix; // [embd][ff]
  }[];
}

function randomMatrix(rng: Random, rows: number, cols: number, scale: number): Matrix {
  const data = new Float32Array(rows * cols);
  const a = scale * Math.sqrt(3); // uniform(-a, a) has standard deviation `scale`
  for (let i = 0; i < data.length; i++) data[i] = (rng.next() * 2 - 1) * a;
  return { rows, cols, data };
}

/** Seeded weights for `spec`; the same spec always gives the same bytes. */
export function buildWeights(spec: LlamaSpec): LlamaWeights {
  const rng = new Random(spec.seed);
  const vocab = vocabularyOf(spec);
  const n = vocab.pieces.length;
  const kvDim = (spec.embd / spec.heads) * spec.kvHeads;
  const s = spec.weightScale;
  const embedding = randomMatrix(rng, n, spec.embd, 1);
  for (let t = 0; t < n; t++) embedding.data[t * spec.embd] = BIAS_CHANNEL;
  const output = randomMatrix(rng, n, spec.embd, s * 4);
  for (let t = 0; t < n; t++) output.data[t * spec.embd] = vocab.types[t] === NORMAL ? 1 : -4;
  const ones = () => new Float32Array(spec.embd).fill(1);
  const layers = Array.from({ length: spec.layers }, () => {
    const o = randomMatrix(rng, spec.embd, spec.embd, s);
    const down = randomMatrix(rng, spec.embd, spec.ff, s);
    // Nothing writes residual dimension 0, so the output bias toward word pieces holds.
    o.data.fill(0, 0, spec.embd);
    down.data.fill(0, 0, spec.ff);
    // ...and nothing reads it but the output, so the layers see only the token's own dimensions.
    const read = (m: Matrix) => {
      for (let r = 0; r < m.rows; r++) m.data[r * m.cols] = 0;
      return m;
    };
    return {
      attnNorm: ones(),
      q: read(randomMatrix(rng, spec.embd, spec.embd, s)),
      k: read(randomMatrix(rng, kvDim, spec.embd, s)),
      v: read(randomMatrix(rng, kvDim, spec.embd, s)),
      o,
      ffnNorm: ones(),
      gate: read(randomMatrix(rng, spec.ff, spec.embd, s)),
      up: read(randomMatrix(rng, spec.ff, spec.embd, s)),
      down,
    };
  });
  return { vocab, embedding, output, outputNorm: ones(), layers };
}

/** The GGUF metadata of `spec`, in the order llama.cpp's loader documents them. */
export function llamaMetadata(spec: LlamaSpec, vocab: Vocabulary): Map<string, GgufEntry> {
  const m = new Map<string, GgufEntry>([
    ["general.architecture", str("llama")],
    ["general.name", str(spec.name)],
    ["general.alignment", u32(32)],
    ["llama.context_length", u32(spec.contextLength)],
    ["llama.embedding_length", u32(spec.embd)],
    ["llama.block_count", u32(spec.layers)],
    ["llama.feed_forward_length", u32(spec.ff)],
    ["llama.attention.head_count", u32(spec.heads)],
    ["llama.attention.head_count_kv", u32(spec.kvHeads)],
    ["llama.rope.dimension_count", u32(spec.embd / spec.heads)],
    ["llama.rope.freq_base", f32(ROPE_BASE)],
    ["llama.attention.layer_norm_rms_epsilon", f32(RMS_EPS)],
    ["llama.vocab_size", u32(vocab.pieces.length)],
    ["tokenizer.ggml.model", str(vocab.model)],
  ]);
  if (vocab.model === "gpt2") {
    m.set("tokenizer.ggml.pre", str("gpt-2"));
    m.set("tokenizer.ggml.tokens", { type: "string[]", value: vocab.pieces });
    m.set("tokenizer.ggml.token_type", { type: "i32[]", value: vocab.types });
    m.set("tokenizer.ggml.merges", { type: "string[]", value: vocab.merges ?? [] });
  } else {
    m.set("tokenizer.ggml.tokens", { type: "string[]", value: vocab.pieces });
    m.set("tokenizer.ggml.scores", { type: "f32[]", value: vocab.scores });
    m.set("tokenizer.ggml.token_type", { type: "i32[]", value: vocab.types });
    m.set("tokenizer.ggml.unknown_token_id", u32(0));
  }
  m.set("tokenizer.ggml.bos_token_id", u32(vocab.bos));
  m.set("tokenizer.ggml.eos_token_id", u32(vocab.eos));
  m.set("tokenizer.ggml.add_bos_token", { type: "bool", value: vocab.model === "llama" });
  m.set("tokenizer.ggml.add_eos_token", { type: "bool", value: false });
  if (spec.chatTemplate) m.set("tokenizer.chat_template", str(spec.chatTemplate));
  return m;
}

const tensor = (name: string, dims: number[], data: Float32Array): GgufTensor => ({ name, dims, data });

/** The GGUF file of `spec` and the weights it holds (for the reference forward pass). */
export function buildLlamaGguf(spec: LlamaSpec): { gguf: Buffer; weights: LlamaWeights } {
  if (spec.embd % spec.heads !== 0 || spec.heads % spec.kvHeads !== 0)
    throw new Error(`${spec.name}: embd must divide by heads, heads by kvHeads`);
  const w = buildWeights(spec);
  const n = w.vocab.pieces.length;
  const kvDim = (spec.embd / spec.heads) * spec.kvHeads;
  const tensors: GgufTensor[] = [
    tensor("token_embd.weight", [spec.embd, n], w.embedding.data),
    tensor("output_norm.weight", [spec.embd], w.outputNorm),
    tensor("output.weight", [spec.embd, n], w.output.data),
  ];
  w.layers.forEach((l, i) => {
    tensors.push(
      tensor(`blk.${i}.attn_norm.weight`, [spec.embd], l.attnNorm),
      tensor(`blk.${i}.attn_q.weight`, [spec.embd, spec.embd], l.q.data),
      tensor(`blk.${i}.attn_k.weight`, [spec.embd, kvDim], l.k.data),
      tensor(`blk.${i}.attn_v.weight`, [spec.embd, kvDim], l.v.data),
      tensor(`blk.${i}.attn_output.weight`, [spec.embd, spec.embd], l.o.data),
      tensor(`blk.${i}.ffn_norm.weight`, [spec.embd], l.ffnNorm),
      tensor(`blk.${i}.ffn_gate.weight`, [spec.embd, spec.ff], l.gate.data),
      tensor(`blk.${i}.ffn_down.weight`, [spec.ff, spec.embd], l.down.data),
      tensor(`blk.${i}.ffn_up.weight`, [spec.embd, spec.ff], l.up.data),
    );
  });
  return { gguf: encodeGguf(llamaMetadata(spec, w.vocab), tensors), weights: w };
}

// ---- reference forward pass (float64), used to write golden files ----

function matVec(m: Matrix, x: Float64Array): Float64Array {
  const out = new Float64Array(m.rows);
  for (let r = 0; r < m.rows; r++) {
    let s = 0;
    const base = r * m.cols;
    for (let c = 0; c < m.cols; c++) s += m.data[base + c]! * x[c]!;
    out[r] = s;
  }
  return out;
}

function rmsNorm(x: Float64Array, w: Float32Array): Float64Array {
  let ss = 0;
  for (const v of x) ss += v * v;
  const k = 1 / Math.sqrt(ss / x.length + RMS_EPS);
  return x.map((v, i) => v * k * w[i]!);
}

/** llama.cpp's "normal" RoPE for the llama architecture: rotates adjacent pairs (2i, 2i+1) of each head. */
function rope(x: Float64Array, heads: number, headDim: number, pos: number): void {
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < headDim; i += 2) {
      const theta = pos * ROPE_BASE ** (-i / headDim);
      const c = Math.cos(theta);
      const s = Math.sin(theta);
      const a = x[h * headDim + i]!;
      const b = x[h * headDim + i + 1]!;
      x[h * headDim + i] = a * c - b * s;
      x[h * headDim + i + 1] = a * s + b * c;
    }
  }
}

/** Rounds to float16 and back, as a value stored in llama.cpp's default KV cache. */
function toHalf(x: Float64Array): Float64Array {
  return Float64Array.from(fromHalfBits(toHalfBits(Float32Array.from(x))));
}

export interface GreedyStep {
  token: number;
  /** Top logit minus the runner-up: how far float32 rounding would have to move to change the pick. */
  margin: number;
}

/**
 * Greedy decoding of `maxTokens` tokens after `prompt` (token ids, BOS included), in float64.
 * Returns each chosen token with its margin over the runner-up.
 */
export function greedyReference(
  spec: LlamaSpec,
  w: LlamaWeights,
  prompt: readonly number[],
  maxTokens: number,
): GreedyStep[] {
  const headDim = spec.embd / spec.heads;
  const group = spec.heads / spec.kvHeads;
  const keys: Float64Array[][] = w.layers.map(() => []);
  const values: Float64Array[][] = w.layers.map(() => []);
  const steps: GreedyStep[] = [];
  const tokens = [...prompt];
  for (let pos = 0; pos < prompt.length + maxTokens - 1; pos++) {
    const t = tokens[pos]!;
    let x = Float64Array.from(w.embedding.data.subarray(t * spec.embd, (t + 1) * spec.embd));
    w.layers.forEach((l, li) => {
      const h = rmsNorm(x, l.attnNorm);
      const q = matVec(l.q, h);
      const k = matVec(l.k, h);
      rope(q, spec.heads, headDim, pos);
      rope(k, spec.kvHeads, headDim, pos);
      // llama.cpp keeps the KV cache in float16: round as it does, or long answers drift apart.
      keys[li]!.push(toHalf(k));
      values[li]!.push(toHalf(matVec(l.v, h)));
      const attn = new Float64Array(spec.embd);
      for (let hd = 0; hd < spec.heads; hd++) {
        const kvh = Math.floor(hd / group);
        const scores = keys[li]!.map((kk) => {
          let s = 0;
          for (let i = 0; i < headDim; i++) s += q[hd * headDim + i]! * kk[kvh * headDim + i]!;
          return s / Math.sqrt(headDim);
        });
        const max = Math.max(...scores);
        const exp = scores.map((s) => Math.exp(s - max));
        const sum = exp.reduce((a, b) => a + b, 0);
        exp.forEach((e, j) => {
          const vv = values[li]![j]!;
          for (let i = 0; i < headDim; i++) attn[hd * headDim + i]! += (e / sum) * vv[kvh * headDim + i]!;
        });
      }
      const o = matVec(l.o, attn);
      x = x.map((v, i) => v + o[i]!);
      const f = rmsNorm(x, l.ffnNorm);
      const g = matVec(l.gate, f);
      const u = matVec(l.up, f);
      const act = g.map((gv, i) => (gv / (1 + Math.exp(-gv))) * u[i]!);
      const d = matVec(l.down, act);
      x = x.map((v, i) => v + d[i]!);
    });
    if (pos < prompt.length - 1) continue;
    const logits = matVec(w.output, rmsNorm(x, w.outputNorm));
    let best = 0;
    let second = -Infinity;
    for (let i = 1; i < logits.length; i++) {
      if (logits[i]! > logits[best]!) {
        second = logits[best]!;
        best = i;
      } else if (logits[i]! > second) second = logits[i]!;
    }
    steps.push({ token: best, margin: logits[best]! - second });
    tokens.push(best);
  }
  return steps;
}

/**
 * SentencePiece tokenization of " word word …" (vocabulary words, each after one space): BOS,
 * then one piece per word. node-llama-cpp tokenizes a completion prompt as written (no space is
 * added in front), so the leading space is what makes the first word "▁word".
 */
export function tokenizeWords(vocab: Vocabulary, text: string): number[] {
  if (!text.startsWith(" ")) throw new Error(`'${text}' must start with a space`);
  return [
    BOS,
    ...text
      .slice(1)
      .split(" ")
      .map((word) => {
        const id = vocab.ids.get(SPACE + word);
        if (id === undefined) throw new Error(`'${word}' is not a word of the vocabulary`);
        return id;
      }),
  ];
}

/**
 * The text of generated pieces as modelport returns a completion's continuation: "▁" becomes a
 * space, also at the very start (the space between the prompt and the first generated word).
 */
export function detokenize(vocab: Vocabulary, tokens: readonly number[]): string {
  if (vocab.model === "gpt2") return fromByteLevel(tokens.map((t) => vocab.pieces[t]!).join(""));
  return tokens.map((t) => vocab.pieces[t]!.replaceAll(SPACE, " ")).join("");
}
