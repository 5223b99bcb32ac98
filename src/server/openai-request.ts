// Validates OpenAI chat and completion request bodies and turns them into GenerateRequests.
// Every problem is a 400 MP_ERR_REQUEST_INVALID naming the field (`param`), as OpenAI does;
// fields modelport does not implement are refused rather than silently ignored when ignoring
// them would change the answer (suffix, best_of). Tools, tool choice and the
// response format are checked for shape here; whether a schema can be enforced is the
// backend's to say (llama-cpp generates under a grammar; an upstream enforces its own way).
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
  ToolCall,
  ToolChoice,
  ToolSpec,
} from "../llm/language-model.js";

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

/** The limits for a model name (defaults for a name no model has: the route answers 404 after). */
export type PromptLimitsFor = (model: string) => PromptLimits;

/** Model names are at most 128 characters (config); a longer one names nothing and is not echoed. */
const MAX_MODEL_NAME = 256;

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

const ROLES = new Set(["system", "user", "assistant", "developer", "tool"]);

function invalid(param: string, message: string): ModelportError {
  return new ModelportError("MP_ERR_REQUEST_INVALID", `${param}: ${message}`, { param });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function optionalNumber(
  body: Record<string, unknown>,
  key: string,
  min: number,
  max: number,
): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max)
    throw invalid(key, `must be a number from ${min} to ${max}, got ${JSON.stringify(v)}`);
  return v;
}

function optionalInt(body: Record<string, unknown>, key: string, min: number): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min)
    throw invalid(key, `must be an integer of at least ${min}, got ${JSON.stringify(v)}`);
  return v;
}

function refuse(body: Record<string, unknown>, key: string, ok: (v: unknown) => boolean, why: string): void {
  const v = body[key];
  if (v !== undefined && v !== null && !ok(v)) throw invalid(key, why);
}

/** Text of a message's content: a string, or an array of {type: "text", text} parts. */
function contentText(content: unknown, param: string): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (Array.isArray(content)) {
    return content
      .map((part, i) => {
        if (isObject(part) && part.type === "text" && typeof part.text === "string") return part.text;
        throw invalid(`${param}[${i}]`, "only text parts ({type: 'text', text}) are supported");
      })
      .join("");
  }
  throw invalid(param, "must be a string or an array of text parts");
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

