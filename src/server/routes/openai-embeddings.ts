// POST /v1/embeddings, as OpenAI serves it: `input` (a string, strings, or token ids) and
// `model` in; `{object: "list", data: [{object: "embedding", index, embedding}], model, usage}`
// out, with vectors as float arrays or base64 (little-endian float32, what the openai SDK
// decodes). Any LanguageModel with the embeddings capability answers: a local transformers
// model (batched across concurrent requests) or an upstream one. Errors are OpenAI-shaped:
// {"error": {"message", "type", "param", "code"}} with an MP_ERR_* code (plugins/errors.ts),
// `param` naming the field at fault.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { ModelportError } from "../../errors.js";
import type { EmbedInput } from "../../llm/language-model.js";
import { acquire, requestCancel } from "../context.js";
import { embeddingsRequestSchema, parseBody } from "../openai-schemas.js";
import { errorHandler } from "../plugins/errors.js";

function invalid(param: string, message: string): ModelportError {
  return new ModelportError("MP_ERR_REQUEST_INVALID", message, { param });
}

interface ParsedRequest {
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
export function parseEmbeddingsRequest(body: unknown, maxInputs: number): ParsedRequest {
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

export const openAiEmbeddingsRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.setErrorHandler(errorHandler("openai", ctx.config.limits.maxBodyBytes));
  // Most inputs in one request: limits.maxBatchRows.
  const maxInputs = ctx.config.limits.maxBatchRows;
  app.post(
    "/v1/embeddings",
    { config: { capture: "openai", language: true } },
    async (req: FastifyRequest, reply: FastifyReply) => {
      const parsed = parseEmbeddingsRequest(req.body, maxInputs);
      const model = await acquire(ctx, req, reply, parsed.model, "embeddings");
      // The client going away cancels queued work (and an upstream call in flight).
      const usage = req.usage;
      const result = await model.embed!(parsed.inputs, {
        cancel: requestCancel(req),
        trace: req.trace,
        ...(parsed.dimensions !== undefined ? { dimensions: parsed.dimensions } : {}),
        ...(usage
          ? {
              onCompute: (ms: number) => {
                usage.computeMs += ms;
              },
            }
          : {}),
      });
      if (usage) {
        usage.rows += parsed.inputs.length;
        usage.promptTokens += result.promptTokens;
      }
      const d = parsed.dimensions;
      const vectors = d === undefined ? result.vectors : result.vectors.map((v) => shorten(v, d));
      return {
        object: "list",
        data: vectors.map((v, index) => ({
          object: "embedding",
          index,
          embedding: parsed.base64 ? toBase64(v) : Array.from(v),
        })),
        model: parsed.model,
        usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
      };
    },
  );
};
