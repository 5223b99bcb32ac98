// modelport's requests and answers on the wire of an OpenAI-compatible API: the request's tools,
// history, response format, bias, penalties and logprobs in OpenAI's fields; the answer's tool
// calls back, whole (non-streamed) or as streamed fragments joined by their index, and its
// logprobs, both bounded in size (an upstream is not trusted to be sane).
import type { ChatMessage, GenerateRequest, TokenLogprob, ToolCall } from "../../llm/language-model.js";

/** A tool call as OpenAI sends it (streamed: fragments with an index). */
export interface WireToolCall {
  index?: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

const MAX_CALLS = 128;

/** A chat message in OpenAI's shape. */
export function wireMessage(m: ChatMessage): Record<string, unknown> {
  return {
    role: m.role,
    content: m.toolCalls?.length && m.content === "" ? null : m.content,
    ...(m.toolCalls?.length
      ? {
          tool_calls: m.toolCalls.map((c) => ({
            id: c.id,
            type: "function",
            function: { name: c.name, arguments: c.arguments },
          })),
        }
      : {}),
    ...(m.toolCallId !== undefined ? { tool_call_id: m.toolCallId } : {}),
  };
}

/** The request's tools, tool choice, parallel calls, response format, bias and penalties as OpenAI's fields. */
export function wireRequestFields(r: GenerateRequest): Record<string, unknown> {
  const choice = r.toolChoice;
  const format = r.responseFormat;
  return {
    ...(r.tools?.length
      ? {
          tools: r.tools.map((t) => ({
            type: "function",
            function: {
              name: t.name,
              ...(t.description ? { description: t.description } : {}),
              parameters: t.parameters,
            },
          })),
        }
      : {}),
    ...(choice === undefined
      ? {}
      : {
          tool_choice:
            typeof choice === "string" ? choice : { type: "function", function: { name: choice.name } },
        }),
    ...(r.parallelToolCalls !== undefined ? { parallel_tool_calls: r.parallelToolCalls } : {}),
    ...(format === undefined
      ? {}
      : {
          response_format:
            format.type === "json_schema"
              ? {
                  type: "json_schema",
                  json_schema: {
                    name: format.name,
                    schema: format.schema,
                    ...(format.strict !== undefined ? { strict: format.strict } : {}),
                  },
                }
              : { type: format.type },
        }),
    ...(r.logitBias ? { logit_bias: r.logitBias } : {}),
    ...(r.logprobs
      ? r.messages
        ? { logprobs: true, top_logprobs: r.logprobs.top }
        : { logprobs: Math.min(5, r.logprobs.top) }
      : {}),
    ...(r.frequencyPenalty ? { frequency_penalty: r.frequencyPenalty } : {}),
    ...(r.presencePenalty ? { presence_penalty: r.presencePenalty } : {}),
  };
}

/** Joins tool calls, whole or in fragments, up to MAX_CALLS calls and `maxChars` of arguments. */
export class ToolCallJoiner {
  private readonly calls: { id: string; name: string; arguments: string }[] = [];
  private chars = 0;

  constructor(private readonly maxChars: number) {}

  /** Adds calls or fragments; false when the answer passed the bounds (the rest is dropped). */
  add(list: unknown): boolean {
    if (!Array.isArray(list)) return true;
    for (const [n, raw] of list.entries()) {
      const c = raw as WireToolCall;
      if (typeof c !== "object" || c === null) continue;
      const index =
        typeof c.index === "number" && Number.isInteger(c.index) ? c.index : this.calls.length + n;
      if (index < 0 || index >= MAX_CALLS) return false;
      let call = this.calls[index];
      if (!call) {
        call = { id: "", name: "", arguments: "" };
        this.calls[index] = call;
      }
      if (typeof c.id === "string") call.id = c.id;
      const name = c.function?.name;
      const args = c.function?.arguments;
      if (typeof name === "string") call.name += name;
      if (typeof args === "string") call.arguments += args;
      this.chars += (name?.length ?? 0) + (args?.length ?? 0);
      if (this.chars > this.maxChars) return false;
    }
    return true;
  }

  /** The calls so far (none: undefined). */
  result(): ToolCall[] | undefined {
    const calls = this.calls.filter((c) => c !== undefined && c.name !== "");
    return calls.length ? calls.map((c, i) => ({ ...c, id: c.id || `call_${i}` })) : undefined;
  }
}

/** Most logprob entries read from one answer. */
const MAX_LOGPROBS = 1 << 16;

const bytesOf = (text: string) => [...Buffer.from(text, "utf8")];

/**
 * An answer's logprobs, chat ({content: [{token, logprob, top_logprobs}]}) or completions
 * ({tokens, token_logprobs, top_logprobs}), appended to `into`; entries that are not well formed
 * are skipped.
 */
export function readLogprobs(raw: unknown, into: TokenLogprob[]): void {
  if (typeof raw !== "object" || raw === null) return;
  const r = raw as {
    content?: unknown;
    tokens?: unknown;
    token_logprobs?: unknown;
    top_logprobs?: unknown;
  };
  if (Array.isArray(r.content)) {
    for (const c of r.content as { token?: unknown; logprob?: unknown; top_logprobs?: unknown }[]) {
      if (into.length >= MAX_LOGPROBS) return;
      if (typeof c?.token !== "string" || typeof c.logprob !== "number") continue;
      const top = Array.isArray(c.top_logprobs)
        ? (c.top_logprobs as { token?: unknown; logprob?: unknown }[])
        : [];
      into.push({
        token: c.token,
        logprob: c.logprob,
        bytes: bytesOf(c.token),
        top: top
          .filter((t) => typeof t?.token === "string" && typeof t.logprob === "number")
          .slice(0, 20)
          .map((t) => ({
            token: t.token as string,
            logprob: t.logprob as number,
            bytes: bytesOf(t.token as string),
          })),
      });
    }
    return;
  }
  if (!Array.isArray(r.tokens) || !Array.isArray(r.token_logprobs)) return;
  const tops = Array.isArray(r.top_logprobs) ? r.top_logprobs : [];
  r.tokens.forEach((token: unknown, i: number) => {
    const logprob = (r.token_logprobs as unknown[])[i];
    if (into.length >= MAX_LOGPROBS || typeof token !== "string" || typeof logprob !== "number") return;
    const top =
      tops[i] && typeof tops[i] === "object" ? Object.entries(tops[i] as Record<string, unknown>) : [];
    into.push({
      token,
      logprob,
      bytes: bytesOf(token),
      top: top
        .filter(([, p]) => typeof p === "number")
        .slice(0, 20)
        .map(([t, p]) => ({ token: t, logprob: p as number, bytes: bytesOf(t) })),
    });
  });
}