function common(
  body: unknown,
  limitsFor: PromptLimitsFor,
): { body: Record<string, unknown>; base: Omit<OpenAiRequest, "requests" | "echo">; limits: PromptLimits } & {
  sampling: Omit<GenerateRequest, "messages" | "prompt">;
} {
  if (!isObject(body)) throw new ModelportError("MP_ERR_REQUEST_INVALID", "the body must be a JSON object");
  if (typeof body.model !== "string" || body.model === "")
    throw invalid("model", "is required: the name of a served model (GET /v1/models)");
  if (body.model.length > MAX_MODEL_NAME)
    throw invalid("model", `is ${body.model.length} characters; model names have at most 128`);
  const limits = limitsFor(body.model);
  const stream = body.stream ?? false;
  if (typeof stream !== "boolean") throw invalid("stream", "must be true or false");
  const so = body.stream_options;
  if (so !== undefined && so !== null && !isObject(so)) throw invalid("stream_options", "must be an object");
  const includeUsage = isObject(so) && so.include_usage === true;
  const n = optionalInt(body, "n", 1) ?? 1;
  if (n > limits.maxChoices) throw invalid("n", `is ${n}; at most ${limits.maxChoices} (llm.maxChoices)`);
  const maxTokens = optionalInt(body, "max_completion_tokens", 1) ?? optionalInt(body, "max_tokens", 1);
  const temperature = optionalNumber(body, "temperature", 0, 2);
  const topP = optionalNumber(body, "top_p", 0, 1);
  const seed = optionalInt(body, "seed", Number.MIN_SAFE_INTEGER);
  const logitBias = parseLogitBias(body.logit_bias);
  const frequencyPenalty = optionalNumber(body, "frequency_penalty", -2, 2);
  const presencePenalty = optionalNumber(body, "presence_penalty", -2, 2);
  let stop: string[] | undefined;
  if (typeof body.stop === "string") stop = [body.stop];
  else if (Array.isArray(body.stop)) {
    if (body.stop.length > limits.maxStops || !body.stop.every((s) => typeof s === "string"))
      throw invalid(
        "stop",
        `must be a string or an array of up to ${limits.maxStops} strings (llm.maxStops)`,
      );
    stop = body.stop as string[];
  } else if (body.stop !== undefined && body.stop !== null)
    throw invalid("stop", "must be a string or an array of strings");
  const long = stop?.findIndex((s) => s.length > limits.maxStopChars) ?? -1;
  if (long >= 0)
    throw invalid(
      "stop",
      `stop[${long}] is ${stop![long]!.length} characters; at most ${limits.maxStopChars} (llm.maxStopChars)`,
    );
  stop = stop?.filter((s) => s !== "");
  return {
    body,
    limits,
    base: { model: body.model, stream, includeUsage, n },
    sampling: {
      ...(maxTokens !== undefined ? { maxTokens } : {}),
      ...(temperature !== undefined ? { temperature } : {}),
      ...(topP !== undefined ? { topP } : {}),
      ...(seed !== undefined ? { seed } : {}),
      ...(logitBias ? { logitBias } : {}),
      ...(frequencyPenalty ? { frequencyPenalty } : {}),
      ...(presencePenalty ? { presencePenalty } : {}),
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
  const { body, base, sampling, limits } = common(raw, limitsFor);
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    throw invalid("messages", "must be a non-empty array of {role, content}");
  if (body.messages.length > limits.maxMessages)
    throw invalid(
      "messages",
      `holds ${body.messages.length} messages; at most ${limits.maxMessages} (llm.maxMessages)`,
    );
  let bytes = 0;
  const messages: ChatMessage[] = body.messages.map((m: unknown, i: number) => {
    if (!isObject(m) || typeof m.role !== "string" || !ROLES.has(m.role))
      throw invalid(`messages[${i}].role`, `must be one of ${[...ROLES].join(", ")}`);
    const content = contentText(m.content, `messages[${i}].content`);
    bytes += Buffer.byteLength(content, "utf8");
    const toolCalls =
      m.role === "assistant" ? messageToolCalls(m.tool_calls, `messages[${i}].tool_calls`) : undefined;
    for (const c of toolCalls ?? []) bytes += Buffer.byteLength(c.arguments, "utf8") + c.name.length;
    if (m.role === "tool" && typeof m.tool_call_id !== "string")
      throw invalid(
        `messages[${i}].tool_call_id`,
        "is required on a tool message: the id of the call it answers",
      );
    return {
      role: m.role as ChatMessage["role"],
      content,
      ...(toolCalls?.length ? { toolCalls } : {}),
      ...(m.role === "tool" ? { toolCallId: m.tool_call_id as string } : {}),
    };
  });
  const tools = parseTools(body.tools);
  // Tool definitions go into the prompt too.
  if (tools.length) bytes += Buffer.byteLength(JSON.stringify(body.tools), "utf8");
  checkPromptBytes(bytes, limits, base.model, "messages");
  const toolChoice = parseToolChoice(body.tool_choice, tools);
  const parallel = body.parallel_tool_calls;
  if (parallel !== undefined && parallel !== null && typeof parallel !== "boolean")
    throw invalid("parallel_tool_calls", "must be true or false");
  const responseFormat = parseResponseFormat(body.response_format);
  const logprobs = body.logprobs ?? false;
  if (typeof logprobs !== "boolean") throw invalid("logprobs", "must be true or false");
  const top = optionalInt(body, "top_logprobs", 0);
  if (top !== undefined && top > 20) throw invalid("top_logprobs", `must be 0 to 20, got ${top}`);
  if (top !== undefined && !logprobs) throw invalid("top_logprobs", "needs logprobs: true");
  return {
    ...base,
    requests: [
      {
        ...sampling,
        ...(logprobs ? { logprobs: { top: top ?? 0 } } : {}),
        messages,
        ...(tools.length ? { tools } : {}),
        ...(toolChoice ? { toolChoice } : {}),
        ...(typeof parallel === "boolean" ? { parallelToolCalls: parallel } : {}),
        ...(responseFormat && responseFormat.type !== "text" ? { responseFormat } : {}),
      },
    ],
  };
}

/** Most tokens one logit_bias may name. */
const MAX_BIASED_TOKENS = 1024;

/** `logit_bias`: {"<token id>": -100 … 100}. */
function parseLogitBias(raw: unknown): Record<number, number> | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObject(raw)) throw invalid("logit_bias", "must be an object of token id → bias (-100 to 100)");
  const entries = Object.entries(raw);
  if (entries.length > MAX_BIASED_TOKENS)
    throw invalid("logit_bias", `names ${entries.length} tokens; at most ${MAX_BIASED_TOKENS}`);
  if (entries.length === 0) return undefined;
  const out: Record<number, number> = {};
  for (const [key, v] of entries) {
    if (!/^\d{1,9}$/.test(key))
      throw invalid("logit_bias", `key ${JSON.stringify(key.slice(0, 20))} is not a token id`);
    if (typeof v !== "number" || !Number.isFinite(v) || v < -100 || v > 100)
      throw invalid("logit_bias", `the bias of token ${key} must be a number from -100 to 100`);
    out[Number(key)] = v;
  }
  return out;
}

