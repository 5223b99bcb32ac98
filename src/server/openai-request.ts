// Turns OpenAI chat and completion request bodies into GenerateRequests. Each body's shape is
// its zod schema's (openai-schemas.ts); here come the checks that depend on the model's limits
// and between fields. Every problem is a 400 MP_ERR_REQUEST_INVALID naming the field (`param`),
// as OpenAI does; fields modelport does not implement are refused rather than silently ignored
// when ignoring them would change the answer (suffix, best_of). Whether a JSON Schema (tools,
// response format) can be enforced is the backend's to say.
//
// Sizes are checked here, in time linear in the body and before any chat template or tokenizer
// runs (both run on the event loop): the number of messages and stop sequences, each stop's
// length, and the prompt's UTF-8 bytes against the model's byte bound (PromptLimits, from
// llm.* in the config). A prompt over the bound is 400 MP_ERR_LLM_CONTEXT_OVERFLOW at once, so
// templating and tokenizing only ever see prompts whose size the context bounds.
import { ModelportError } from "../errors.js";
import type {
  ChatMessage,
  GenerateRequest,
  JsonSchema,
  ResponseFormat,
  ToolChoice,
  ToolSpec,
} from "../llm/language-model.js";
import {
  type ChatBody,
  type CompletionBody,
  chatRequestSchema,
  completionRequestSchema,
  parseBody,
} from "./openai-schemas.js";

/** The size limits a request is checked against, for the model it names. */
export interface PromptLimits {
  /** Most UTF-8 bytes of prompt text (all message contents, or the prompt); undefined: no bound here. */
  readonly maxPromptBytes?: number;
  /** Where maxPromptBytes comes from, in config terms, for the error message. */
  readonly maxPromptBytesSource?: string;
  readonly maxMessages: number;
  readonly maxStops: number;
  readonly maxStopChars: number;
  /** Most choices (`n`). */
  readonly maxChoices: number;
}

/**
 * The limits for a model name (defaults for a name no model has: the route answers 404 after).
 * Throws that 404 itself for a model the caller may not use, before any check its limits make.
 */
export type PromptLimitsFor = (model: string) => PromptLimits;

export interface OpenAiRequest {
  model: string;
  /** One generation per prompt (chat: one); each gives `n` choices, indexed prompt × n + i. */
  requests: readonly GenerateRequest[];
  /** Completions: each choice's text starts with its prompt. */
  echo?: string[];
  stream: boolean;
  includeUsage: boolean;
  /** Choices to generate (n), each an independent generation. */
  n: number;
}

function invalid(param: string, message: string): ModelportError {
  return new ModelportError("MP_ERR_REQUEST_INVALID", `${param}: ${message}`, { param });
}

/** Text of a message's content: a string, or text parts joined. */
function contentText(content: ChatBody["messages"][number]["content"]): string {
  if (typeof content === "string") return content;
  return (content ?? []).map((part) => part.text).join("");
}

/** @throws ModelportError MP_ERR_LLM_CONTEXT_OVERFLOW when `bytes` is over the model's bound. */
function checkPromptBytes(bytes: number, limits: PromptLimits, model: string, param: string): void {
  const max = limits.maxPromptBytes;
  if (max === undefined || bytes <= max) return;
  throw new ModelportError(
    "MP_ERR_LLM_CONTEXT_OVERFLOW",
    `the prompt is ${bytes} bytes; model '${model}' takes at most ${max} bytes (${limits.maxPromptBytesSource ?? "llm.maxPromptBytes"}), checked before tokenizing; shorten it`,
    { param, promptBytes: bytes, maxPromptBytes: max },
  );
}

