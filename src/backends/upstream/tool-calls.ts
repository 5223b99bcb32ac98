// Tool calls on the wire of an OpenAI-compatible API: the request's tools and history in
// OpenAI's shape, and the answer's calls back, whole (non-streamed) or as streamed fragments
// joined by their index, bounded in count and size (an upstream is not trusted to be sane).
import type { ChatMessage, GenerateRequest, ToolCall } from "../../llm/language-model.js";

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