/** Most tools one request may offer. */
const MAX_TOOLS = 128;
const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** `tools`: [{type: "function", function: {name, description?, parameters?}}]. */
function parseTools(raw: unknown): ToolSpec[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw invalid("tools", "must be an array of {type: 'function', function}");
  if (raw.length > MAX_TOOLS) throw invalid("tools", `holds ${raw.length} tools; at most ${MAX_TOOLS}`);
  const names = new Set<string>();
  return raw.map((t: unknown, i) => {
    const param = `tools[${i}]`;
    if (!isObject(t) || t.type !== "function" || !isObject(t.function))
      throw invalid(param, "must be {type: 'function', function: {name, description?, parameters?}}");
    const f = t.function;
    if (typeof f.name !== "string" || !FUNCTION_NAME.test(f.name))
      throw invalid(`${param}.function.name`, "must be 1 to 64 letters, digits, '_' or '-'");
    if (names.has(f.name)) throw invalid(`${param}.function.name`, `'${f.name}' is offered twice`);
    names.add(f.name);
    if (f.description !== undefined && typeof f.description !== "string")
      throw invalid(`${param}.function.description`, "must be a string");
    const parameters = f.parameters ?? { type: "object", properties: {} };
    if (!isObject(parameters)) throw invalid(`${param}.function.parameters`, "must be a JSON Schema object");
    return {
      name: f.name,
      ...(typeof f.description === "string" ? { description: f.description } : {}),
      parameters: parameters as JsonSchema,
    };
  });
}

function parseToolChoice(raw: unknown, tools: readonly ToolSpec[]): ToolChoice | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (raw === "auto" || raw === "none" || raw === "required") {
    if (raw === "required" && tools.length === 0) throw invalid("tool_choice", "'required' needs tools");
    return raw;
  }
  if (
    isObject(raw) &&
    raw.type === "function" &&
    isObject(raw.function) &&
    typeof raw.function.name === "string"
  ) {
    const name = raw.function.name;
    if (!tools.some((t) => t.name === name)) throw invalid("tool_choice", `no tool named '${name}' in tools`);
    return { name };
  }
  throw invalid("tool_choice", "must be 'auto', 'none', 'required' or {type: 'function', function: {name}}");
}

/** An assistant message's `tool_calls`: [{id, type: "function", function: {name, arguments}}]. */
function messageToolCalls(raw: unknown, param: string): ToolCall[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!Array.isArray(raw))
    throw invalid(param, "must be an array of {id, type: 'function', function: {name, arguments}}");
  if (raw.length > MAX_TOOLS) throw invalid(param, `holds ${raw.length} calls; at most ${MAX_TOOLS}`);
  return raw.map((c: unknown, i) => {
    const f = isObject(c) ? c.function : undefined;
    if (
      !isObject(c) ||
      typeof c.id !== "string" ||
      !isObject(f) ||
      typeof f.name !== "string" ||
      typeof f.arguments !== "string"
    )
      throw invalid(
        `${param}[${i}]`,
        "must be {id, type: 'function', function: {name, arguments: JSON text}}",
      );
    return { id: c.id, name: f.name, arguments: f.arguments };
  });
}

