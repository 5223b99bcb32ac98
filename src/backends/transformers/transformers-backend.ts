// The transformers backend: the only module that imports @huggingface/transformers (lazily,
// so a server without embedding models never pays for it). It runs inside the model's worker
// thread like any backend and turns a batch of texts (BYTES [n]) into pooled, optionally
// normalised vectors (FP32 [n, dim]) plus each text's token count (INT32 [n], for usage and
// cost). Rows already tokenized come as `ids` instead of `text` (BYTES [n], each row its token
// ids joined by commas, so requests of ids batch together like texts do) and are embedded as
// given: no special token is added. Local folders only: remote loading is switched off, so nothing is ever downloaded.
import { existsSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { ModelportError } from "../../errors.js";
import type { ModelSignature, TensorMap } from "../../tensor.js";
import type { Backend, LoadedModel, LoadOptions } from "../backend.js";
import { ortTelemetryOffByDefault } from "../ort-telemetry.js";

type Transformers = typeof import("@huggingface/transformers");

export type Pooling = "mean" | "cls";

/** The folder layout the backend needs (Hugging Face's, ONNX weights in onnx/model.onnx). */
export const REQUIRED_FILES = ["config.json", "tokenizer.json", "onnx/model.onnx"] as const;

/** Inputs and outputs every embedding model shows to the serving path. */
export const EMBEDDING_SIGNATURE: ModelSignature = {
  inputs: [{ name: "text", datatype: "BYTES", shape: [-1] }],
  outputs: [
    { name: "embedding", datatype: "FP32", shape: [-1, -1] },
    { name: "tokens", datatype: "INT32", shape: [-1] },
  ],
  batchable: true,
};

export interface EmbeddingOptions {
  pooling: Pooling;
  normalize: boolean;
}

/** Reads pooling and normalisation from the model's `options` (defaults: mean, normalised). */
export function embeddingOptions(options: Readonly<Record<string, unknown>>): EmbeddingOptions {
  const pooling = options.pooling ?? "mean";
  if (pooling !== "mean" && pooling !== "cls") {
    throw new ModelportError(
      "MP_ERR_MODEL_LOAD_FAILED",
      `options.pooling must be "mean" or "cls", got ${JSON.stringify(pooling)}`,
    );
  }
  const normalize = options.normalize ?? true;
  if (typeof normalize !== "boolean") {
    throw new ModelportError("MP_ERR_MODEL_LOAD_FAILED", "options.normalize must be true or false");
  }
  return { pooling, normalize };
}

/**
 * Pools `hidden` ([rows, seq, dim], row-major) into [rows, dim] over each row's attention mask.
 * @returns the vectors and each row's token count.
 */
export function pool(
  hidden: Float32Array,
  mask: ArrayLike<bigint | number>,
  rows: number,
  seq: number,
  dim: number,
  opts: EmbeddingOptions,
): { vectors: Float32Array; tokens: Int32Array } {
  const vectors = new Float32Array(rows * dim);
  const tokens = new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    const out = vectors.subarray(r * dim, (r + 1) * dim);
    let count = 0;
    for (let t = 0; t < seq; t++) if (Number(mask[r * seq + t]) !== 0) count++;
    tokens[r] = count;
    if (opts.pooling === "cls") {
      out.set(hidden.subarray(r * seq * dim, r * seq * dim + dim));
    } else {
      for (let t = 0; t < seq; t++) {
        if (Number(mask[r * seq + t]) === 0) continue;
        const base = (r * seq + t) * dim;
        for (let i = 0; i < dim; i++) out[i]! += hidden[base + i]!;
      }
      if (count > 0) for (let i = 0; i < dim; i++) out[i]! /= count;
    }
    if (opts.normalize) {
      let sq = 0;
      for (let i = 0; i < dim; i++) sq += out[i]! * out[i]!;
      const norm = Math.sqrt(sq);
      if (norm > 0) for (let i = 0; i < dim; i++) out[i]! /= norm;
    }
  }
  return { vectors, tokens };
}

export class TransformersBackend implements Backend {
  readonly name = "transformers" as const;

  async load(options: LoadOptions): Promise<LoadedModel> {
    const opts = embeddingOptions(options.options);
    const missing = REQUIRED_FILES.filter((f) => !existsSync(join(options.path, f)));
    if (missing.length) {
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `${options.path} is not a transformers model folder: missing ${missing.join(", ")}`,
      );
    }
    let tf: Transformers;
    try {
      ortTelemetryOffByDefault();
      tf = await import("@huggingface/transformers");
    } catch (err) {
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `cannot load @huggingface/transformers: ${(err as Error).message}`,
      );
    }
    // Local files only: a model that is not on disk must fail, never start a download.
    tf.env.allowRemoteModels = false;
    tf.env.allowLocalModels = true;
    tf.env.localModelPath = `${dirname(options.path)}/`;
    const name = basename(options.path);
    try {
      const tokenizer = await tf.AutoTokenizer.from_pretrained(name);
      const model = await tf.AutoModel.from_pretrained(name, {
        dtype: "fp32",
        device: "cpu",
        // Explicit threads: the library's default would take every core, and this worker shares them.
        session_options: { intraOpNumThreads: options.threads, interOpNumThreads: 1 },
      });
      // The size of the vocabulary and of the position table bound what token ids may be sent.
      const config = model.config as { vocab_size?: number; max_position_embeddings?: number };
      const limits = {
        vocab: config.vocab_size ?? Number.POSITIVE_INFINITY,
        length: config.max_position_embeddings ?? tokenizer.model_max_length ?? Number.POSITIVE_INFINITY,
      };
      return new LoadedEmbeddingModel(tf, tokenizer, model, opts, limits);
    } catch (err) {
      if (err instanceof ModelportError) throw err;
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `transformers.js could not load ${options.path}: ${(err as Error).message}`,
      );
    }
  }
}

