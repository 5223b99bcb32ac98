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

/** 400 MP_ERR_REQUEST_INVALID naming `param`. */
export function invalid(param: string, message: string): ModelportError {
  return new ModelportError("MP_ERR_REQUEST_INVALID", `${param}: ${message}`, { param });
}

/** Text of a message's content: a string, or text parts joined. */
function contentText(content: ChatBody["messages"][number]["content"]): string {
  if (typeof content === "string") return content;
  return (content ?? []).map((part) => part.text).join("");
}

/** @throws ModelportError MP_ERR_LLM_CONTEXT_OVERFLOW when `bytes` is over the model's bound. */
export function checkPromptBytes(bytes: number, limits: PromptLimits, model: string, param: string): void {
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
  checkMessageCount(body.messages.length, limits, "messages");
  const messages: ChatMessage[] = body.messages.map((m, i) => {
    const content = contentText(m.content);
    const toolCalls =
      m.role === "assistant"
        ? (m.tool_calls ?? []).map((c) => ({
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments,
          }))
        : [];
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
  const tools = toolSpecs(
    (body.tools ?? []).map((t) => t.function),
    (i) => `tools[${i}].function.name`,
  );
  checkPromptBytes(promptBytes(messages, body.tools), limits, base.model, "messages");
  const choice = body.tool_choice ?? undefined;
  const toolChoice = toolChoiceOf(
    typeof choice === "object" ? { name: choice.function.name } : choice,
    tools,
  );
  const rf = body.response_format ?? undefined;
  const responseFormat = responseFormatOf(
    rf?.type === "json_schema" ? { type: rf.type, ...rf.json_schema } : rf,
  );
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

/** @throws MP_ERR_REQUEST_INVALID naming `param` when there are more than llm.maxMessages. */
export function checkMessageCount(count: number, limits: PromptLimits, param: string): void {
  if (count > limits.maxMessages)
    throw invalid(param, `holds ${count} messages; at most ${limits.maxMessages} (llm.maxMessages)`);
}

/**
 * The UTF-8 bytes a chat prompt is bounded by: every message's text and each call's arguments
 * and name, and the tool definitions as sent (they go into the prompt too).
 */
export function promptBytes(messages: readonly ChatMessage[], tools: unknown): number {
  let bytes = 0;
  for (const m of messages) {
    bytes += Buffer.byteLength(m.content, "utf8");
    for (const c of m.toolCalls ?? []) bytes += Buffer.byteLength(c.arguments, "utf8") + c.name.length;
  }
  if (Array.isArray(tools) && tools.length) bytes += Buffer.byteLength(JSON.stringify(tools), "utf8");
  return bytes;
}

/** A function as both APIs describe it (chat nests it under `function`, Responses does not). */
export interface FunctionDefinition {
  readonly name: string;
  readonly description?: string | null | undefined;
  readonly parameters?: Record<string, unknown> | null | undefined;
}

/** The offered functions; a name offered twice is refused, naming `nameParam(i)`. */
export function toolSpecs(
  tools: readonly FunctionDefinition[],
  nameParam: (i: number) => string,
): ToolSpec[] {
  const names = new Set<string>();
  return tools.map((f, i) => {
    if (names.has(f.name)) throw invalid(nameParam(i), `'${f.name}' is offered twice`);
    names.add(f.name);
    return {
      name: f.name,
      ...(f.description != null ? { description: f.description } : {}),
      parameters: (f.parameters ?? { type: "object", properties: {} }) as JsonSchema,
    };
  });
}

/** A tool choice (a function by name, however the API nests it), checked against the tools offered. */
export function toolChoiceOf(
  raw: "auto" | "none" | "required" | { name: string } | undefined,
  tools: readonly ToolSpec[],
): ToolChoice | undefined {
  if (raw == null) return undefined;
  if (typeof raw === "string") {
    if (raw === "required" && tools.length === 0) throw invalid("tool_choice", "'required' needs tools");
    return raw;
  }
  const name = raw.name;
  if (!tools.some((t) => t.name === name)) throw invalid("tool_choice", `no tool named '${name}' in tools`);
  return { name };
}

/** A response format with its JSON Schema's fields flat (as Responses sends them; chat's are unnested first). */
export type FormatDefinition =
  | { type: "text" }
  | { type: "json_object" }
  | {
      type: "json_schema";
      name: string;
      schema?: Record<string, unknown> | undefined;
      strict?: boolean | null | undefined;
    };

/** The format to enforce; undefined for plain text. */
export function responseFormatOf(raw: FormatDefinition | undefined): ResponseFormat | undefined {
  if (raw == null || raw.type === "text") return undefined;
  if (raw.type === "json_object") return { type: "json_object" };
  return {
    type: "json_schema",
    name: raw.name,
    schema: (raw.schema ?? {}) as JsonSchema,
    ...(raw.strict != null ? { strict: raw.strict } : {}),
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
