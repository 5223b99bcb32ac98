// The Responses API's answers, apart from HTTP: the response object in OpenAI's shape, its output
// items from a generation, stored responses (kept in the job store as succeeded jobs of their
// model, owned by the caller's key, purged with the jobs' retention), the conversation a
// previous_response_id continues, and respond(): one non-streamed answer to a /v1/responses
// body, free of Fastify, so other callers (a job running a Responses body) can use it too.
// The route (routes/openai-responses.ts) adds streaming, metrics and the wire.
import { randomUUID } from "node:crypto";
import { CancelHandle } from "../cancel.js";
import type { ServedModel } from "../catalogue/served-model.js";
import { ModelportError } from "../errors.js";
import type { Job } from "../jobs/job.js";
import type { JobQueue } from "../jobs/job-queue.js";
import type { GenerateRequest, GenerateResult, TokenUsage } from "../llm/language-model.js";
import { type TraceParent, traceHeaders } from "../telemetry/propagation.js";
import type { Principal } from "../tenants/principal.js";
import { checkAccess } from "../tenants/tenants.js";
import type { AppContext } from "./context.js";
import { type GenerationHooks, generateChoices, promptLimits } from "./openai-generation.js";
import {
  generateRequest,
  type InputItem,
  inputItems,
  parseResponsesRequest,
  type ResponsesRequest,
} from "./responses-request.js";

/** What answering needs of the server: the limits of models (config, catalogue) and the store (jobs). */
export type ResponsesDeps = Pick<AppContext, "config" | "catalogue" | "jobs">;

/** Response ids are `resp_` and 32 hex digits; the stored job has the same id. */
const RESPONSE_ID = /^resp_[0-9a-f]{32}$/;

/** A new id with OpenAI's prefix for its kind (resp, msg, fc, fco). */
export function newId(prefix: "resp" | "msg" | "fc" | "fco"): string {
  return `${prefix}_${randomUUID().replaceAll("-", "")}`;
}

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";

/** The response object's parts that change as it is answered. */
export interface ResponseState {
  status: ResponseStatus;
  output: Record<string, unknown>[];
  usage?: TokenUsage;
  error?: { code: string; message: string };
}

/** The usage object of the Responses API. */
function responseUsageJson(u: TokenUsage) {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedTokens ?? 0 },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.promptTokens + u.completionTokens,
  };
}

/**
 * The response object as OpenAI returns it (openai-node's `Response`), echoing the request's
 * settings. An absent temperature or top_p is echoed null: modelport's default is greedy.
 */
export function responseJson(
  p: ResponsesRequest,
  id: string,
  createdAt: number,
  model: string,
  state: ResponseState,
): Record<string, unknown> {
  const b = p.body;
  return {
    id,
    object: "response",
    created_at: createdAt,
    status: state.status,
    ...(state.status === "completed" || state.status === "incomplete"
      ? { completed_at: Math.floor(Date.now() / 1000) }
      : {}),
    background: false,
    error: state.error ?? null,
    incomplete_details: state.status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: b.instructions ?? null,
    max_output_tokens: b.max_output_tokens ?? null,
    max_tool_calls: null,
    model,
    output: state.output,
    parallel_tool_calls: b.parallel_tool_calls ?? true,
    previous_response_id: b.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    service_tier: "default",
    store: p.store,
    temperature: b.temperature ?? null,
    text: { format: p.format, verbosity: "medium" },
    tool_choice: p.toolChoice,
    tools: p.tools,
    top_logprobs: 0,
    top_p: b.top_p ?? null,
    truncation: "disabled",
    usage: state.usage ? responseUsageJson(state.usage) : null,
    user: b.user ?? null,
    metadata: b.metadata ?? {},
  };
}

/** An assistant message item holding `text` (incomplete when the generation was cut by max_output_tokens). */
export function messageItem(id: string, text: string, status: "in_progress" | "completed" | "incomplete") {
  return {
    type: "message",
    id,
    status,
    role: "assistant",
    content: status === "in_progress" ? [] : [{ type: "output_text", text, annotations: [], logprobs: [] }],
  };
}

/**
 * The output items of a generation: a message with its text (when there is text, or no call),
 * then one function_call item per call. `messageId` is the message's id (a stream announced it).
 */
export function outputItems(result: GenerateResult, messageId: string): Record<string, unknown>[] {
  const calls = result.toolCalls ?? [];
  const out: Record<string, unknown>[] = [];
  if (result.text !== "" || calls.length === 0)
    out.push(
      messageItem(messageId, result.text, result.finishReason === "length" ? "incomplete" : "completed"),
    );
  for (const c of calls)
    out.push({
      type: "function_call",
      id: newId("fc"),
      call_id: c.id,
      name: c.name,
      arguments: c.arguments,
      status: "completed",
    });
  return out;
}

/** The final state of a generation's answer. */
export function finalState(result: GenerateResult, messageId: string, usage: TokenUsage): ResponseState {
  return {
    status: result.finishReason === "length" ? "incomplete" : "completed",
    output: outputItems(result, messageId),
    usage,
  };
}

/** What an unknown id, another key's response, a deleted or purged one answers: all the same. */
export function responseNotFound(id: string, param?: string): ModelportError {
  return new ModelportError(
    "MP_ERR_RESPONSE_NOT_FOUND",
    `no response '${id.slice(0, 128)}' (stored responses are kept for jobs.retentionMs; store: false keeps none)`,
    param ? { param } : undefined,
  );
}

/**
 * The stored response `id` if `scope` may see it (undefined: every key's, as admin keys and a
 * server without keys see jobs).
 * @throws ModelportError MP_ERR_RESPONSE_NOT_FOUND, naming `param` when given
 */