type Tokenizer = Awaited<ReturnType<Transformers["AutoTokenizer"]["from_pretrained"]>>;
type Model = Awaited<ReturnType<Transformers["AutoModel"]["from_pretrained"]>>;

class LoadedEmbeddingModel implements LoadedModel {
  readonly signature = EMBEDDING_SIGNATURE;
  private closed = false;

  constructor(
    private readonly tf: Transformers,
    private readonly tokenizer: Tokenizer,
    private readonly model: Model,
    private readonly opts: EmbeddingOptions,
    private readonly limits: { vocab: number; length: number },
  ) {}

  async predict(inputs: TensorMap): Promise<TensorMap> {
    const rows = inputs.text ?? inputs.ids;
    if (!rows || !Array.isArray(rows.data)) {
      throw new ModelportError(
        "MP_ERR_INPUT_MISSING",
        "input 'text' (BYTES, one string per row) or 'ids' (BYTES, token ids joined by commas) is required",
      );
    }
    const n = rows.data.length;
    const enc = inputs.text
      ? this.tokenizer(rows.data as string[], { padding: true, truncation: true })
      : this.encodeIds(rows.data as string[]);
    let vectors: Float32Array;
    let tokens: Int32Array;
    let dim: number;
    try {
      const out = (await this.model(enc)) as Record<string, { dims: number[]; data: Float32Array }>;
      const hidden = out.last_hidden_state;
      if (!hidden) throw new Error(`the model has no last_hidden_state output (has ${Object.keys(out)})`);
      const [rows, seq, d] = hidden.dims as [number, number, number];
      dim = d;
      const mask = (enc.attention_mask as { data: ArrayLike<bigint | number> }).data;
      ({ vectors, tokens } = pool(hidden.data, mask, rows, seq, dim, this.opts));
    } catch (err) {
      throw new ModelportError("MP_ERR_INFERENCE_FAILED", `embedding failed: ${(err as Error).message}`);
    }
    return {
      embedding: { datatype: "FP32", shape: [n, dim], data: vectors },
      tokens: { datatype: "INT32", shape: [n], data: tokens },
    };
  }

  /**
   * The model inputs the tokenizer would make, from rows of token ids: padded to the longest row
   * with the tokenizer's pad id, with the attention mask and (where the tokenizer makes them)
   * zero token types.
   * @throws ModelportError MP_ERR_REQUEST_INVALID naming the row of an empty row, an id outside
   * the vocabulary or a row longer than the model's positions.
   */
  private encodeIds(rows: readonly string[]): Record<string, unknown> {
    const parsed = rows.map((row, r) => {
      const ids = row === "" ? [] : row.split(",").map(Number);
      const bad = (why: string) =>
        new ModelportError("MP_ERR_REQUEST_INVALID", `input[${r}]: ${why}`, { param: "input" });
      if (ids.length === 0) throw bad("an empty list of token ids");
      if (ids.length > this.limits.length)
        throw bad(`${ids.length} token ids; the model takes at most ${this.limits.length}`);
      const out = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= this.limits.vocab);
      if (out !== undefined)
        throw bad(`token id ${out} is outside the vocabulary (0..${this.limits.vocab - 1})`);
      return ids;
    });
    const seq = Math.max(...parsed.map((ids) => ids.length));
    const pad = BigInt(this.tokenizer.pad_token_id ?? 0);
    const ids = new BigInt64Array(rows.length * seq).fill(pad);
    const mask = new BigInt64Array(rows.length * seq);
    parsed.forEach((row, r) => {
      for (let t = 0; t < row.length; t++) {
        ids[r * seq + t] = BigInt(row[t]!);
        mask[r * seq + t] = 1n;
      }
    });
    const dims = [rows.length, seq];
    const enc: Record<string, unknown> = {
      input_ids: new this.tf.Tensor("int64", ids, dims),
      attention_mask: new this.tf.Tensor("int64", mask, dims),
    };
    this.makesTokenTypes ??= "token_type_ids" in this.tokenizer([""]);
    if (this.makesTokenTypes) {
      enc.token_type_ids = new this.tf.Tensor("int64", new BigInt64Array(rows.length * seq), dims);
    }
    return enc;
  }

  private makesTokenTypes?: boolean;

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.model.dispose();
  }
}
