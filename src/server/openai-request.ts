// Validates OpenAI chat and completion request bodies and turns them into GenerateRequests.
// Every problem is a 400 MP_ERR_REQUEST_INVALID naming the field (`param`), as OpenAI does;
// fields modelport does not implement are refused rather than silently ignored when ignoring
// them would change the answer (n > 1, logprobs, echo, suffix, tools).
import { ModelportError } from "../errors.js";
import type { ChatMessage, GenerateRequest } from "../llm/language-model.js";

export interface OpenAiRequest {
  model: string;
  generate: GenerateRequest;
  stream: boolean;
  includeUsage: boolean;
}

const ROLES = new Set(["system", "user", "assistant", "developer", "tool"]);
const MAX_STOPS = 16;

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

function common(body: unknown): { body: Record<string, unknown>; base: Omit<OpenAiRequest, "generate"> } & {
  sampling: Omit<GenerateRequest, "messages" | "prompt">;
} {
  if (!isObject(body)) throw new ModelportError("MP_ERR_REQUEST_INVALID", "the body must be a JSON object");
  if (typeof body.model !== "string" || body.model === "")
    throw invalid("model", "is required: the name of a served model (GET /v1/models)");
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
    if (body.stop.length > MAX_STOPS || !body.stop.every((s) => typeof s === "string"))
      throw invalid("stop", `must be a string or an array of up to ${MAX_STOPS} strings`);
    stop = body.stop as string[];
  } else if (body.stop !== undefined && body.stop !== null)
    throw invalid("stop", "must be a string or an array of strings");
  stop = stop?.filter((s) => s !== "");
  return {
    body,
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

/** POST /v1/chat/completions. @throws ModelportError MP_ERR_REQUEST_INVALID with details.param. */
export function parseChatRequest(raw: unknown): OpenAiRequest {
  const { body, base, sampling } = common(raw);
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    throw invalid("messages", "must be a non-empty array of {role, content}");
  const messages: ChatMessage[] = body.messages.map((m: unknown, i: number) => {
    if (!isObject(m) || typeof m.role !== "string" || !ROLES.has(m.role))
      throw invalid(`messages[${i}].role`, `must be one of ${[...ROLES].join(", ")}`);
    return { role: m.role as ChatMessage["role"], content: contentText(m.content, `messages[${i}].content`) };
  });
  return { ...base, generate: { ...sampling, messages } };
}

/** POST /v1/completions. @throws ModelportError MP_ERR_REQUEST_INVALID with details.param. */
export function parseCompletionRequest(raw: unknown): OpenAiRequest {
  const { body, base, sampling } = common(raw);
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
  return { ...base, generate: { ...sampling, prompt } };
}