export async function storedResponse(
  jobs: JobQueue,
  id: string,
  scope: string | undefined,
  param?: string,
): Promise<Job & { result: string }> {
  const job = RESPONSE_ID.test(id) ? await jobs.get(id) : undefined;
  if (!job || job.result === undefined || (scope !== undefined && job.owner !== scope))
    throw responseNotFound(id, param);
  return job as Job & { result: string };
}

/** The conversation a stored response closes: the items it was given (its own prior ones first), then its output. */
export function conversationOf(job: Job & { result: string }): InputItem[] {
  const input = (JSON.parse(job.input) as { input?: unknown[] }).input ?? [];
  const output = (JSON.parse(job.result) as { output?: unknown[] }).output ?? [];
  // Output items are input items (message with output_text parts, function_call); checked again
  // as any input is.
  return inputItems([...input, ...output]);
}

/** The items a stored response was given, as GET .../input_items lists them. */
export function storedInputItems(job: Job): unknown[] {
  return (JSON.parse(job.input) as { input?: unknown[] }).input ?? [];
}

export interface RespondOptions {
  /** Canceled when the caller goes away: the generation stops and frees its sequence. */
  cancel?: CancelHandle;
  trace?: TraceParent | undefined;
  /** The caller's key: only models it may use, only its own stored responses. */
  principal?: Principal | undefined;
  /** The key name that owns what is stored (absent on a server without keys). */
  owner?: string | undefined;
  /** Whose stored responses may be continued (undefined: any, as admin keys). */
  scope?: string | undefined;
  /** Hears the first text and the usage (metrics, usage per key). */
  hooks?: GenerationHooks;
}

/** A request ready to generate: the GenerateRequest and the whole conversation's items. */
export interface Prepared {
  request: GenerateRequest;
  /** The items stored as the response's input: the previous response's conversation, then this one's. */
  items: InputItem[];
}

/**
 * Joins `parsed` to the conversation it continues and bounds the whole.
 * @throws MP_ERR_RESPONSE_NOT_FOUND for a previous_response_id the caller may not see; the size errors.
 */
export async function prepare(
  deps: ResponsesDeps,
  parsed: ResponsesRequest,
  scope: string | undefined,
): Promise<Prepared> {
  const previous = parsed.body.previous_response_id;
  const prior = previous
    ? conversationOf(await storedResponse(deps.jobs, previous, scope, "previous_response_id"))
    : [];
  const items = [...prior, ...parsed.items];
  return { request: generateRequest(parsed, prior), items };
}

/** An item as listed: with an id (one is made for an item sent without). */
function withId(item: InputItem): InputItem {
  if (item.id !== undefined) return item;
  const prefix = item.type === "message" ? "msg" : item.type === "function_call" ? "fc" : "fco";
  return { ...item, id: newId(prefix) };
}

/** Keeps a finished response (store: true) as a succeeded job of `model`, owned by `owner`. */
export async function storeResponse(
  deps: ResponsesDeps,
  parsed: ResponsesRequest,
  prepared: Prepared,
  response: Record<string, unknown>,
  model: ServedModel,
  opts: Pick<RespondOptions, "owner" | "trace">,
): Promise<void> {
  const metadata = parsed.body.metadata;
  await deps.jobs.record({
    id: response.id as string,
    model: model.name,
    input: JSON.stringify({ ...parsed.body, input: prepared.items.map(withId) }),
    result: JSON.stringify(response),
    ...(metadata && Object.keys(metadata).length ? { metadata } : {}),
    ...(opts.owner !== undefined ? { owner: opts.owner } : {}),
    ...(opts.trace ? { trace: traceHeaders(opts.trace) } : {}),
  });
}

/**
 * The answer to a parsed, non-streamed /v1/responses body on `model` (acquired by the caller):
 * one generation through the path chat completions use, the response object, stored when asked.
 * @throws ModelportError: the request's errors, the generation's, MP_ERR_RESPONSE_NOT_FOUND, the store's
 */
export async function respondParsed(
  deps: ResponsesDeps,
  model: ServedModel,
  parsed: ResponsesRequest,
  opts: RespondOptions = {},
): Promise<Record<string, unknown>> {
  const prepared = await prepare(deps, parsed, opts.scope);
  const id = newId("resp");
  const createdAt = Math.floor(Date.now() / 1000);
  const first = opts.hooks ? () => opts.hooks!.first() : () => {};
  const [result] = await generateChoices(
    model,
    { model: parsed.model, requests: [prepared.request], stream: false, includeUsage: false, n: 1 },
    opts.cancel ?? new CancelHandle(),
    first,
    () => {},
    opts.trace,
  );
  opts.hooks?.done(result!.usage);
  const response = responseJson(
    parsed,
    id,
    createdAt,
    model.name,
    finalState(result!, newId("msg"), result!.usage),
  );
  if (parsed.store) await storeResponse(deps, parsed, prepared, response, model, opts);
  return response;
}

/**
 * The answer to a /v1/responses `body` on `model`, not streamed (`stream` is ignored): what a job
 * running a Responses body calls. The body's model must be one `opts.principal` may use.
 */
export function respond(
  deps: ResponsesDeps,
  model: ServedModel,
  body: unknown,
  opts: RespondOptions = {},
): Promise<Record<string, unknown>> {
  const parsed = parseResponsesRequest(body, (name) => {
    checkAccess(opts.principal, name, (n) => deps.catalogue.has(n));
    return promptLimits(deps, name);
  });
  return respondParsed(deps, model, { ...parsed, stream: false }, opts);
}
