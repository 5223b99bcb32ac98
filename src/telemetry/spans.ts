// The spans modelport makes: their stable names and attribute keys, and the one way every layer
// starts and ends one. Whether tracing is on is one boolean (`tracing.on`), read at each call
// site before anything else is done, so a server with tracing off makes no span objects and
// runs no OpenTelemetry code: this file only imports OpenTelemetry's types, and the SDK behind
// `tracing.factory` is loaded by tracing.ts only when tracing is configured.
import type { Attributes, Span, SpanKind, TimeInput } from "@opentelemetry/api";
import type { TraceParent } from "./propagation.js";

export type { Attributes, Span } from "@opentelemetry/api";

/** Span names (docs/Tracing.md lists them; dashboards and tests depend on them: keep them stable). */
export const SPAN = {
  decode: "modelport.decode",
  queue: "modelport.queue",
  batch: "modelport.batch",
  infer: "modelport.infer",
  encode: "modelport.encode",
  jobAttempt: "modelport.job.attempt",
  llmPrompt: "modelport.llm.prompt",
  llmGenerate: "modelport.llm.generate",
  webhook: "modelport.webhook",
} as const;

/** Attribute keys of modelport's own (the HTTP and RPC ones follow the semantic conventions). */
export const ATTR = {
  model: "modelport.model",
  version: "modelport.model.version",
  requestId: "modelport.request_id",
  rows: "modelport.rows",
  batchRows: "modelport.batch.rows",
  batchRequests: "modelport.batch.requests",
  inline: "modelport.inline",
  jobId: "modelport.job.id",
  jobAttempt: "modelport.job.attempt",
  /** decode, queue and encode shorter than tracing.stageMs: their duration on the request's span. */
  decodeMs: "modelport.decode.duration_ms",
  queueMs: "modelport.queue.duration_ms",
  encodeMs: "modelport.encode.duration_ms",
  promptTokens: "gen_ai.usage.input_tokens",
  completionTokens: "gen_ai.usage.output_tokens",
} as const;

// SpanKind's values, without loading @opentelemetry/api for its enum.
export const KIND = {
  internal: 0 as SpanKind,
  server: 1 as SpanKind,
  client: 2 as SpanKind,
  consumer: 4 as SpanKind,
} as const;

/** What tracing.ts installs once the SDK is loaded. */
export interface SpanFactory {
  start(
    name: string,
    kind: SpanKind,
    parent: TraceParent | undefined,
    attributes: Attributes | undefined,
    links: readonly TraceParent[] | undefined,
    startTime?: TimeInput,
  ): Span;
  /** Sets an attribute on the span that made `parent` (via parentOf), while it is open. */
  annotate(parent: TraceParent, key: string, value: number): void;
  /** The parent `span` makes for the spans and calls under it. */
  parentOf(span: Span): TraceParent;
}

/**
 * `on` is true once the SDK is loaded and exporting; read it before calling anything below.
 * `stageMs`: decode, queue and encode taking less than this (ms, MODELPORT_TRACE_STAGE_MS) are
 * recorded as a duration attribute on the request's span instead of a span of their own.
 */
export const tracing: { on: boolean; factory: SpanFactory | undefined; stageMs: number } = {
  on: false,
  factory: undefined,
  stageMs: 0,
};

/**
 * Starts a span (call only when `tracing.on`): a child of `parent`, or the root of a new trace
 * without one; `links` name the other spans it relates to (the requests a batch joined, the
 * request that submitted a job). `attributes` may become the span's own object: pass a fresh one
 * each time and do not change it afterwards.
 */
export function startSpan(
  name: string,
  parent: TraceParent | undefined,
  attributes?: Attributes,
  kind: SpanKind = KIND.internal,
  links?: readonly TraceParent[],
): Span {
  return tracing.factory!.start(name, kind, parent, attributes, links);
}

/**
 * A request's stage (decode, queue, encode) that began at `startedAt` (performance.now()) and
 * ends now (call only when `tracing.on`): its own span, back-dated, when it failed or took at
 * least `tracing.stageMs`; otherwise `durationKey` (ms) on the span of `parent`. Spans cost the
 * serving thread several microseconds each, so the common, fast stages cost an attribute (and
 * `attributes`, the span's, are only made for a span).
 */
export function stage(
  name: string,
  durationKey: string,
  parent: TraceParent | undefined,
  startedAt: number,
  attributes?: () => Attributes,
  err?: unknown,
): void {
  const now = performance.now();
  const ms = now - startedAt;
  if (err === undefined && ms < tracing.stageMs) {
    if (parent !== undefined) tracing.factory!.annotate(parent, durationKey, Math.round(ms * 1000) / 1000);
    return;
  }
  const span = tracing.factory!.start(name, KIND.internal, parent, attributes?.(), undefined, startedAt);
  if (err !== undefined) endSpan(span, err, now);
  else span.end(now);
}

/** The parent that `span` makes for the spans and calls under it. */
export function parentOf(span: Span): TraceParent {
  return tracing.factory!.parentOf(span);
}

/** Ends `span`, marked as an error (status ERROR, the exception recorded) when `err` is given. */
export function endSpan(span: Span, err?: unknown, endTime?: number): void {
  if (err !== undefined) {
    const e = err instanceof Error ? err : new Error(String(err));
    span.recordException(e);
    const code = (err as { code?: unknown }).code;
    if (typeof code === "string") span.setAttribute("error.type", code);
    span.setStatus({ code: 2, message: e.message });
  }
  span.end(endTime);
}

/** Runs `work` inside a span under `parent` when tracing is on (a plain call otherwise). */
export async function traced<T>(
  name: string,
  parent: TraceParent | undefined,
  attributes: Attributes | undefined,
  work: (parent: TraceParent | undefined) => Promise<T>,
): Promise<T> {
  if (!tracing.on) return work(parent);
  const span = startSpan(name, parent, attributes);
  try {
    const out = await work(parentOf(span));
    span.end();
    return out;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}
