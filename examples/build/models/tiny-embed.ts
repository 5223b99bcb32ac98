// tiny-embed: a Hugging Face-style BERT folder small enough to build here (config.json,
// tokenizer.json, tokenizer_config.json, onnx/model.onnx) for the `transformers` backend. The
// "model" is a word-embedding table with topic structure: words of one topic share a direction,
// so mean-pooled sentence vectors put texts that share words or topics close together, and
// unrelated texts apart. Its golden file is computed here in TypeScript from the same weights
// (tokenise, look up, tanh, mean over the attention mask, L2-normalise), never by onnxruntime.
//
// The builder takes its sizes from an EmbedSpec: TINY_EMBED is the example (and the tests'),
// BENCH_EMBED the same recipe at MiniLM-L6's sizes (hidden 384, feed-forward 1536, 6 layers), so
// that a call costs real arithmetic; the embeddings benchmark builds it on demand, tests never do.
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import type { GoldenFile } from "../../../src/golden.js";
import { formatJson, goldenTensor } from "../artifacts.js";
import {
  attr,
  elemTypeCode,
  encodeModel,
  floatTensor,
  int64Tensor,
  node,
  tensorInfo,
} from "../onnx-graph.js";
import { Random } from "../random.js";

export const TINY_EMBED_NAME = "tiny-embed";
export const TINY_EMBED_DIM = 32;
/** Width of each layer's feed-forward block. */
export const TINY_EMBED_FF = 64;
/**
 * Encoder layers, as MiniLM-L6 has six: each is a residual feed-forward block and a layer norm
 * (10 ONNX nodes). Like a real small encoder at batch 1, a call costs more in per-node overhead
 * than in arithmetic, which is what batching amortises.
 */
export const TINY_EMBED_LAYERS = 6;
const LN_EPSILON = 1e-5;
const SEED = 7171;

/** The sizes of an encoder built by this recipe (the vocabulary is always the one below). */
export interface EmbedSpec {
  name: string;
  /** Hidden size. */
  dim: number;
  /** Width of each layer's feed-forward block. */
  ff: number;
  layers: number;
  seed: number;
}

export const TINY_EMBED: EmbedSpec = {
  name: TINY_EMBED_NAME,
  dim: TINY_EMBED_DIM,
  ff: TINY_EMBED_FF,
  layers: TINY_EMBED_LAYERS,
  seed: SEED,
};

/**
 * MiniLM-L6-like sizes (hidden 384, feed-forward 1536, 6 layers; ~7M weights, no attention), so
 * that a call is dominated by arithmetic as with a real small encoder. Built on demand by the
 * embeddings benchmark only.
 */
export const BENCH_EMBED: EmbedSpec = { name: "bench-embed", dim: 384, ff: 1536, layers: 6, seed: SEED };

const SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] as const;
const CLS = 2;
const SEP = 3;
const UNK = 1;

/** Words by topic: words of one topic get nearby vectors. */
const TOPICS: Record<string, readonly string[]> = {
  animals: [
    "cat",
    "cats",
    "dog",
    "dogs",
    "kitten",
    "puppy",
    "pet",
    "pets",
    "bird",
    "fish",
    "horse",
    "animal",
  ],
  money: [
    "money",
    "bank",
    "loan",
    "price",
    "prices",
    "pay",
    "paid",
    "cost",
    "costs",
    "dollar",
    "budget",
    "tax",
  ],
  weather: [
    "rain",
    "sun",
    "sunny",
    "snow",
    "wind",
    "storm",
    "cloud",
    "weather",
    "cold",
    "warm",
    "hot",
    "forecast",
  ],
  food: [
    "bread",
    "cheese",
    "pizza",
    "apple",
    "soup",
    "coffee",
    "tea",
    "dinner",
    "lunch",
    "eat",
    "cook",
    "food",
  ],
  computing: [
    "model",
    "server",
    "gpu",
    "cpu",
    "code",
    "data",
    "network",
    "request",
    "batch",
    "token",
    "vector",
    "api",
  ],
};
/** Function words: small vectors in a shared direction, so they barely move a sentence. */
const COMMON = [
  "the",
  "a",
  "an",
  "is",
  "are",
  "was",
  "and",
  "or",
  "of",
  "to",
  "in",
  "on",
  "my",
  "your",
  "it",
  "this",
  "that",
  "with",
  "for",
  "very",
  "likes",
  "like",
  "loves",
  "today",
  ".",
];

