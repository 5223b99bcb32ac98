// modelport's span: the OpenTelemetry API's `Span` as the SDK's `SpanImpl` implements it (the same
// attribute, event and link limits, dropped counts, status rules, exception events and clock), and
// the SDK's `ReadableSpan` for exporters, made for the serving thread's hot path: the span is its
// own span context's fields (no SpanContext, TraceState or HrTime object unless one is asked for),
// times are performance.now() numbers until they are read, and ending it hands it to the span
// processor (span-processor.ts), which encodes it at once. Measured against the SDK's Tracer and
// SpanImpl in docs/PERFORMANCE.md ("Tracing"); test/unit/otlp-encode.test.ts checks that the same
// calls on both give the same exported span.
import {
  type Attributes,
  type AttributeValue,
  createTraceState,
  diag,
  type Exception,
  type HrTime,
  type Link,
  type Span,
  type SpanContext,
  type SpanKind,
  type SpanStatus,
  type TimeInput,
} from "@opentelemetry/api";
import type { Resource } from "@opentelemetry/resources";
import type { ReadableSpan, TimedEvent } from "@opentelemetry/sdk-trace-base";
import type { TraceParent } from "./propagation.js";
import type { SpanLimits } from "./settings.js";

/** What every span of a process shares: where it goes when it ends, its limits, resource and scope. */
export interface SpanHome {
  /** Called with each sampled span as it ends. */
  onEnd(span: RecordedSpan): void;
  readonly limits: SpanLimits;
  readonly resource: Resource;
  readonly scope: { name: string; version?: string };
}

// The clock: performance.now() plus the offset to Unix time, as the SDK's spans read it
// (Date.now() − performance.now(), which follows the wall clock's adjustments), refreshed every
// REFRESH spans rather than read per span. Kept as whole seconds plus milliseconds so converting a
// span's time to nanoseconds loses nothing to the size of a Unix timestamp in milliseconds.
const REFRESH = 1024;
let offsetSeconds = 0;
let offsetMs = 0;
let sinceRefresh = REFRESH;
function refreshClock(): void {
  const offset = Date.now() - performance.now();
  offsetSeconds = Math.floor(offset / 1000);
  offsetMs = offset - offsetSeconds * 1000;
  sinceRefresh = 0;
}

/** A performance.now() time as Unix time [seconds, nanoseconds]. */
function hrTimeOf(ms: number): HrTime {
  const rest = offsetMs + ms;
  const seconds = Math.floor(rest / 1000);
  let ns = Math.round((rest - seconds * 1000) * 1e6);
  let s = offsetSeconds + seconds;
  if (ns >= 1e9) {
    s++;
    ns -= 1e9;
  }
  return [s, ns];
}

/** A time the API accepts as a performance.now() time, or the HrTime it was given. */
function timeOf(t: TimeInput): number | HrTime {
  if (typeof t === "number") return t <= performance.now() ? t : t - offsetSeconds * 1000 - offsetMs;
  if (t instanceof Date) return t.getTime() - offsetSeconds * 1000 - offsetMs;
  return t;
}
const msOf = (t: number | HrTime): number =>
  typeof t === "number" ? t : (t[0] - offsetSeconds) * 1000 + t[1] / 1e6 - offsetMs;
const hrOf = (t: number | HrTime): HrTime => (typeof t === "number" ? hrTimeOf(t) : t);
const isTime = (t: unknown): t is TimeInput =>
  typeof t === "number" ||
  t instanceof Date ||
  (Array.isArray(t) && t.length === 2 && typeof t[0] === "number" && typeof t[1] === "number");

/** The SDK's rule (core's isAttributeValue): a primitive, or an array of one primitive type with holes. */
function validValue(v: unknown): v is AttributeValue {
  const t = typeof v;
  if (t === "string" || t === "number" || t === "boolean") return true;
  if (!Array.isArray(v)) return false;
  let type: string | undefined;
  for (const item of v) {
    if (item == null) continue;
    const it = typeof item;
    if (type === undefined) {
      if (it !== "string" && it !== "number" && it !== "boolean") return false;
      type = it;
    } else if (it !== type) return false;
  }
  return true;
}

/** The API's SpanContext of a TraceParent (a link's, a parent's). */
export function spanContextOf(p: TraceParent): SpanContext {
  const c: SpanContext = {
    traceId: p.traceId,
    spanId: p.spanId,
    traceFlags: p.flags,
    isRemote: p.remote === true,
  };
  if (p.state !== undefined) c.traceState = createTraceState(p.state);
  return c;
}

