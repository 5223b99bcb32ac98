// The contract of generate() and embed() for every language model (backends llama-cpp,
// transformers, upstream, and the API tier's remote models), with the request and result
// types. The models themselves are ServedModels in the one catalogue (src/catalogue/); the
// OpenAI-compatible routes ask it for a model with the chat, completion or embeddings
// capability. Each backend lives in src/backends/<name>/ and is the only importer of its driver.
//
// The contract, in short:
// - Lifecycle. The constructor does no I/O. `start()` loads (weights, connection, golden
//   check) and NEVER rejects: a failure shows in `status()` (state "failed", a reason and an
//   MP_ERR_* code), which /readyz reports. `close()` is idempotent; after it, calls reject with
//   MP_ERR_SERVER_SHUTTING_DOWN. `status()` is cheap and synchronous (read per /readyz, /metrics).
//   Local models get all of this from the one lifecycle (src/lifecycle/model-lifecycle.ts).
// - generate(). Resolves once the whole answer is known, with the full text, why it ended and
//   token usage (the backend's own counts; an estimate is acceptable for `upstream` if it says
//   so in a comment). While generating, `onDelta(text)` is called with each new piece of text,
//   in order, never with "" and never after generate() settles; the concatenation of the deltas
//   equals the resolved `text`. A stop sequence is never part of the text or a delta (backends
//   hold back a tail that could still become a stop sequence: StopScanner in stop-scanner.ts
//   does it). Deltas are what SSE streams.
// - Abort. `cancel` (src/cancel.ts) is canceled when the client disconnects. The backend must stop computing and
//   free its slot (sequence, connection) at once, so the next waiting request gets it, then
//   reject with ModelportError MP_ERR_REQUEST_CANCELED. A request aborted while it waits for a
//   slot leaves the queue at once.
// - Errors. Everything thrown is a ModelportError with a code from src/errors.ts:
//   MP_ERR_MODEL_NOT_READY (not loaded / failed golden), MP_ERR_MODEL_OVERLOADED (its queue is
//   full; details.retryAfterSeconds feeds Retry-After), MP_ERR_LLM_CONTEXT_OVERFLOW (the prompt
//   plus max tokens cannot fit), MP_ERR_LLM_CAPABILITY_UNSUPPORTED (chat on an embeddings
//   model…), MP_ERR_LLM_UPSTREAM_FAILED (upstream only), MP_ERR_REQUEST_CANCELED, and
//   MP_ERR_INFERENCE_FAILED for anything the driver throws (message = the driver's own).
//   Parameters are validated by the route before generate() is called; a backend may still
//   refuse what it cannot do with MP_ERR_REQUEST_INVALID.
// - Sampling. temperature 0 (or undefined with no topP) means greedy and must be
//   deterministic: the same request gives the same text. `seed` makes sampling repeatable
//   where the backend can.
// - Tools and response formats. With `tools` (and toolChoice not "none"), an answer is either
//   text (its deltas as usual) or tool calls (finishReason "tool_calls", `toolCalls` set, no
//   deltas for the calls); a call's arguments are JSON text. `responseFormat` json_object / json_schema: the text parses
//   (and validates against the schema) unless the generation was cut short (finishReason
//   "length"); an answer that cannot be made to validate is MP_ERR_LLM_OUTPUT_INVALID, never
//   a "stop". A backend that cannot serve a schema feature refuses the request with
//   MP_ERR_REQUEST_INVALID naming it.
// - Concurrency and queueing are the backend's: it admits what it can run, queues up to its
//   configured limit and refuses the rest with MP_ERR_MODEL_OVERLOADED; `status().concurrency`
//   reports the numbers the metrics read at scrape time.

import type { CancelHandle } from "../cancel.js";
import type { TraceParent } from "../telemetry/propagation.js";

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant" | "developer" | "tool";
  readonly content: string;
  /** An assistant message: the tools it called. */
  readonly toolCalls?: readonly ToolCall[];
  /** A tool message: the call it answers. */
  readonly toolCallId?: string;
}

/** A JSON Schema, as a client sent it (checked by the backend that enforces it). */
export type JsonSchema = Readonly<Record<string, unknown>>;

/** A function the model may call (OpenAI's `tools[].function`). */
export interface ToolSpec {
  readonly name: string;
  readonly description?: string;
  /** The arguments' JSON Schema (an object schema). */
  readonly parameters: JsonSchema;
}

/** auto: the model chooses; none: no call; required: at least one call; {name}: that function. */
export type ToolChoice = "auto" | "none" | "required" | { readonly name: string };