export interface TinyEmbedWeights {
  /** Hidden size. */
  dim: number;
  /** Feed-forward width. */
  ff: number;
  vocab: string[];
  /** [vocab, dim] row-major. */
  word: Float32Array;
  /** [2, dim]: token type 0 is zero, type 1 a small offset. */
  type: Float32Array;
  /** Per layer: h = layerNorm(h + relu(h · ff1 + b1) · ff2 + b2); ff1 [dim, FF], ff2 [FF, dim]. */
  layers: { ff1: Float32Array; b1: Float32Array; ff2: Float32Array; b2: Float32Array }[];
}

export function tinyEmbedWeights(spec: EmbedSpec = TINY_EMBED): TinyEmbedWeights {
  const rng = new Random(spec.seed);
  const dim = spec.dim;
  const vocab: string[] = [...SPECIAL];
  const rows: number[][] = SPECIAL.map(() => Array.from({ length: dim }, () => 0.05 * rng.normal()));
  const unit = () => {
    const v = Array.from({ length: dim }, () => rng.normal());
    const n = Math.hypot(...v);
    return v.map((x) => x / n);
  };
  for (const words of Object.values(TOPICS)) {
    const topic = unit();
    for (const w of words) {
      const own = unit();
      vocab.push(w);
      rows.push(topic.map((t, i) => 1.2 * t + 0.8 * own[i]!));
    }
  }
  const common = unit();
  for (const w of COMMON) {
    const own = unit();
    vocab.push(w);
    rows.push(common.map((t, i) => 0.15 * t + 0.1 * own[i]!));
  }
  const word = Float32Array.from(rows.flat());
  const type = new Float32Array(2 * dim);
  for (let i = 0; i < dim; i++) type[dim + i] = 0.05 * rng.normal();
  // Small second-layer weights: each block perturbs a token's vector without erasing its topic.
  const ff = spec.ff;
  const layers = Array.from({ length: spec.layers }, () => ({
    ff1: Float32Array.from({ length: dim * ff }, () => rng.normal() / Math.sqrt(dim)),
    b1: Float32Array.from({ length: ff }, () => 0.1 * rng.normal()),
    ff2: Float32Array.from({ length: ff * dim }, () => (0.2 * rng.normal()) / Math.sqrt(ff)),
    b2: Float32Array.from({ length: dim }, () => 0.01 * rng.normal()),
  }));
  return { dim, ff, vocab, word, type, layers };
}