const hasOwn = Object.prototype.hasOwnProperty;
const UNSET: SpanStatus = Object.freeze({ code: 0 });
const NONE: readonly never[] = Object.freeze([]);

/** Attributes within `limit` entries and `length` characters, as the SDK sanitizes event and link attributes. */
function limited(
  attributes: Attributes | undefined,
  limit: number,
  length: number,
): { attributes: Attributes; dropped: number; count: number } {
  const out: Attributes = {};
  let count = 0;
  let dropped = 0;
  for (const key in attributes) {
    if (!hasOwn.call(attributes, key)) continue;
    const v = attributes[key];
    if (v == null || key.length === 0 || !validValue(v)) continue;
    if (count >= limit) {
      dropped++;
      continue;
    }
    out[key] = truncate(v, length);
    count++;
  }
  return { attributes: out, dropped, count };
}

function truncate(v: AttributeValue, length: number): AttributeValue {
  if (length === Number.POSITIVE_INFINITY) return v;
  if (typeof v === "string") return v.length <= length ? v : v.slice(0, length);
  if (Array.isArray(v))
    return v.map((x: unknown) =>
      typeof x === "string" && x.length > length ? x.slice(0, length) : x,
    ) as AttributeValue;
  return v;
}

export class RecordedSpan implements Span, ReadableSpan {
  name: string;
  attributes: Attributes = {};
  links: Link[] = NONE as never;
  events: TimedEvent[] = NONE as never;
  status: SpanStatus = UNSET;
  private attributeCount = 0;
  private droppedAttributes = 0;
  private droppedEvents = 0;
  private droppedLinks = 0;
  private readonly start: number | HrTime;
  private stop: number | HrTime | undefined;
  private context: SpanContext | undefined;

  constructor(
    private readonly home: SpanHome,
    name: string,
    readonly kind: SpanKind,
    readonly traceId: string,
    readonly spanId: string,
    /** W3C trace flags: 1 (sampled, recording) or 0 (not recorded: every call below does nothing). */
    readonly flags: number,
    /** The trace state, as its header value. */
    readonly state: string | undefined,
    /** The span this one is a child of (in this process or a caller's), none for a root span. */
    readonly parent: TraceParent | undefined,
    start: TimeInput | undefined,
  ) {
    this.name = name;
    if (++sinceRefresh >= REFRESH) refreshClock();
    this.start = start === undefined ? performance.now() : timeOf(start);
  }

  spanContext(): SpanContext {
    if (this.context === undefined) {
      const c: SpanContext = {
        traceId: this.traceId,
        spanId: this.spanId,
        traceFlags: this.flags,
        isRemote: false,
      };
      if (this.state !== undefined) c.traceState = createTraceState(this.state);
      this.context = c;
    }
    return this.context;
  }

  /** Recording and not ended; otherwise the call is ignored (and, once ended, warned about, as the SDK does). */
  private open(): boolean {
    if (this.stop === undefined) return this.flags === 1;
    diag.warn(
      `Cannot execute the operation on ended Span {traceId: ${this.traceId}, spanId: ${this.spanId}}`,
    );
    return false;
  }

  setAttribute(key: string, value: AttributeValue | undefined): this {
    if (value == null || !this.open()) return this;
    if (key.length === 0) {
      diag.warn(`Invalid attribute key: ${key}`);
      return this;
    }
    if (!validValue(value)) {
      diag.warn(`Invalid attribute value set for key: ${key}`);
      return this;
    }
    const attributes = this.attributes;
    if (!hasOwn.call(attributes, key)) {
      if (this.attributeCount >= this.home.limits.attributeCount) {
        this.droppedAttributes++;
        return this;
      }
      this.attributeCount++;
    }
    attributes[key] = truncate(value, this.home.limits.attributeValueLength);
    return this;
  }

  setAttributes(attributes: Attributes): this {
    for (const key in attributes) if (hasOwn.call(attributes, key)) this.setAttribute(key, attributes[key]);
    return this;
  }

  /**
   * A new span's first attributes: `attributes` becomes the span's own object (its maker gives it
   * up) when setAttributes would keep every entry as it is, which saves a copy per span; otherwise
   * they are set one by one.
   */
  adopt(attributes: Attributes): void {
    const limits = this.home.limits;
    let count = 0;
    for (const key in attributes) {
      const v = attributes[key];
      const t = typeof v;
      if (
        key.length === 0 ||
        !hasOwn.call(attributes, key) ||
        !(
          t === "number" ||
          t === "boolean" ||
          (t === "string" && (v as string).length <= limits.attributeValueLength)
        )
      ) {
        this.setAttributes(attributes);
        return;
      }
      count++;
    }
    if (count > limits.attributeCount || this.flags !== 1) {
      this.setAttributes(attributes);
      return;
    }
    this.attributes = attributes;
    this.attributeCount = count;
  }

