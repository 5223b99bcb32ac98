// Turns a POST /v1/responses body into the GenerateRequest chat completions use (messages, tools,
// tool choice, response format, sampling), so both APIs share one generation path. The body's
// shape is responses-schema.ts's; here each input item, tool and format is checked by type, and
// what modelport does not serve is refused by name (400 MP_ERR_REQUEST_INVALID with `param`):
// built-in tools, image/file/audio parts, reasoning effort, background runs, `include` values.
// Sizes are bounded as chat's are (openai-request.ts: llm.maxMessages and the prompt's byte
// bound), over the whole conversation once a previous response's items are put in front.
import type { ChatMessage, GenerateRequest, ToolCall } from "../llm/language-model.js";
import {
  checkMessageCount,
  checkPromptBytes,
  type FormatDefinition,
  invalid,
  type PromptLimits,
  type PromptLimitsFor,
  promptBytes,
  responseFormatOf,
  toolChoiceOf,
  toolSpecs,
} from "./openai-request.js";
import { parseBody } from "./openai-schemas.js";
import {
  functionCallItemSchema,
  functionCallOutputItemSchema,
  functionToolSchema,
  jsonSchemaFormatSchema,
  messageItemSchema,
  type ResponsesBody,
  responsesRequestSchema,
} from "./responses-schema.js";

/** A text part of a message item, as stored and listed. */
export interface TextPart {
  type: "input_text" | "output_text";
  text: string;
}

/** An input item as modelport keeps it (the Responses API's own shapes, text only). */
export type InputItem =
  | { type: "message"; id?: string; role: "user" | "assistant" | "system" | "developer"; content: TextPart[] }
  | { type: "function_call"; id?: string; call_id: string; name: string; arguments: string }
  | { type: "function_call_output"; id?: string; call_id: string; output: string };

/** A function tool as the answer echoes it. */
export interface FunctionToolJson {
  type: "function";
  name: string;
  description: string | null;
  parameters: Record<string, unknown> | null;
  strict: boolean;
}

export interface ResponsesRequest {
  /** The body as validated (its fields are echoed in the answer). */
  body: ResponsesBody;
  model: string;
  limits: PromptLimits;
  /** This request's input items (a string input is one user message). */
  items: InputItem[];
  stream: boolean;
  /** Keep the answer (default true, as OpenAI). */
  store: boolean;
  /** What the answer echoes: tools, tool_choice and text.format with their defaults filled in. */
  tools: FunctionToolJson[];
  toolChoice: "auto" | "none" | "required" | { type: "function"; name: string };
  format: Record<string, unknown>;
  /** Everything of the GenerateRequest but its messages. */
  generation: Omit<GenerateRequest, "messages">;
}

const TEXT_PARTS = new Set(["input_text", "output_text"]);

/** A message's content parts as text parts; images, files and audio are refused by name. */
function textParts(content: string | { type: string }[], role: string, at: string): TextPart[] {
  const type = role === "assistant" ? "output_text" : "input_text";
  if (typeof content === "string") return [{ type, text: content }];
  return content.map((part, j) => {
    if (!TEXT_PARTS.has(part.type))
      throw invalid(
        `${at}[${j}].type`,
        `'${part.type}' parts are not served: modelport's language models take text (input_text, output_text)`,
      );
    const text = (part as { text?: unknown }).text;
    if (typeof text !== "string") throw invalid(`${at}[${j}].text`, "must be a string");
    return { type: part.type as TextPart["type"], text };
  });
}

/**
 * Items in the shape modelport keeps, each checked by its type.
 * @throws MP_ERR_REQUEST_INVALID naming the item (`input[3].content[0].type`).
 */
