// The non-streamed answers of POST /v1/chat/completions and /v1/completions, and the pieces the
// streamed ones share (usage, logprobs, tool calls in OpenAI's shapes; the generations of one
// request): one copy for the routes (routes/openai.ts) and for jobs that stand for them
// (openai-work.ts), so a job's result is exactly what the route answers.
import { CancelHandle } from "../cancel.js";
import type { ServedModel } from "../catalogue/served-model.js";
import type { GenerateRequest, GenerateResult, TokenUsage, ToolCall } from "../llm/language-model.js";
import type { Metrics } from "../metrics/metrics.js";
import type { TraceParent } from "../telemetry/propagation.js";
import type { OpenAiRequest } from "./openai-request.js";

export type GenerationKind = "chat" | "completion";

/** An answer's id: chatcmpl-… or cmpl-…, after the request (or job) that asked for it. */
export function answerId(kind: GenerationKind, of: string): string {
  return `${kind === "chat" ? "chatcmpl" : "cmpl"}-${of}`;
}

/** OpenAI's usage object; prompt_tokens_details.cached_tokens where the model has a prefix cache. */
export function usageJson(u: TokenUsage): Record<string, unknown> {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    ...(u.cachedTokens !== undefined ? { prompt_tokens_details: { cached_tokens: u.cachedTokens } } : {}),
  };
}

/** A chat choice's logprobs in OpenAI's shape: {content: [{token, logprob, bytes, top_logprobs}]}. */
export function chatLogprobs(result: GenerateResult) {
  if (!result.logprobs) return null;
  return {
    content: result.logprobs.map((l) => ({
      token: l.token,
      logprob: l.logprob,
      bytes: l.bytes,
      top_logprobs: l.top.map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes })),
    })),
    refusal: null,
  };
}

/** The length of the prompt echoed in front of choice `index` (0 without echo). */
export function echoLength(parsed: OpenAiRequest, index: number): number {
  return parsed.echo?.[Math.floor(index / parsed.n)]?.length ?? 0;
}

/** A completion choice's logprobs in OpenAI's legacy shape; text offsets after an echoed prompt. */
export function completionLogprobs(result: GenerateResult, offset: number) {
  if (!result.logprobs) return null;
  const text_offset: number[] = [];
  let at = offset;
  for (const l of result.logprobs) {
    text_offset.push(at);
    at += l.token.length;
  }
  return {
    tokens: result.logprobs.map((l) => l.token),
    token_logprobs: result.logprobs.map((l) => l.logprob),
    top_logprobs: result.logprobs.map((l) => Object.fromEntries(l.top.map((t) => [t.token, t.logprob]))),
    text_offset,
  };
}

/** Tool calls in OpenAI's message shape. */
export function toolCallsJson(calls: readonly ToolCall[]) {
  return calls.map((c) => ({
    id: c.id,
    type: "function",
    function: { name: c.name, arguments: c.arguments },
  }));
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
  background = false,
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
      ...(background ? { background } : {}),
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

export interface AnswerOptions {
  /** The answer's id (chatcmpl-…, cmpl-…) and Unix seconds it was created. */
  readonly id: string;
  readonly created: number;
  readonly cancel: CancelHandle;
  readonly trace: TraceParent | undefined;
  /** A job: its generations wait behind interactive requests. */
  readonly background?: boolean;
  /** Hears the first text of any choice (time to first token). */
  readonly onFirst?: () => void;
}

/**
 * Generates every choice of `parsed` and builds the chat.completion or text_completion JSON the
 * route answers, with the usage it counts.
 * @throws ModelportError as generate() does.
 */
export async function generateAnswer(
  model: ServedModel,
  kind: GenerationKind,
  parsed: OpenAiRequest,
  options: AnswerOptions,
): Promise<{ response: Record<string, unknown>; usage: TokenUsage }> {
  const onFirst = options.onFirst ?? (() => {});
  const results = await generateChoices(
    model,
    parsed,
    options.cancel,
    () => onFirst(),
    () => {},
    options.trace,
    options.background === true,
  );
  const usage = totalUsage(results, parsed.n);
  const { id, created } = options;
  if (kind === "chat") {
    return {
      usage,
      response: {
        id,
        object: "chat.completion",
        created,
        model: model.name,
        choices: results.map((result, index) => ({
          index,
          message: {
            role: "assistant",
            content: result.toolCalls ? null : result.text,
            refusal: null,
            ...(result.toolCalls ? { tool_calls: toolCallsJson(result.toolCalls) } : {}),
          },
          logprobs: chatLogprobs(result),
          finish_reason: result.finishReason,
        })),
        usage: usageJson(usage),
      },
    };
  }
  return {
    usage,
    response: {
      id,
      object: "text_completion",
      created,
      model: model.name,
      choices: results.map((result, index) => ({
        index,
        text: result.text,
        logprobs: completionLogprobs(result, echoLength(parsed, index)),
        finish_reason: result.finishReason,
      })),
      usage: usageJson(usage),
    },
  };
}

/** A generation's tokens in the LLM metrics (prompt, generated, cached and prefix-cache hits). */
export function countTokens(metrics: Metrics, model: string, usage: TokenUsage): void {
  const labels = { model };
  metrics.llmGeneratedTokens.inc(labels, usage.completionTokens);
  metrics.llmPromptTokens.inc(labels, usage.promptTokens);
  if (usage.cachedTokens !== undefined) {
    metrics.llmCachedPromptTokens.inc(labels, usage.cachedTokens);
    metrics.llmPrefixCacheRequests.inc({ ...labels, result: usage.cachedTokens > 0 ? "hit" : "miss" });
  }
}