/** BertNormalizer (lowercase) + BertPreTokenizer (split on whitespace and punctuation) + whole-word lookup. */
export function tinyEmbedTokenize(text: string, vocab: readonly string[]): number[] {
  const index = new Map(vocab.map((w, i) => [w, i]));
  const words = text.toLowerCase().match(/[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu) ?? [];
  return [CLS, ...words.map((w) => index.get(w) ?? UNK), SEP];
}

/** One token's hidden state: tanh(word + type 0), then every layer (float64; the golden tolerance covers float32). */
function tokenState(id: number, weights: TinyEmbedWeights): number[] {
  const { dim, ff } = weights;
  let h = Array.from({ length: dim }, (_, i) => Math.tanh(weights.word[id * dim + i]!));
  for (const layer of weights.layers) {
    const out = h.map((x, k) => x + layer.b2[k]!);
    for (let j = 0; j < ff; j++) {
      let a = layer.b1[j]!;
      for (let i = 0; i < dim; i++) a += h[i]! * layer.ff1[i * ff + j]!;
      if (a <= 0) continue;
      for (let k = 0; k < dim; k++) out[k]! += a * layer.ff2[j * dim + k]!;
    }
    const mean = out.reduce((x, y) => x + y, 0) / dim;
    const variance = out.reduce((x, y) => x + (y - mean) ** 2, 0) / dim;
    h = out.map((x) => (x - mean) / Math.sqrt(variance + LN_EPSILON));
  }
  return h;
}

/** The reference forward pass: mean over tokens of the hidden states, then L2-normalised. */
export function tinyEmbed(text: string, weights: TinyEmbedWeights): number[] {
  const dim = weights.dim;
  const ids = tinyEmbedTokenize(text, weights.vocab);
  const sum = new Array<number>(dim).fill(0);
  for (const id of ids) {
    const h = tokenState(id, weights);
    for (let i = 0; i < dim; i++) sum[i]! += h[i]!;
  }
  const mean = sum.map((s) => s / ids.length);
  const norm = Math.hypot(...mean);
  return mean.map((m) => m / norm);
}

function tokenizerJson(vocab: readonly string[]): unknown {
  const special = (content: string, id: number) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const seq = (id: "A" | "B", typeId: number) => ({ Sequence: { id, type_id: typeId } });
  const tok = (id: string, typeId: number) => ({ SpecialToken: { id, type_id: typeId } });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: SPECIAL.map((s, i) => special(s, i)),
    normalizer: {
      type: "BertNormalizer",
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null,
      lowercase: true,
    },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0)],
      pair: [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0), seq("B", 1), tok("[SEP]", 1)],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [CLS], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [SEP], tokens: ["[SEP]"] },
      },
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: {
      type: "WordPiece",
      unk_token: "[UNK]",
      continuing_subword_prefix: "##",
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(vocab.map((w, i) => [w, i])),
    },
  };
}

function onnxGraph(name: string, weights: TinyEmbedWeights): Uint8Array {
  const { dim, ff } = weights;
  const ids = ["batch", "sequence"];
  return encodeModel({
    name: name.replace(/-/g, "_"),
    doc: "h = tanh(word[input_ids] + type[token_type_ids]); per layer h = LayerNorm(h + relu(h ff1 + b1) ff2 + b2); last_hidden_state = h * attention_mask",
    inputs: [
      tensorInfo("input_ids", "INT64", ids),
      tensorInfo("attention_mask", "INT64", ids),
      tensorInfo("token_type_ids", "INT64", ids),
    ],
    outputs: [tensorInfo("last_hidden_state", "FP32", [...ids, dim])],
    initializers: [
      floatTensor("word_embeddings", [weights.vocab.length, dim], weights.word),
      floatTensor("type_embeddings", [2, dim], weights.type),
      ...weights.layers.flatMap((l, n) => [
        floatTensor(`ff1_${n}`, [dim, ff], l.ff1),
        floatTensor(`b1_${n}`, [ff], l.b1),
        floatTensor(`ff2_${n}`, [ff, dim], l.ff2),
        floatTensor(`b2_${n}`, [dim], l.b2),
      ]),
      floatTensor("ln_scale", [dim], new Float32Array(dim).fill(1)),
      floatTensor("ln_bias", [dim], new Float32Array(dim)),
      int64Tensor("axis2", [1], [2]),
    ],
    nodes: [
      node("Gather", ["word_embeddings", "input_ids"], ["words"]),
      node("Gather", ["type_embeddings", "token_type_ids"], ["types"]),
      node("Add", ["words", "types"], ["summed"]),
      node("Tanh", ["summed"], ["h_0"]),
      ...weights.layers.flatMap((_, n) => [
        node("MatMul", [`h_${n}`, `ff1_${n}`], [`ff_mm1_${n}`]),
        node("Add", [`ff_mm1_${n}`, `b1_${n}`], [`ff_in_${n}`]),
        node("Relu", [`ff_in_${n}`], [`ff_act_${n}`]),
        node("MatMul", [`ff_act_${n}`, `ff2_${n}`], [`ff_mm2_${n}`]),
        node("Add", [`ff_mm2_${n}`, `b2_${n}`], [`ff_out_${n}`]),
        node("Add", [`h_${n}`, `ff_out_${n}`], [`res_${n}`]),
        node(
          "LayerNormalization",
          [`res_${n}`, "ln_scale", "ln_bias"],
          [`h_${n + 1}`],
          [attr.int("axis", -1), attr.float("epsilon", LN_EPSILON)],
        ),
      ]),
      node("Identity", [`h_${weights.layers.length}`], ["hidden"]),
      node("Cast", ["attention_mask"], ["mask_f"], [attr.int("to", elemTypeCode("FP32"))]),
      node("Unsqueeze", ["mask_f", "axis2"], ["mask3"]),
      node("Mul", ["hidden", "mask3"], ["last_hidden_state"]),
    ],
  });
}