  addEvent(name: string, attributesOrTime?: Attributes | TimeInput, time?: TimeInput): this {
    if (!this.open()) return this;
    const limits = this.home.limits;
    if (limits.eventCount === 0) {
      this.droppedEvents++;
      return this;
    }
    if ((this.events as unknown) === NONE) this.events = [];
    else if (this.events.length >= limits.eventCount) {
      this.events.shift();
      this.droppedEvents++;
    }
    let attributes: Attributes | undefined;
    if (isTime(attributesOrTime)) time ??= attributesOrTime;
    else attributes = attributesOrTime;
    const a = limited(attributes, limits.attributePerEvent, limits.attributeValueLength);
    this.events.push({
      name,
      attributes: a.attributes,
      time: hrOf(time === undefined ? performance.now() : timeOf(time)),
      droppedAttributesCount: a.dropped,
    });
    return this;
  }

  addLink(link: Link): this {
    if (!this.open()) return this;
    const limits = this.home.limits;
    if (limits.linkCount === 0) {
      this.droppedLinks++;
      return this;
    }
    if ((this.links as unknown) === NONE) this.links = [];
    else if (this.links.length >= limits.linkCount) {
      this.links.shift();
      this.droppedLinks++;
    }
    if (link.attributes === undefined) {
      this.links.push({ context: link.context });
      return this;
    }
    const a = limited(link.attributes, limits.attributePerLink, limits.attributeValueLength);
    const kept: Link = { context: link.context };
    if (a.count > 0) kept.attributes = a.attributes;
    if (a.dropped > 0) kept.droppedAttributesCount = a.dropped;
    this.links.push(kept);
    return this;
  }

  addLinks(links: Link[]): this {
    for (const l of links) this.addLink(l);
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (!this.open() || status.code === 0 || this.status.code === 1) return this;
    const next: SpanStatus = { code: status.code };
    if (status.code === 2 && typeof status.message === "string") next.message = status.message;
    this.status = next;
    return this;
  }

  updateName(name: string): this {
    if (this.open()) this.name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.stop !== undefined) {
      diag.error(`${this.name} ${this.traceId}-${this.spanId} - You can only call end() on a span once.`);
      return;
    }
    let stop = endTime === undefined ? performance.now() : timeOf(endTime);
    if (msOf(stop) < msOf(this.start)) stop = this.start;
    this.stop = stop;
    if (this.flags === 1) this.home.onEnd(this);
  }

  isRecording(): boolean {
    return this.flags === 1 && this.stop === undefined;
  }

  recordException(exception: Exception, time?: TimeInput): void {
    const attributes: Attributes = {};
    if (typeof exception === "string") attributes["exception.message"] = exception;
    else if (exception) {
      if (exception.code) attributes["exception.type"] = exception.code.toString();
      else if (exception.name) attributes["exception.type"] = exception.name;
      if (exception.message) attributes["exception.message"] = exception.message;
      if (exception.stack) attributes["exception.stacktrace"] = exception.stack;
    }
    if (attributes["exception.type"] || attributes["exception.message"])
      this.addEvent("exception", attributes, time);
    else diag.warn(`Failed to record an exception ${exception}`);
  }

  // ReadableSpan, for exporters and tests.
  get startTime(): HrTime {
    return hrOf(this.start);
  }
  get endTime(): HrTime {
    return this.stop === undefined ? [0, 0] : hrOf(this.stop);
  }
  get duration(): HrTime {
    if (this.stop === undefined) return [-1, -1];
    const ns = Math.round((msOf(this.stop) - msOf(this.start)) * 1e6);
    return [Math.floor(ns / 1e9), ns % 1e9];
  }
  get ended(): boolean {
    return this.stop !== undefined;
  }
  get parentSpanContext(): SpanContext | undefined {
    return this.parent === undefined ? undefined : spanContextOf(this.parent);
  }
  get droppedAttributesCount(): number {
    return this.droppedAttributes;
  }
  get droppedEventsCount(): number {
    return this.droppedEvents;
  }
  get droppedLinksCount(): number {
    return this.droppedLinks;
  }
  get resource(): Resource {
    return this.home.resource;
  }
  get instrumentationScope(): { name: string; version?: string } {
    return this.home.scope;
  }
}
