// Tool calls and JSON answers for a model that only continues text (llama-cpp): the request's
// tools, tool choice and response format become one JSON Schema the answer is generated under
// (a grammar), a system message that tells the model the format, and the tool history as plain
// messages; the generated JSON becomes text or tool calls again. The format is one JSON object:
//   {"tool_calls": [{"name": "...", "arguments": {...}}]}   to call tools (each one's arguments
//                                                           under that function's schema), or
//   {"response": "..."}                                     to answer (with a json_schema
//                                                           response format: the object itself).
// With a grammar, the answer always has this form, so calls always parse and validate, even on
// a model that never saw the format. (The same approach as llama.cpp's server for templates
// without native tool calling.)
import { randomBytes } from "node:crypto";
import { ModelportError } from "../errors.js";
import { grammarSchema, UnsupportedSchema } from "./json-schema-subset.js";
import type { ChatMessage, GenerateRequest, JsonSchema, ToolCall, ToolSpec } from "./language-model.js";

type Schema = Record<string, unknown>;

/** How one request is generated: the schema to enforce (none: free text) and how to read the answer. */
export interface StructuredPlan {
  /** The schema the answer is generated under; undefined: free text. */
  schema?: Schema;
  /** The answer is the tool-call envelope (parse with readToolAnswer). */
  tools: boolean;
  /** The messages to render: the tool instructions added, the tool history as text. */
  messages?: readonly ChatMessage[];
}

/**
 * The plan for `request`.
 * @throws ModelportError MP_ERR_REQUEST_INVALID naming a schema feature that cannot be enforced.
 */
export function planStructured(request: GenerateRequest): StructuredPlan {
  const format = request.responseFormat;
  const answerSchema =
    format?.type === "json_schema"
      ? subset(format.schema, "response_format.json_schema.schema", "response.")
      : format?.type === "json_object"
        ? ({ type: "object", additionalProperties: true } as Schema)
        : undefined;
  const tools = request.tools ?? [];
  const choice = request.toolChoice ?? "auto";
  const messages =
    request.messages && hasToolHistory(request.messages) ? historyAsText(request.messages) : request.messages;
  if (tools.length === 0 || choice === "none")
    return {
      ...(answerSchema ? { schema: answerSchema } : {}),
      tools: false,
      ...(messages ? { messages } : {}),
    };
  const offered = typeof choice === "object" ? tools.filter((t) => t.name === choice.name) : tools;
  if (offered.length === 0) {
    const name = (choice as { name: string }).name;
    throw new ModelportError("MP_ERR_REQUEST_INVALID", `tool_choice: no tool named '${name}' in tools`, {
      param: "tool_choice",
    });
  }
  const call = offered.map((t) => {
    const i = tools.indexOf(t);
    return {
      type: "object",
      properties: {
        name: { const: t.name },
        arguments: subset(t.parameters, `tools[${i}].function.parameters`, `tool${i}.`),
      },
    };
  });
  const calls: Schema = {
    type: "array",
    items: call.length === 1 ? call[0] : { oneOf: call },
    minItems: 1,
    ...(request.parallelToolCalls === false || typeof choice === "object" ? { maxItems: 1 } : {}),
  };
  const callBranch: Schema = { type: "object", properties: { tool_calls: calls } };
  const answerBranch: Schema = {
    type: "object",
    properties: { response: answerSchema ?? { type: "string" } },
  };
  const schema = choice === "auto" ? { oneOf: [callBranch, answerBranch] } : callBranch;
  return {
    schema: hoistDefs(schema),
    tools: true,
    messages: withInstructions(messages ?? [], offered, choice === "auto"),
  };
}

/**
 * The JSON Schema subset, its definitions named under `prefix` (so the envelope can hold every
 * function's at its root without two of them colliding), or a 400 naming what cannot be enforced.
 */
function subset(schema: JsonSchema, param: string, prefix: string): Schema {
  try {
    return namespaced(grammarSchema(schema, param), prefix) as Schema;
  } catch (err) {
    if (!(err instanceof UnsupportedSchema)) throw err;
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `${err.message}; this model's answers are generated under a grammar, which supports types, enum, const, string lengths and the date/time formats, object properties, array items and lengths, anyOf/oneOf and $ref to $defs`,
      { param },
    );
  }
}

/** `v` with each $defs name and `#/$defs/NAME` ref prefixed by `prefix`. */
function namespaced(v: unknown, prefix: string): unknown {
  if (Array.isArray(v)) return v.map((x) => namespaced(x, prefix));
  if (typeof v !== "object" || v === null) return v;
  const out: Schema = {};
  for (const [k, sub] of Object.entries(v as Schema)) {
    if (k === "$ref" && typeof sub === "string") out.$ref = sub.replace("#/$defs/", `#/$defs/${prefix}`);
    else if (k === "$defs")
      out.$defs = Object.fromEntries(
        Object.entries(sub as Schema).map(([n, d]) => [prefix + n, namespaced(d, prefix)]),
      );
    else out[k] = namespaced(sub, prefix);
  }
  return out;
}