/** What both routes take, checked against the model's limits. */
function common(
  body: ChatBody | CompletionBody,
  limits: PromptLimits,
): {
  base: Omit<OpenAiRequest, "requests" | "echo">;
  sampling: Omit<GenerateRequest, "messages" | "prompt">;
} {
  const n = body.n ?? 1;
  if (n > limits.maxChoices) throw invalid("n", `is ${n}; at most ${limits.maxChoices} (llm.maxChoices)`);
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? undefined;
  let stop = typeof body.stop === "string" ? [body.stop] : (body.stop ?? undefined);
  if (stop && stop.length > limits.maxStops)
    throw invalid("stop", `must be a string or an array of up to ${limits.maxStops} strings (llm.maxStops)`);
  const long = stop?.findIndex((s) => s.length > limits.maxStopChars) ?? -1;
  if (long >= 0)
    throw invalid(
      "stop",
      `stop[${long}] is ${stop![long]!.length} characters; at most ${limits.maxStopChars} (llm.maxStopChars)`,
    );
  stop = stop?.filter((s) => s !== "");
  const bias = body.logit_bias ? Object.entries(body.logit_bias) : [];
  return {
    base: {
      model: body.model,
      stream: body.stream ?? false,
      includeUsage: body.stream_options?.include_usage === true,
      n,
    },
    sampling: {
      ...(maxTokens != null ? { maxTokens } : {}),
      ...(body.temperature != null ? { temperature: body.temperature } : {}),
      ...(body.top_p != null ? { topP: body.top_p } : {}),
      ...(body.seed != null ? { seed: body.seed } : {}),
      ...(bias.length ? { logitBias: Object.fromEntries(bias.map(([k, v]) => [Number(k), v])) } : {}),
      ...(body.frequency_penalty ? { frequencyPenalty: body.frequency_penalty } : {}),
      ...(body.presence_penalty ? { presencePenalty: body.presence_penalty } : {}),
      ...(stop?.length ? { stop } : {}),
    },
  };
}

/**
 * POST /v1/chat/completions.
 * @throws ModelportError MP_ERR_REQUEST_INVALID with details.param; MP_ERR_LLM_CONTEXT_OVERFLOW
 *   when the messages' text is over the model's byte bound.
 */
export function parseChatRequest(raw: unknown, limitsFor: PromptLimitsFor): OpenAiRequest {
  const body = parseBody(chatRequestSchema, raw);
  const limits = limitsFor(body.model);
  const { base, sampling } = common(body, limits);
  if (body.messages.length > limits.maxMessages)
    throw invalid(
      "messages",
      `holds ${body.messages.length} messages; at most ${limits.maxMessages} (llm.maxMessages)`,
    );
  let bytes = 0;
  const messages: ChatMessage[] = body.messages.map((m, i) => {
    const content = contentText(m.content);
    bytes += Buffer.byteLength(content, "utf8");
    const toolCalls =
      m.role === "assistant"
        ? (m.tool_calls ?? []).map((c) => ({
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments,
          }))
        : [];
    for (const c of toolCalls) bytes += Buffer.byteLength(c.arguments, "utf8") + c.name.length;
    if (m.role === "tool" && m.tool_call_id === undefined)
      throw invalid(
        `messages[${i}].tool_call_id`,
        "is required on a tool message: the id of the call it answers",
      );
    return {
      role: m.role,
      content,
      ...(toolCalls.length ? { toolCalls } : {}),
      ...(m.role === "tool" ? { toolCallId: m.tool_call_id! } : {}),
    };
  });
  const tools = toolSpecs(body.tools ?? []);
  // Tool definitions go into the prompt too.
  if (tools.length) bytes += Buffer.byteLength(JSON.stringify(body.tools), "utf8");
  checkPromptBytes(bytes, limits, base.model, "messages");
  const toolChoice = toolChoiceOf(body.tool_choice ?? undefined, tools);
  const responseFormat = responseFormatOf(body.response_format ?? undefined);
  const logprobs = body.logprobs ?? false;
  if (body.top_logprobs != null && !logprobs) throw invalid("top_logprobs", "needs logprobs: true");
  return {
    ...base,
    requests: [
      {
        ...sampling,
        ...(logprobs ? { logprobs: { top: body.top_logprobs ?? 0 } } : {}),
        messages,
        ...(tools.length ? { tools } : {}),
        ...(toolChoice ? { toolChoice } : {}),
        ...(body.parallel_tool_calls != null ? { parallelToolCalls: body.parallel_tool_calls } : {}),
        ...(responseFormat ? { responseFormat } : {}),
      },
    ],
  };
}

