// What the OpenAI-compatible language routes share (chat and completions in routes/openai.ts,
// the Responses API in routes/openai-responses.ts): picking the served model, its size limits,
// the one generation path (n choices, each a model.generate call with the request's cancel
// handle and trace), the usage they add up to, and the metrics each generation feeds.
import type { FastifyReply, FastifyRequest } from "fastify";
import { CancelHandle } from "../cancel.js";
import type { ServedModel } from "../catalogue/served-model.js";
import { llmSchema } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import type { GenerateRequest, GenerateResult, TokenUsage } from "../llm/language-model.js";
import type { Metrics } from "../metrics/metrics.js";
import type { TraceParent } from "../telemetry/propagation.js";
import { type AppContext, acquire } from "./context.js";
import type { OpenAiRequest, PromptLimits } from "./openai-request.js";

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
  // nginx and similar proxies would otherwise hold chunks back.
  "x-accel-buffering": "no",
};

/** OpenAI's usage object; prompt_tokens_details.cached_tokens where the model has a prefix cache. */
export function usageJson(u: TokenUsage): Record<string, unknown> {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    ...(u.cachedTokens !== undefined ? { prompt_tokens_details: { cached_tokens: u.cachedTokens } } : {}),
  };
}

/** The served language model for a request: ready, and doing what was asked (and streaming, when asked). */
export async function pickModel(
  ctx: AppContext,
  req: FastifyRequest,
  reply: FastifyReply,
  name: string,
  kind: "chat" | "completion",
  stream: boolean,
): Promise<ServedModel> {
  const model = await acquire(ctx, req, reply, name, kind);
  if (stream && !model.capabilities.stream) {
    throw new ModelportError(
      "MP_ERR_LLM_CAPABILITY_UNSUPPORTED",
      `model '${name}' does not stream; send stream: false`,
      {
        param: "stream",
      },
    );
  }
  return model;
}

const DEFAULT_LLM = llmSchema.parse({});

/**
 * The size limits for a request to `name`: its llm.* settings, and a prompt byte bound of
 * contextSize × llm.maxPromptBytesPerToken for models with a context of their own (llama-cpp:
 * the context it loaded with, or the configured one on the API tier), capped by
 * llm.maxPromptBytes. An upstream model's context is the upstream's: only llm.maxPromptBytes.
 */
export function promptLimits(ctx: Pick<AppContext, "config" | "catalogue">, name: string): PromptLimits {
  const config = ctx.config.languageModels?.find((c) => c.name === name);
  const llm = config?.llm ?? DEFAULT_LLM;
  let fromContext: number | undefined;
  if (config && config.backend !== "upstream") {
    const loaded = ctx.catalogue.has(name) ? ctx.catalogue.get(name).status().contextSize : undefined;
    fromContext = (loaded ?? llm.contextSize) * llm.maxPromptBytesPerToken;
  }
  const capped =
    llm.maxPromptBytes !== undefined && (fromContext === undefined || llm.maxPromptBytes < fromContext);
  const maxPromptBytes = capped ? llm.maxPromptBytes : fromContext;
  return {
    ...(maxPromptBytes !== undefined
      ? {
          maxPromptBytes,
          maxPromptBytesSource: capped
            ? "llm.maxPromptBytes"
            : "the context size × llm.maxPromptBytesPerToken",
        }
      : {}),
    maxMessages: llm.maxMessages,
    maxStops: llm.maxStops,
    maxChoices: llm.maxChoices,
    maxStopChars: llm.maxStopChars,
  };
}

/** What a generation reports as it goes: its first text, then its usage once done. */
export interface GenerationHooks {
  first(): void;
  done(usage: TokenUsage): void;
}

