// The answer of POST /v1/embeddings, as OpenAI serves it: the body parsed and checked against
// the limits, then `{object: "list", data: [{object: "embedding", index, embedding}], model,
// usage}` with vectors as float arrays or base64 (little-endian float32, what the openai SDK
// decodes). One copy for the route (routes/openai-embeddings.ts) and for jobs that stand for it
// (openai-work.ts).
import type { CancelHandle } from "../cancel.js";
import type { ServedModel } from "../catalogue/served-model.js";
import { ModelportError } from "../errors.js";
import type { EmbedInput } from "../llm/language-model.js";
import type { TraceParent } from "../telemetry/propagation.js";
import { embeddingsRequestSchema, parseBody } from "./openai-schemas.js";

function invalid(param: string, message: string): ModelportError {
  return new ModelportError("MP_ERR_REQUEST_INVALID", message, { param });
}

export interface EmbeddingsRequest {
  model: string;
  inputs: EmbedInput[];
  base64: boolean;
  /** Vectors truncated to this many dimensions and renormalised. */
  dimensions?: number;
}

/**
 * Validates the body: its shape by its schema (openai-schemas.ts), then what depends on limits.
 * @throws ModelportError MP_ERR_REQUEST_INVALID / MP_ERR_INPUT_* with `param`.
 */
export function parseEmbeddingsRequest(body: unknown, maxInputs: number): EmbeddingsRequest {
  const b = parseBody(embeddingsRequestSchema, body);
  // A string, strings, one token-id array, or several: one input each.
  const input = b.input;
  const inputs: EmbedInput[] =
    typeof input === "string"
      ? [input]
      : input.length > 0 && input.every((x) => typeof x === "number")
        ? [input as number[]]
        : (input as EmbedInput[]);
  if (inputs.length === 0) {
    throw new ModelportError(
      "MP_ERR_INPUT_EMPTY_BATCH",
      "'input' is an empty array; send at least one string",
      {
        param: "input",
      },
    );
  }
  if (inputs.length > maxInputs) {
    throw new ModelportError(
      "MP_ERR_INPUT_TOO_MANY_ROWS",
      `'input' holds ${inputs.length} inputs; at most ${maxInputs} per request (limits.maxBatchRows)`,
      { param: "input" },
    );
  }
  const empty = inputs.indexOf("");
  if (empty >= 0)
    throw invalid("input", `input[${empty}] is an empty string; every input must hold some text`);
  return {
    model: b.model,
    inputs,
    base64: b.encoding_format === "base64",
    ...(b.dimensions != null ? { dimensions: b.dimensions } : {}),
  };
}

/**
 * The first `d` dimensions of `v`, scaled back to unit length (as OpenAI shortens its vectors:
 * meaningful for models trained for it, Matryoshka-style).
 * @throws ModelportError MP_ERR_REQUEST_INVALID when the model's vectors are shorter than `d`.
 */
export function shorten(v: Float32Array | readonly number[], d: number): Float32Array | readonly number[] {
  if (d > v.length)
    throw invalid("dimensions", `'dimensions' is ${d}; this model's vectors have ${v.length}`);
  if (d === v.length) return v;
  const out = Float32Array.from(v.slice(0, d));
  let norm = 0;
  for (const x of out) norm += x * x;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < d; i++) out[i]! /= norm;
  return out;
}

function toBase64(v: Float32Array | readonly number[]): string {
  const f = v instanceof Float32Array ? v : Float32Array.from(v);
  // Float32Array is little-endian on every platform Node runs on, as the OpenAI format wants.
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength).toString("base64");
}

export interface EmbedAnswerOptions {
  readonly cancel: CancelHandle;
  readonly trace: TraceParent | undefined;
  /** A job: its inputs wait behind interactive requests in the model's batcher. */
  readonly background?: boolean;
  readonly onCompute?: (ms: number) => void;
}

/**
 * Embeds the request's inputs and builds the answer's JSON.
 * @returns the answer and the prompt tokens it used. @throws ModelportError as embed() does.
 */
export async function embedAnswer(
  model: ServedModel,
  parsed: EmbeddingsRequest,
  options: EmbedAnswerOptions,
): Promise<{ response: Record<string, unknown>; promptTokens: number }> {
  const result = await model.embed!(parsed.inputs, {
    cancel: options.cancel,
    trace: options.trace,
    ...(parsed.dimensions !== undefined ? { dimensions: parsed.dimensions } : {}),
    ...(options.background ? { background: true } : {}),
    ...(options.onCompute ? { onCompute: options.onCompute } : {}),
  });
  const d = parsed.dimensions;
  const vectors = d === undefined ? result.vectors : result.vectors.map((v) => shorten(v, d));
  return {
    promptTokens: result.promptTokens,
    response: {
      object: "list",
      data: vectors.map((v, index) => ({
        object: "embedding",
        index,
        embedding: parsed.base64 ? toBase64(v) : Array.from(v),
      })),
      model: parsed.model,
      usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
    },
  };
}
