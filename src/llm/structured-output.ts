// Tool calls and JSON answers for a model that only continues text (llama-cpp): the request's
// tools, tool choice and response format become one JSON Schema the answer is generated under
// (a grammar), a system message that tells the model the format, and the tool history as plain
// messages; the generated JSON becomes text or tool calls again. The format is one JSON object:
//   {"tool_calls": [{"name": "...", "arguments": {...}}]}   to call tools (each one's arguments
//                                                           under that function's schema), or
//   {"response": "..."}                                     to answer (with a json_schema
//                                                           response format: the object itself).
// The grammar (schema-grammar.ts) keeps the answer to this form and to most of each schema, even
// on a model that never saw the format; answerProblem() checks the whole schema before an answer
// leaves (docs/LLM.md#structured-output). (The same approach as llama.cpp's server for
// templates without native tool calling.)
import { randomBytes } from "node:crypto";
import { ModelportError } from "../errors.js";
import { schemaProblem, validatorFor } from "./answer-validator.js";
import type { ChatMessage, GenerateRequest, JsonSchema, ToolCall, ToolSpec } from "./language-model.js";
import { type SchemaGrammar, schemaGrammar, UnsupportedSchema } from "./schema-grammar.js";
import { embed, normalizeSchema } from "./schema-normalize.js";

type Schema = Record<string, unknown>;

/** How one request is generated: the schema to enforce (none: free text) and how to read the answer. */
export interface StructuredPlan {
  /**
   * The whole schema every answer must satisfy (the envelope, with each client schema in it
   * as sent, normalized); undefined: free text.
   */
  schema?: Schema;
  /** The grammar the answer is generated under (a superset of `schema` where not `exact`). */
  grammar?: SchemaGrammar;
  /** The answer is the tool-call envelope (parse with readToolAnswer). */
  tools: boolean;
  /** The messages to render: the tool instructions added, the tool history as text. */
  messages?: readonly ChatMessage[];
}

/** A client schema moved into the envelope: references under its own prefix, its definitions apart. */
interface Part {
  schema: unknown;
  defs: Schema;
}

/**
 * The plan for `request`.
 * @throws ModelportError MP_ERR_REQUEST_INVALID naming a schema that cannot be served: not valid
 * JSON Schema, no finite value satisfying it, or a feature neither a grammar nor validation holds.
 */
export function planStructured(request: GenerateRequest): StructuredPlan {
  const format = request.responseFormat;
  const answer: Part | undefined =
    format?.type === "json_schema"
      ? part(format.schema, "response_format.json_schema.schema", "response.")
      : format?.type === "json_object"
        ? { schema: { type: "object" }, defs: {} }
        : undefined;
  const tools = request.tools ?? [];
  const choice = request.toolChoice ?? "auto";
  const messages =
    request.messages && hasToolHistory(request.messages) ? historyAsText(request.messages) : request.messages;
  if (tools.length === 0 || choice === "none") {
    if (!answer) return { tools: false, ...(messages ? { messages } : {}) };
    const schema = rooted(answer.schema, answer.defs);
    return {
      schema,
      grammar: grammarOf(schema, "response_format"),
      tools: false,
      ...(messages ? { messages } : {}),
    };
  }
  const offered = typeof choice === "object" ? tools.filter((t) => t.name === choice.name) : tools;
  if (offered.length === 0) {
    const name = (choice as { name: string }).name;
    throw new ModelportError("MP_ERR_REQUEST_INVALID", `tool_choice: no tool named '${name}' in tools`, {
      param: "tool_choice",
    });
  }
  const defs: Schema = { ...answer?.defs };
  const call = offered.map((t) => {
    const i = tools.indexOf(t);
    const args = part(t.parameters, `tools[${i}].function.parameters`, `tool${i}.`);
    Object.assign(defs, args.defs);
    return strictObject({ name: { const: t.name }, arguments: args.schema });
  });
  const calls: Schema = {
    type: "array",
    items: call.length === 1 ? call[0] : { anyOf: call },
    minItems: 1,
    ...(request.parallelToolCalls === false || typeof choice === "object" ? { maxItems: 1 } : {}),
  };
  const callBranch = strictObject({ tool_calls: calls });
  const answerBranch = strictObject({ response: answer?.schema ?? { type: "string" } });
  const schema = rooted(choice === "auto" ? { anyOf: [callBranch, answerBranch] } : callBranch, defs);
  return {
    schema,
    grammar: grammarOf(schema, "tools"),
    tools: true,
    messages: withInstructions(messages ?? [], offered, choice === "auto"),
  };
}

/** An object of exactly these properties, all required. */
function strictObject(properties: Schema): Schema {
  return { type: "object", properties, required: Object.keys(properties), additionalProperties: false };
}

/** `schema` with the definitions its references point at. */
function rooted(schema: unknown, defs: Schema): Schema {
  const base = typeof schema === "object" && schema !== null ? (schema as Schema) : { allOf: [schema] };
  return Object.keys(defs).length ? { ...base, $defs: { ...defs } } : base;
}

/**
 * A client's schema ready for the envelope: normalized, its references under `prefix`; checked
 * as Ajv compiles it and as the grammar is written, so a refusal names the request's parameter.
 */
function part(schema: JsonSchema, param: string, prefix: string): Part {
  const embedded = embed(normalizeSchema(schema), prefix);
  const alone = rooted(embedded.schema, embedded.defs);
  try {
    validatorFor(alone);
  } catch (err) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `${param}: not a valid JSON Schema: ${(err as Error).message}`,
      {
        param,
      },
    );
  }
  grammarOf(alone, param);
  return embedded;
}

/** The grammar of `schema`, or a 400 naming what cannot be served. */
function grammarOf(schema: Schema, param: string): SchemaGrammar {
  try {
    return schemaGrammar(schema, param);
  } catch (err) {
    if (!(err instanceof UnsupportedSchema)) throw err;
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `${err.message}; see docs/LLM.md#structured-output for what a schema may use`,
      {
        param,
      },
    );
  }
}

/**
 * Why `text`, the whole answer generated under `plan`, cannot be sent: it does not parse, or
 * does not satisfy the plan's schema (Ajv's words). Undefined when it can.
 */
export function answerProblem(plan: StructuredPlan, text: string): string | undefined {
  if (!plan.schema) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return `the answer is not JSON (${text.length > 80 ? `${text.slice(0, 80)}…` : text})`;
  }
  return schemaProblem(plan.schema, value);
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