/** Per-request figures for the LLM metrics, and the request's usage per key. */
export class GenerationTimer implements GenerationHooks {
  private firstAt: number | undefined;
  constructor(
    private readonly metrics: Metrics,
    private readonly model: string,
    private readonly reply: FastifyReply,
  ) {}
  first(): void {
    if (this.firstAt !== undefined) return;
    this.firstAt = performance.now();
    this.metrics.llmTimeToFirstToken.observe({ model: this.model }, this.reply.elapsedTime / 1000);
  }
  done(usage: TokenUsage): void {
    const labels = { model: this.model };
    const used = this.reply.request.usage;
    if (used) {
      used.promptTokens += usage.promptTokens;
      used.completionTokens += usage.completionTokens;
      used.computeMs += this.reply.elapsedTime;
    }
    this.metrics.llmGeneratedTokens.inc(labels, usage.completionTokens);
    this.metrics.llmPromptTokens.inc(labels, usage.promptTokens);
    if (usage.cachedTokens !== undefined) {
      this.metrics.llmCachedPromptTokens.inc(labels, usage.cachedTokens);
      this.metrics.llmPrefixCacheRequests.inc({ ...labels, result: usage.cachedTokens > 0 ? "hit" : "miss" });
    }
    if (this.firstAt !== undefined)
      this.metrics.llmGenerationSeconds.inc(labels, (performance.now() - this.firstAt) / 1000);
  }
}

/**
 * The generations of one request: `n` choices per prompt, choice index = prompt × n + i, each
 * with its own seed (seed + i, so sampled choices differ and still repeat), run at once; the
 * first failure cancels the others. With echo, a choice's text starts with its prompt.
 */
export function generateChoices(
  model: ServedModel,
  parsed: OpenAiRequest,
  cancel: CancelHandle,
  onDelta: (index: number, text: string) => void,
  onDone: (index: number, result: GenerateResult) => void,
  trace: TraceParent | undefined,
): Promise<GenerateResult[]> {
  const runs: { request: GenerateRequest; echo?: string }[] = [];
  parsed.requests.forEach((request, p) => {
    for (let i = 0; i < parsed.n; i++) {
      const seeded = i > 0 && request.seed !== undefined ? { ...request, seed: request.seed + i } : request;
      runs.push({ request: seeded, ...(parsed.echo ? { echo: parsed.echo[p]! } : {}) });
    }
  });
  const one = (run: (typeof runs)[number], index: number, cancel: CancelHandle) => {
    if (run.echo) onDelta(index, run.echo);
    return model.generate!(run.request, {
      cancel,
      trace,
      onDelta: (text) => onDelta(index, text),
    }).then((r) => {
      const result = run.echo ? { ...r, text: run.echo + r.text } : r;
      onDone(index, result);
      return result;
    });
  };
  if (runs.length === 1) return one(runs[0]!, 0, cancel).then((r) => [r]);
  const group = new CancelHandle();
  const unlink = cancel.onCancel(() => group.cancel());
  return Promise.all(
    runs.map((run, index) =>
      one(run, index, group).catch((err: unknown) => {
        group.cancel();
        throw err;
      }),
    ),
  ).finally(unlink);
}

/** The choices' usage: each prompt counted once (its n choices share it), the completions summed. */
export function totalUsage(results: readonly GenerateResult[], n: number): TokenUsage {
  let promptTokens = 0;
  let cachedTokens: number | undefined;
  for (let i = 0; i < results.length; i += n) {
    const u = results[i]!.usage;
    promptTokens += u.promptTokens;
    if (u.cachedTokens !== undefined) cachedTokens = (cachedTokens ?? 0) + u.cachedTokens;
  }
  return {
    promptTokens,
    completionTokens: results.reduce((sum, r) => sum + r.usage.completionTokens, 0),
    ...(cachedTokens !== undefined ? { cachedTokens } : {}),
  };
}

/**
 * What a stream that already started ends with when its generation failed: why the key was
 * revoked (its generation was canceled for that), else the error, as a ModelportError.
 */
export function streamFailure(err: unknown, revoked: ModelportError | undefined): ModelportError {
  return (
    revoked ??
    (err instanceof ModelportError
      ? err
      : new ModelportError(
          "MP_ERR_SERVER_INTERNAL",
          "internal error; the server log has details under this request id",
        ))
  );
}