export function inputItems(input: string | unknown[], at = "input"): InputItem[] {
  if (typeof input === "string")
    return [{ type: "message", role: "user", content: textParts(input, "user", at) }];
  return input.map((raw, i): InputItem => {
    const param = `${at}[${i}]`;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw))
      throw invalid(param, "must be an input item object");
    const type = (raw as { type?: unknown }).type ?? "message";
    if (type === "message") {
      const m = parseBody(messageItemSchema, raw, param);
      return {
        type: "message",
        ...(m.id !== undefined ? { id: m.id } : {}),
        role: m.role,
        content: textParts(m.content, m.role, `${param}.content`),
      };
    }
    if (type === "function_call") {
      const c = parseBody(functionCallItemSchema, raw, param);
      return {
        type: "function_call",
        ...(c.id !== undefined ? { id: c.id } : {}),
        call_id: c.call_id,
        name: c.name,
        arguments: c.arguments,
      };
    }
    if (type === "function_call_output") {
      const o = parseBody(functionCallOutputItemSchema, raw, param);
      const output =
        typeof o.output === "string"
          ? o.output
          : textParts(o.output, "user", `${param}.output`)
              .map((p) => p.text)
              .join("");
      return {
        type: "function_call_output",
        ...(o.id !== undefined ? { id: o.id } : {}),
        call_id: o.call_id,
        output,
      };
    }
    throw invalid(
      `${param}.type`,
      `'${String(type)}' items are not served; send message, function_call and function_call_output items`,
    );
  });
}

/**
 * The chat messages of a conversation: `instructions` as a system message first, then the items
 * in order; function calls join the assistant message before them, outputs become tool messages.
 */
export function chatMessages(
  items: readonly InputItem[],
  instructions: string | null | undefined,
): ChatMessage[] {
  const out: { role: ChatMessage["role"]; content: string; toolCalls?: ToolCall[]; toolCallId?: string }[] =
    [];
  if (instructions != null) out.push({ role: "system", content: instructions });
  for (const item of items) {
    if (item.type === "message") {
      out.push({ role: item.role, content: item.content.map((p) => p.text).join("") });
    } else if (item.type === "function_call") {
      const call = { id: item.call_id, name: item.name, arguments: item.arguments };
      const last = out[out.length - 1];
      if (last?.role === "assistant") last.toolCalls = [...(last.toolCalls ?? []), call];
      else out.push({ role: "assistant", content: "", toolCalls: [call] });
    } else {
      out.push({ role: "tool", content: item.output, toolCallId: item.call_id });
    }
  }
  return out;
}

/** Refuses what modelport does not serve, by name. */
function refuseUnserved(body: ResponsesBody): void {
  const reasoning = body.reasoning as { effort?: unknown; summary?: unknown } | null | undefined;
  if (reasoning && (reasoning.effort != null || reasoning.summary != null))
    throw invalid(
      reasoning.effort != null ? "reasoning.effort" : "reasoning.summary",
      "reasoning is not served: modelport's models give no separate reasoning; leave reasoning out or null",
    );
  if (body.background)
    throw invalid(
      "background",
      "background responses are not served yet (they are to run as jobs of the language model); send background: false, or stream the answer",
    );
  body.include?.forEach((value, i) => {
    throw invalid(`include[${i}]`, `'${value}' is not served; modelport includes nothing beyond the answer`);
  });
  if (body.truncation === "auto")
    throw invalid(
      "truncation",
      "'auto' is not served: a conversation over the model's context is refused (MP_ERR_LLM_CONTEXT_OVERFLOW), never cut; send 'disabled'",
    );
  if (body.top_logprobs) throw invalid("top_logprobs", "log probabilities are not served on /v1/responses");
  if (body.max_tool_calls != null) throw invalid("max_tool_calls", "is not served; leave it out");
  for (const field of ["conversation", "prompt"] as const)
    if ((body as Record<string, unknown>)[field] != null)
      throw invalid(
        field,
        field === "conversation"
          ? "conversations are not served; continue with previous_response_id"
          : "prompt templates are not served; send instructions and input",
      );
}

/** The function tools offered; built-in tools are refused by name. */
function functionTools(raw: ResponsesBody["tools"]): FunctionToolJson[] {
  return (raw ?? []).map((t, i) => {
    if (t.type !== "function")
      throw invalid(
        `tools[${i}].type`,
        `'${t.type}' is a built-in tool modelport does not serve; offer function tools ({type: 'function', name, parameters})`,
      );
    const f = parseBody(functionToolSchema, t, `tools[${i}]`);
    return {
      type: "function",
      name: f.name,
      description: f.description ?? null,
      parameters: f.parameters ?? null,
      strict: f.strict ?? true,
    };
  });
}