/** `response_format`: {type: "text" | "json_object"} or {type: "json_schema", json_schema: {name, schema, strict?}}. */
function parseResponseFormat(raw: unknown): ResponseFormat | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObject(raw)) throw invalid("response_format", "must be an object with a type");
  if (raw.type === "text" || raw.type === "json_object") return { type: raw.type };
  if (raw.type !== "json_schema")
    throw invalid("response_format.type", "must be 'text', 'json_object' or 'json_schema'");
  const js = raw.json_schema;
  if (!isObject(js) || typeof js.name !== "string" || js.name === "")
    throw invalid("response_format.json_schema", "must be {name, schema, strict?}");
  const schema = js.schema ?? {};
  if (!isObject(schema)) throw invalid("response_format.json_schema.schema", "must be a JSON Schema object");
  if (js.strict !== undefined && js.strict !== null && typeof js.strict !== "boolean")
    throw invalid("response_format.json_schema.strict", "must be true or false");
  return {
    type: "json_schema",
    name: js.name,
    schema: schema as JsonSchema,
    ...(typeof js.strict === "boolean" ? { strict: js.strict } : {}),
  };
}

/**
 * POST /v1/completions.
 * @throws ModelportError MP_ERR_REQUEST_INVALID with details.param; MP_ERR_LLM_CONTEXT_OVERFLOW
 *   when the prompt is over the model's byte bound.
 */
export function parseCompletionRequest(raw: unknown, limitsFor: PromptLimitsFor): OpenAiRequest {
  const { body, base, sampling, limits } = common(raw, limitsFor);
  refuse(body, "suffix", (v) => v === "", "suffix is not supported");
  refuse(body, "best_of", (v) => v === 1 || v === base.n, "best_of other than n is not supported");
  // Completions: logprobs is the number of alternatives per token (0–5), or null.
  const logprobs = optionalInt(body, "logprobs", 0);
  if (logprobs !== undefined && logprobs > 5) throw invalid("logprobs", `must be 0 to 5, got ${logprobs}`);
  const echo = body.echo ?? false;
  if (typeof echo !== "boolean") throw invalid("echo", "must be true or false");
  const prompts = completionPrompts(body.prompt, limits);
  let bytes = 0;
  for (const p of prompts) bytes += typeof p === "string" ? Buffer.byteLength(p, "utf8") : p.length;
  checkPromptBytes(bytes, limits, base.model, "prompt");
  if (echo && prompts.some((p) => typeof p !== "string"))
    throw invalid("echo", "works with text prompts only, not token arrays");
  if (prompts.length * base.n > limits.maxChoices)
    throw invalid(
      "prompt",
      `${prompts.length} prompts × n ${base.n} choices; at most ${limits.maxChoices} (llm.maxChoices)`,
    );
  return {
    ...base,
    requests: prompts.map((p) => ({
      ...sampling,
      ...(logprobs !== undefined ? { logprobs: { top: logprobs } } : {}),
      ...(typeof p === "string" ? { prompt: p } : { promptTokens: p }),
    })),
    ...(echo ? { echo: prompts as string[] } : {}),
  };
}

/** Most token ids in one token-array prompt (far above any context; the model's context check follows). */
const MAX_PROMPT_TOKENS = 1 << 20;

/**
 * OpenAI's prompt forms: a string, an array of strings, an array of token ids, or an array of
 * token-id arrays; each string or token array is one prompt.
 */
function completionPrompts(raw: unknown, limits: PromptLimits): (string | number[])[] {
  const shape = "must be a string, an array of strings, an array of token ids or an array of token-id arrays";
  if (typeof raw === "string") return [raw];
  if (!Array.isArray(raw) || raw.length === 0) throw invalid("prompt", shape);
  if (raw.every((p) => typeof p === "string")) return raw as string[];
  if (raw.every((t) => typeof t === "number")) return [tokenIds(raw, "prompt")];
  if (raw.every((p) => Array.isArray(p))) {
    if (raw.length > limits.maxChoices)
      throw invalid("prompt", `holds ${raw.length} prompts; at most ${limits.maxChoices}`);
    return raw.map((p, i) => tokenIds(p as unknown[], `prompt[${i}]`));
  }
  throw invalid("prompt", shape);
}

function tokenIds(list: unknown[], param: string): number[] {
  if (list.length === 0) throw invalid(param, "an empty token array");
  if (list.length > MAX_PROMPT_TOKENS)
    throw invalid(param, `holds ${list.length} tokens; at most ${MAX_PROMPT_TOKENS}`);
  for (const [i, t] of list.entries())
    if (typeof t !== "number" || !Number.isSafeInteger(t) || t < 0)
      throw invalid(`${param}[${i}]`, "must be a token id (an integer ≥ 0)");
  return list as number[];
}