/** The offered functions; a name offered twice is refused. */
function toolSpecs(tools: NonNullable<ChatBody["tools"]>): ToolSpec[] {
  const names = new Set<string>();
  return tools.map((t, i) => {
    const f = t.function;
    if (names.has(f.name)) throw invalid(`tools[${i}].function.name`, `'${f.name}' is offered twice`);
    names.add(f.name);
    return {
      name: f.name,
      ...(f.description !== undefined ? { description: f.description } : {}),
      parameters: (f.parameters ?? { type: "object", properties: {} }) as JsonSchema,
    };
  });
}

function toolChoiceOf(raw: ChatBody["tool_choice"], tools: readonly ToolSpec[]): ToolChoice | undefined {
  if (raw == null) return undefined;
  if (typeof raw === "string") {
    if (raw === "required" && tools.length === 0) throw invalid("tool_choice", "'required' needs tools");
    return raw;
  }
  const name = raw.function.name;
  if (!tools.some((t) => t.name === name)) throw invalid("tool_choice", `no tool named '${name}' in tools`);
  return { name };
}

function responseFormatOf(raw: ChatBody["response_format"]): ResponseFormat | undefined {
  if (raw == null || raw.type === "text") return undefined;
  if (raw.type === "json_object") return { type: "json_object" };
  const js = raw.json_schema;
  return {
    type: "json_schema",
    name: js.name,
    schema: (js.schema ?? {}) as JsonSchema,
    ...(js.strict != null ? { strict: js.strict } : {}),
  };
}

/**
 * POST /v1/completions.
 * @throws ModelportError MP_ERR_REQUEST_INVALID with details.param; MP_ERR_LLM_CONTEXT_OVERFLOW
 *   when the prompt is over the model's byte bound.
 */
export function parseCompletionRequest(raw: unknown, limitsFor: PromptLimitsFor): OpenAiRequest {
  const body = parseBody(completionRequestSchema, raw);
  const limits = limitsFor(body.model);
  const { base, sampling } = common(body, limits);
  if (body.suffix) throw invalid("suffix", "suffix is not supported");
  if (body.best_of != null && body.best_of !== 1 && body.best_of !== base.n)
    throw invalid("best_of", "best_of other than n is not supported");
  const echo = body.echo ?? false;
  // One prompt per string or token array.
  const p = body.prompt;
  const prompts: (string | number[])[] =
    typeof p === "string"
      ? [p]
      : p.every((x) => typeof x === "number")
        ? [p as number[]]
        : (p as (string | number[])[]);
  let bytes = 0;
  for (const q of prompts) bytes += typeof q === "string" ? Buffer.byteLength(q, "utf8") : q.length;
  checkPromptBytes(bytes, limits, base.model, "prompt");
  if (echo && prompts.some((q) => typeof q !== "string"))
    throw invalid("echo", "works with text prompts only, not token arrays");
  if (prompts.length * base.n > limits.maxChoices)
    throw invalid(
      "prompt",
      `${prompts.length} prompts × n ${base.n} choices; at most ${limits.maxChoices} (llm.maxChoices)`,
    );
  return {
    ...base,
    requests: prompts.map((q) => ({
      ...sampling,
      ...(body.logprobs != null ? { logprobs: { top: body.logprobs } } : {}),
      ...(typeof q === "string" ? { prompt: q } : { promptTokens: q }),
    })),
    ...(echo ? { echo: prompts as string[] } : {}),
  };
}