/** One call the model made: `arguments` is JSON text, as OpenAI sends it. */
export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

/** text: free text; json_object: any JSON object; json_schema: JSON valid against `schema`. */
export type ResponseFormat =
  | { readonly type: "text" }
  | { readonly type: "json_object" }
  | {
      readonly type: "json_schema";
      readonly name: string;
      readonly schema: JsonSchema;
      readonly strict?: boolean;
    };

export interface GenerateRequest {
  /** Exactly one of `messages` (chat), `prompt` and `promptTokens` (completion) is set. */
  readonly messages?: readonly ChatMessage[];
  readonly prompt?: string;
  /** A completion prompt as the model's token ids. */
  readonly promptTokens?: readonly number[];
  /** Chat only: functions the model may call, and how. */
  readonly tools?: readonly ToolSpec[];
  readonly toolChoice?: ToolChoice;
  /** More than one call in one answer (default true). */
  readonly parallelToolCalls?: boolean;
  /** The answer's form; json_object and json_schema are enforced, not hoped for. */
  readonly responseFormat?: ResponseFormat;
  /** Token id → bias added to its logit (-100: never, 100: all but certain), as OpenAI's logit_bias. */
  readonly logitBias?: Readonly<Record<number, number>>;
  /** Log probabilities of the answer's tokens, with this many likeliest alternatives per token (0–20). */
  readonly logprobs?: { readonly top: number };
  /** OpenAI's penalties, -2 to 2 (0 or undefined: none). */
  readonly frequencyPenalty?: number;
  readonly presencePenalty?: number;
  /** Most new tokens; undefined: until a stop, the end-of-generation token or the context's end. */
  readonly maxTokens?: number;
  /** 0 or undefined: greedy (deterministic). */
  readonly temperature?: number;
  readonly topP?: number;
  readonly seed?: number;
  /** Texts that end the generation; never part of the answer. */
  readonly stop?: readonly string[];
}

/**
 * As OpenAI: "stop" for an end-of-generation token or a stop sequence, "length" for maxTokens or
 * the context's end, "tool_calls" when the answer is calls to tools.
 */
export type FinishReason = "stop" | "length" | "tool_calls";

export interface TokenUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Prompt tokens read from a cached state (a shared prefix) instead of evaluated; part of promptTokens. */
  readonly cachedTokens?: number;
}

/** One generated token: its text, log probability and bytes, and the likeliest alternatives. */
export interface TokenLogprob {
  readonly token: string;
  readonly logprob: number;
  readonly bytes: readonly number[];
  readonly top: readonly {
    readonly token: string;
    readonly logprob: number;
    readonly bytes: readonly number[];
  }[];
}

export interface GenerateResult {
  /** The answer's text ("" when it is only tool calls). */
  readonly text: string;
  /** When asked for (request.logprobs): each generated token's. */
  readonly logprobs?: readonly TokenLogprob[];
  /** The tools the model called (finishReason "tool_calls"). */
  readonly toolCalls?: readonly ToolCall[];
  readonly finishReason: FinishReason;
  readonly usage: TokenUsage;
}

export interface GenerateOptions {
  /** Canceled when the client goes away: stop, free the slot, reject with MP_ERR_REQUEST_CANCELED. */
  readonly cancel?: CancelHandle;
  /** Each new piece of text, in order; never "", never after the promise settles. */
  readonly onDelta?: (text: string) => void;
  /** The caller's place in a trace: prompt and generation spans are its children; an upstream call carries it. */
  readonly trace?: TraceParent | undefined;
  /** Background work (a job): it waits behind every interactive request for a sequence. */
  readonly background?: boolean;
}

/** One input to embed: a text, or token ids of the model's tokenizer (passed on by upstream models). */
export type EmbedInput = string | readonly number[];

export interface EmbedOptions {
  /** Canceled when the client goes away. */
  readonly cancel?: CancelHandle;
  /** Vectors of this many dimensions (an upstream computes them; the route truncates and renormalises the rest). */
  readonly dimensions?: number;
  /** Hears the call's share of the machine time of the batches it was in (ms; local models). */
  readonly onCompute?: (ms: number) => void;
  /** The caller's place in a trace (an upstream call carries it). */
  readonly trace?: TraceParent | undefined;
  /** Background work (a job): it waits behind every interactive request in the model's batcher. */
  readonly background?: boolean;
}

export interface EmbedResult {
  /** One vector per input, in input order. */
  readonly vectors: readonly (Float32Array | readonly number[])[];
  readonly promptTokens: number;
}