function toolChoiceJson(raw: ResponsesBody["tool_choice"]): ResponsesRequest["toolChoice"] {
  if (raw == null) return "auto";
  if (typeof raw === "string") return raw;
  if (raw.type !== "function")
    throw invalid(
      "tool_choice.type",
      `'${raw.type}' is not served; send 'auto', 'none', 'required' or {type: 'function', name}`,
    );
  const name = (raw as { name?: unknown }).name;
  if (typeof name !== "string") throw invalid("tool_choice.name", "is required: the function to call");
  return { type: "function", name };
}

function formatOf(raw: { type: string } | null | undefined): FormatDefinition {
  if (raw == null || raw.type === "text") return { type: "text" };
  if (raw.type === "json_object") return { type: "json_object" };
  if (raw.type === "json_schema") return parseBody(jsonSchemaFormatSchema, raw, "text.format");
  throw invalid(
    "text.format.type",
    `'${raw.type}' is not served; send 'text', 'json_object' or 'json_schema'`,
  );
}

/**
 * POST /v1/responses: the body checked and translated, its input items not yet joined to a
 * previous response's (see generateRequest).
 * @throws ModelportError MP_ERR_REQUEST_INVALID with details.param; what limitsFor throws (the
 *   no-model 404 for a model the caller may not use).
 */
export function parseResponsesRequest(raw: unknown, limitsFor: PromptLimitsFor): ResponsesRequest {
  const body = parseBody(responsesRequestSchema, raw);
  const limits = limitsFor(body.model);
  refuseUnserved(body);
  if (body.input === undefined && body.previous_response_id == null)
    throw invalid("input", "is required: a string or an array of input items");
  const items = inputItems(body.input ?? []);
  const tools = functionTools(body.tools);
  const specs = toolSpecs(tools, (i) => `tools[${i}].name`);
  const toolChoice = toolChoiceJson(body.tool_choice);
  const choice = toolChoiceOf(typeof toolChoice === "object" ? { name: toolChoice.name } : toolChoice, specs);
  const format = formatOf(body.text?.format);
  const responseFormat = responseFormatOf(format);
  return {
    body,
    model: body.model,
    limits,
    items,
    stream: body.stream ?? false,
    store: body.store ?? true,
    tools,
    toolChoice,
    format: format.type === "json_schema" ? { ...format, strict: format.strict ?? false } : format,
    generation: {
      ...(body.max_output_tokens != null ? { maxTokens: body.max_output_tokens } : {}),
      ...(body.temperature != null ? { temperature: body.temperature } : {}),
      ...(body.top_p != null ? { topP: body.top_p } : {}),
      ...(body.seed != null ? { seed: body.seed } : {}),
      ...(specs.length ? { tools: specs } : {}),
      ...(body.tool_choice != null && choice ? { toolChoice: choice } : {}),
      ...(body.parallel_tool_calls != null ? { parallelToolCalls: body.parallel_tool_calls } : {}),
      ...(responseFormat ? { responseFormat } : {}),
    },
  };
}

/**
 * The generation for `parsed` after the items of the conversation it continues (`prior`, a
 * previous response's input and output items), with the whole conversation bounded as chat is.
 * @throws MP_ERR_REQUEST_INVALID (too many messages), MP_ERR_LLM_CONTEXT_OVERFLOW (over the byte bound).
 */
export function generateRequest(parsed: ResponsesRequest, prior: readonly InputItem[]): GenerateRequest {
  const messages = chatMessages([...prior, ...parsed.items], parsed.body.instructions);
  // Every item counts, calls joined into one assistant turn too (chat bounds calls per message).
  checkMessageCount(Math.max(messages.length, prior.length + parsed.items.length), parsed.limits, "input");
  checkPromptBytes(promptBytes(messages, parsed.body.tools), parsed.limits, parsed.model, "input");
  if (messages.length === 0) throw invalid("input", "holds no items");
  return { ...parsed.generation, messages };
}
