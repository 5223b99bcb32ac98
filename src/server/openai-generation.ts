// What the OpenAI-compatible language routes share on the request path (chat and completions in
// routes/openai.ts, the Responses API in routes/openai-responses.ts): picking the served model,
// the SSE headers, the metrics and usage each generation feeds, and how a started stream ends on
// failure. The generation itself (n choices, usage, the answer's JSON) is openai-answer.ts, which
// jobs share; the size limits are prompt-limits.ts.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ServedModel } from "../catalogue/served-model.js";
import { ModelportError } from "../errors.js";
import type { TokenUsage } from "../llm/language-model.js";
import type { Metrics } from "../metrics/metrics.js";
import { type AppContext, acquire } from "./context.js";
import { countTokens } from "./openai-answer.js";

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
  // nginx and similar proxies would otherwise hold chunks back.
  "x-accel-buffering": "no",
};

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

/** What a generation reports as it goes: its first text, then its usage once done. */
export interface GenerationHooks {
  first(): void;
  done(usage: TokenUsage): void;
  /** Hears a generation's share of the machine time (GenerateOptions.onCompute). */
  readonly compute: (ms: number) => void;
}

/** Per-request figures for the LLM metrics, and the request's usage per key. */
export class GenerationTimer implements GenerationHooks {
  private firstAt: number | undefined;
  /** The generations' machine time, as local models report it (undefined: none reported). */
  private computeMs: number | undefined;
  /** Hears a generation's share of the machine time (GenerateOptions.onCompute). */
  readonly compute = (ms: number): void => {
    this.computeMs = (this.computeMs ?? 0) + ms;
  };
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
    const used = this.reply.request.usage;
    if (used) {
      used.promptTokens += usage.promptTokens;
      used.completionTokens += usage.completionTokens;
      // A local model's machine time; an upstream's (which reports none) is the request's wall time.
      used.computeMs += this.computeMs ?? this.reply.elapsedTime;
    }
    countTokens(this.metrics, this.model, usage);
    if (this.firstAt !== undefined)
      this.metrics.llmGenerationSeconds.inc({ model: this.model }, (performance.now() - this.firstAt) / 1000);
  }
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