export const TINY_EMBED_GOLDEN_TEXT = "The cat likes warm milk and my dog likes the sun.";

/**
 * Writes `<outDir>/<name>/` (the model folder; tiny-embed by default) and
 * `<outDir>/<name>.golden.json` beside it (the config loader finds `<folder>.golden.json` as it
 * finds `<model>.golden.json`).
 * @returns the folder's path and a digest of the ONNX bytes.
 */
export async function writeTinyEmbed(
  outDir: string,
  spec: EmbedSpec = TINY_EMBED,
): Promise<{ dir: string; onnxSha256: string; bytes: number }> {
  const weights = tinyEmbedWeights(spec);
  const dir = path.join(outDir, spec.name);
  await mkdir(path.join(dir, "onnx"), { recursive: true });
  const onnx = onnxGraph(spec.name, weights);
  const config = {
    model_type: "bert",
    architectures: ["BertModel"],
    hidden_size: spec.dim,
    num_hidden_layers: spec.layers,
    num_attention_heads: 1,
    intermediate_size: spec.ff,
    vocab_size: weights.vocab.length,
    type_vocab_size: 2,
    max_position_embeddings: 128,
    pad_token_id: 0,
  };
  const tokenizerConfig = {
    tokenizer_class: "BertTokenizer",
    do_lower_case: true,
    model_max_length: 128,
    cls_token: "[CLS]",
    sep_token: "[SEP]",
    pad_token: "[PAD]",
    unk_token: "[UNK]",
    mask_token: "[MASK]",
  };
  await writeFile(path.join(dir, "config.json"), `${JSON.stringify(config, null, 2)}\n`);
  await writeFile(path.join(dir, "tokenizer.json"), `${JSON.stringify(tokenizerJson(weights.vocab))}\n`);
  await writeFile(path.join(dir, "tokenizer_config.json"), `${JSON.stringify(tokenizerConfig, null, 2)}\n`);
  await writeFile(path.join(dir, "onnx", "model.onnx"), onnx);
  const embedding = tinyEmbed(TINY_EMBED_GOLDEN_TEXT, weights);
  const tokens = tinyEmbedTokenize(TINY_EMBED_GOLDEN_TEXT, weights.vocab).length;
  const golden: GoldenFile = {
    description: `mean-pooled, L2-normalised embedding of the golden text, computed in TypeScript from the weights`,
    inputs: { text: { datatype: "BYTES", shape: [1], data: [TINY_EMBED_GOLDEN_TEXT] } },
    outputs: {
      embedding: goldenTensor("FP32", [1, spec.dim], embedding),
      tokens: goldenTensor("INT32", [1], [tokens]),
    },
    tolerance: 1e-4,
  };
  await writeFile(path.join(outDir, `${spec.name}.golden.json`), `${formatJson(golden)}\n`);
  return { dir, onnxSha256: createHash("sha256").update(onnx).digest("hex"), bytes: onnx.byteLength };
}