/** Each function's $defs moved to the root of the envelope (refs are to #/$defs/NAME). */
function hoistDefs(schema: Schema): Schema {
  const defs: Schema = {};
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v !== "object" || v === null) return v;
    const out: Schema = {};
    for (const [k, sub] of Object.entries(v as Schema)) {
      if (k === "$defs") Object.assign(defs, sub as Schema);
      else out[k] = walk(sub);
    }
    return out;
  };
  const out = walk(schema) as Schema;
  return Object.keys(defs).length ? { ...out, $defs: defs } : out;
}

function hasToolHistory(messages: readonly ChatMessage[]): boolean {
  return messages.some((m) => m.role === "tool" || (m.toolCalls?.length ?? 0) > 0);
}

/** Assistant tool calls as the envelope the model writes; tool results as user messages. */
function historyAsText(messages: readonly ChatMessage[]): ChatMessage[] {
  const names = new Map<string, string>();
  return messages.map((m) => {
    if (m.role === "assistant" && m.toolCalls?.length) {
      const calls = m.toolCalls.map((c) => {
        names.set(c.id, c.name);
        return { name: c.name, arguments: parseOr(c.arguments) };
      });
      return { role: "assistant", content: JSON.stringify({ tool_calls: calls }) };
    }
    if (m.role === "tool") {
      const name = m.toolCallId ? names.get(m.toolCallId) : undefined;
      return {
        role: "user",
        content: JSON.stringify({ tool_result: { ...(name ? { name } : {}), content: m.content } }),
      };
    }
    return m;
  });
}

function parseOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The tool instructions as a system message (appended to the first system message, if any). */
function withInstructions(
  messages: readonly ChatMessage[],
  tools: readonly ToolSpec[],
  auto: boolean,
): ChatMessage[] {
  const list = tools.map((t) => ({
    name: t.name,
    ...(t.description ? { description: t.description } : {}),
    parameters: t.parameters,
  }));
  const text = [
    `You can call these tools: ${JSON.stringify(list)}`,
    'To call tools, answer with a JSON object: {"tool_calls": [{"name": "<tool name>", "arguments": {<arguments>}}]}.',
    auto
      ? 'To answer without a tool, answer with: {"response": <your answer>}.'
      : "Answer by calling a tool.",
    'A tool\'s result comes back as {"tool_result": {"name", "content"}}.',
  ].join("\n");
  const first = messages[0];
  if (first && (first.role === "system" || first.role === "developer"))
    return [{ ...first, content: `${first.content}\n\n${text}` }, ...messages.slice(1)];
  return [{ role: "system", content: text }, ...messages];
}

/**
 * The text of an answer cut short inside {"response": "...: the string so far, unescaped;
 * undefined when the text is not that.
 */
export function partialResponse(text: string): string | undefined {
  const head = /^\s*\{\s*"response"\s*:\s*"/.exec(text);
  if (!head) return undefined;
  const escapes: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f" };
  let out = "";
  for (let i = head[0].length; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === '"') break;
    if (ch !== "\\") {
      out += ch;
      continue;
    }
    const next = text[i + 1];
    if (next === undefined) break;
    if (next === "u") {
      const hex = text.slice(i + 2, i + 6);
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) break;
      out += String.fromCharCode(Number.parseInt(hex, 16));
      i += 5;
    } else {
      out += escapes[next] ?? next;
      i++;
    }
  }
  return out;
}

/**
 * The answer generated under a tool plan: its text, or its tool calls (each with a fresh id and
 * its arguments as JSON text). Text that is not the envelope (the generation was cut short) is
 * returned as it is.
 */
export function readToolAnswer(
  text: string,
  responseIsJson: boolean,
): { text: string; toolCalls?: ToolCall[] } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { text };
  }
  if (typeof parsed !== "object" || parsed === null) return { text };
  const envelope = parsed as { tool_calls?: unknown; response?: unknown };
  if (Array.isArray(envelope.tool_calls)) {
    const toolCalls = envelope.tool_calls.map((c: { name?: unknown; arguments?: unknown }) => ({
      id: `call_${randomBytes(12).toString("base64url")}`,
      name: String(c?.name ?? ""),
      arguments: JSON.stringify(c?.arguments ?? {}),
    }));
    return { text: "", toolCalls };
  }
  if ("response" in envelope) {
    const r = envelope.response;
    return { text: typeof r === "string" && !responseIsJson ? r : JSON.stringify(r) };
  }
  return { text };
}
