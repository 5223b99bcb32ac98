// W3C Trace Context (https://www.w3.org/TR/trace-context/) on the wire: reading a `traceparent`
// and `tracestate` a caller sent (HTTP headers, gRPC metadata) and writing them on the calls
// modelport makes (runners, upstream APIs, webhooks), and the form a job record keeps them in.
// Plain strings and one regular expression: nothing here loads OpenTelemetry, so a server with
// tracing off can still pass a client's trace on at the cost of reading a header.

/** Where a piece of work sits in a trace: the span to parent (or link) the next span to. */
export interface TraceParent {
  /** 32 lowercase hex digits, not all zero. */
  readonly traceId: string;
  /** 16 lowercase hex digits, not all zero. */
  readonly spanId: string;
  /** W3C trace-flags; bit 0 is "sampled". */
  readonly flags: number;
  /** The `tracestate` header as received or produced, when there is one. */
  readonly state?: string;
  /** Read from a caller (a header, metadata or a job record), not a span of this process. */
  readonly remote?: true;
}

/** The two W3C headers as stored with a job (both stores keep this object as JSON text). */
export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
}

export const TRACEPARENT = "traceparent";
export const TRACESTATE = "tracestate";

// version 00 exactly; a later version may carry more fields after the flags (the spec: read the
// first four, ignore the rest). Version ff is invalid.
const TRACEPARENT_RE = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = "00000000000000000000000000000000";
const ZERO_SPAN = "0000000000000000";
/** tracestate: at most 32 list members; a longer header is dropped rather than cut (the spec allows either). */
const MAX_TRACESTATE_CHARS = 512;

/** One header value, whatever the transport gave (a repeated header: the first). */
function single(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === "string" ? value : value?.[0];
}

/**
 * The caller's trace, or undefined when `traceparent` is absent or malformed (then the trace
 * starts here, as the spec says). A malformed `tracestate` is dropped, the parent kept.
 */
export function parseTraceParent(
  traceparent: string | readonly string[] | undefined,
  tracestate?: string | readonly string[] | undefined,
): TraceParent | undefined {
  const header = single(traceparent)?.trim();
  if (header === undefined || header.length > 512) return undefined;
  const m = TRACEPARENT_RE.exec(header);
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  const state = single(tracestate)?.trim();
  const keep =
    state !== undefined && state !== "" && state.length <= MAX_TRACESTATE_CHARS && !/[\r\n]/.test(state);
  return {
    traceId: traceId!,
    spanId: spanId!,
    flags: Number.parseInt(flags!, 16),
    remote: true,
    ...(keep ? { state } : {}),
  };
}

/** The `traceparent` header value for `parent` (version 00). */
export function formatTraceParent(parent: TraceParent): string {
  return `00-${parent.traceId}-${parent.spanId}-${(parent.flags & 0xff).toString(16).padStart(2, "0")}`;
}

/** The headers to send for `parent`, added to `headers` (which is returned). */
export function injectTrace<T extends Record<string, string>>(
  headers: T,
  parent: TraceParent | undefined,
): T {
  if (parent === undefined) return headers;
  (headers as Record<string, string>)[TRACEPARENT] = formatTraceParent(parent);
  if (parent.state !== undefined) (headers as Record<string, string>)[TRACESTATE] = parent.state;
  return headers;
}

/** What a job record keeps of `parent`. */
export function traceHeaders(parent: TraceParent): TraceHeaders {
  return {
    traceparent: formatTraceParent(parent),
    ...(parent.state !== undefined ? { tracestate: parent.state } : {}),
  };
}

/** The parent a job record's headers name (undefined for a record written without one, or a bad one). */
export function fromTraceHeaders(headers: TraceHeaders | undefined): TraceParent | undefined {
  return headers === undefined ? undefined : parseTraceParent(headers.traceparent, headers.tracestate);
}
