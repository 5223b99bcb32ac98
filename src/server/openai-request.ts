// Validates OpenAI chat and completion request bodies and turns them into GenerateRequests.
// Every problem is a 400 MP_ERR_REQUEST_INVALID naming the field (`param`), as OpenAI does;
// fields modelport does not implement are refused rather than silently ignored when ignoring
// them would change the answer (n > 1, logprobs, echo, suffix, tools).
//
// Sizes are checked here, in time linear in the body and before any chat template or tokenizer
// runs (both run on the event loop): the number of messages and stop sequences, each stop's
// length, and the prompt's UTF-8 bytes against the model's byte bound (PromptLimits, from
// llm.* in the config). A prompt over the bound is 400 MP_ERR_LLM_CONTEXT_OVERFLOW at once, so
// templating and tokenizing only ever see prompts whose size the context bounds.
import { ModelportError } from "../errors.js";
import type { ChatMessage, GenerateRequest } from "../llm/language-model.js";

/** The size limits a request is checked against, for the model it names. */
export interface PromptLimits {
  /** Most UTF-8 bytes of prompt text (all message contents, or the prompt); undefined: no bound here. */
  readonly maxPromptBytes?: number;
  /** Where maxPromptBytes comes from, in config terms, for the error message. */
  readonly maxPromptBytesSource?: string;
  readonly maxMessages: number;
  readonly maxStops: number;
  readonly maxStopChars: number;
}

/** The limits for a model name (defaults for a name no model has: the route answers 404 after). */
export type PromptLimitsFor = (model: string) => PromptLimits;

/** Model names are at most 128 characters (config); a longer one names nothing and is not echoed. */
const MAX_MODEL_NAME = 256;

export interface OpenAiRequest {
  model: string;
  generate: GenerateRequest;
  stream: boolean;
  includeUsage: boolean;
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
): { body: Record<string, unknown>; base: Omit<OpenAiRequest, "generate">; limits: PromptLimits } & {
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
  refuse(body, "n", (v) => v === 1, "only n = 1 is supported");
  refuse(body, "logprobs", (v) => v === false, "logprobs are not supported");
  refuse(body, "tools", (v) => Array.isArray(v) && v.length === 0, "tools are not supported");
  const maxTokens = optionalInt(body, "max_completion_tokens", 1) ?? optionalInt(body, "max_tokens", 1);
  const temperature = optionalNumber(body, "temperature", 0, 2);
  const topP = optionalNumber(body, "top_p", 0, 1);
  const seed = optionalInt(body, "seed", Number.MIN_SAFE_INTEGER);
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
    base: { model: body.model, stream, includeUsage },
    sampling: {
      ...(maxTokens !== undefined ? { maxTokens } : {}),
      ...(temperature !== undefined ? { temperature } : {}),
      ...(topP !== undefined ? { topP } : {}),
      ...(seed !== undefined ? { seed } : {}),
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
    return { role: m.role as ChatMessage["role"], content };
  });
  checkPromptBytes(bytes, limits, base.model, "messages");
  return { ...base, generate: { ...sampling, messages } };
}

/**
 * POST /v1/completions.
 * @throws ModelportError MP_ERR_REQUEST_INVALID with details.param; MP_ERR_LLM_CONTEXT_OVERFLOW
 *   when the prompt is over the model's byte bound.
 */
export function parseCompletionRequest(raw: unknown, limitsFor: PromptLimitsFor): OpenAiRequest {
  const { body, base, sampling, limits } = common(raw, limitsFor);
  refuse(body, "echo", (v) => v === false, "echo is not supported");
  refuse(body, "suffix", (v) => v === "", "suffix is not supported");
  refuse(body, "best_of", (v) => v === 1, "only best_of = 1 is supported");
  let prompt = body.prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === "string") prompt = prompt[0];
  if (typeof prompt !== "string")
    throw invalid(
      "prompt",
      "must be a string (or an array holding one string; token arrays are not supported)",
    );
  checkPromptBytes(Buffer.byteLength(prompt, "utf8"), limits, base.model, "prompt");
  return { ...base, generate: { ...sampling, prompt } };
}
