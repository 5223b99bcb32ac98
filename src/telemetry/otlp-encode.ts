// OTLP protobuf encoding of finished spans (opentelemetry-proto trace/v1), written by hand: the
// official serializer (@opentelemetry/otlp-transformer's ProtobufTraceSerializer) only encodes a
// whole ExportTraceServiceRequest from ReadableSpan objects, so using it would mean keeping the
// SDK's spans (or copies of them) until a batch is exported. Here each span is encoded once, when
// it ends (span-processor.ts), as a ScopeSpans.spans entry appended to a growable byte buffer on
// the serving thread: ASCII strings are copied byte by byte, ids are written from their hex
// directly, no intermediate objects are made, and what repeats from span to span is encoded once
// and copied after that (attribute keys, span names, and an attribute whose value is the one it
// had in the span before: the method, the route, the model). The export worker (export-worker.ts)
// wraps a batch of those bytes in ExportTraceServiceRequest → ResourceSpans → ScopeSpans.
// The fields, their order and their presence follow the official serializer (0.223.1), so a
// receiver sees the same messages; test/unit/otlp-encode.test.ts decodes both and compares them.
// Only types come from OpenTelemetry here; both threads import this file.
import type { Attributes, HrTime, Link } from "@opentelemetry/api";
import type { TimedEvent } from "@opentelemetry/sdk-trace-base";
import type { RecordedSpan } from "./span.js";

/** Hex digit → value (0–15), by character code. */
const HEX = new Uint8Array(128);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX[65 + i] = 10 + i;
  HEX[97 + i] = 10 + i;
}

const utf8 = new TextEncoder();
const hasOwn = Object.prototype.hasOwnProperty;
// int64 range of AnyValue.int_value (both bounds are exact doubles); other numbers are doubles.
const MIN_INT64 = -(2 ** 63);
const MAX_INT64 = 2 ** 63;
// Span.flags / Link.flags: the W3C trace flags, plus "whether the parent is remote is known" and "it is".
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

/** Attribute keys and span names, length-prefixed UTF-8 (ProtoWriter.cached). */
const encoded = new Map<string, Uint8Array>();
/** Entries in each cache, and the longest string (or encoded attribute) kept. */
const CACHE_MAX = 1024;
const CACHE_LONGEST = 256;

const varintSize = (v: number): number =>
  v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;

/** A growable protobuf byte buffer; every write makes room for itself. */
export class ProtoWriter {
  buf: Uint8Array;
  pos = 0;
  private view: DataView;

  /**
   * A new buffer of `size` bytes, or `reuse` (an earlier batch's buffer, to fill again); writing
   * starts at `start` (the room wrapRequest() fills in front of a batch).
   */
  constructor(size = 65536, reuse?: ArrayBuffer, start = 0) {
    this.buf = reuse ? new Uint8Array(reuse) : new Uint8Array(Math.max(size, start));
    this.view = new DataView(this.buf.buffer);
    this.pos = start;
  }

  ensure(n: number): void {
    if (this.pos + n > this.buf.length) this.grow(n);
  }

  private grow(n: number): void {
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  byte(v: number): void {
    if (this.pos >= this.buf.length) this.grow(1);
    this.buf[this.pos++] = v;
  }

  /** An unsigned varint below 2^32. */
  varint(v: number): void {
    this.ensure(5);
    const b = this.buf;
    let p = this.pos;
    while (v > 0x7f) {
      b[p++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    b[p++] = v;
    this.pos = p;
  }

  /** An int64 varint (negative numbers in two's complement, ten bytes). */
  int64(v: number): void {
    if (v >= 0 && v <= 0xffffffff) {
      this.varint(v);
      return;
    }
    const a = Math.abs(v);
    let lo = a >>> 0;
    let hi = (a / 0x100000000) >>> 0;
    if (v < 0) {
      lo = (~lo + 1) >>> 0;
      hi = (~hi + (lo === 0 ? 1 : 0)) >>> 0;
    }
    this.ensure(10);
    const b = this.buf;
    let p = this.pos;
    while (hi > 0 || lo > 0x7f) {
      b[p++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    b[p++] = lo;
    this.pos = p;
  }

  fixed32(v: number): void {
    this.ensure(4);
    const b = this.buf;
    const p = this.pos;
    b[p] = v;
    b[p + 1] = v >>> 8;
    b[p + 2] = v >>> 16;
    b[p + 3] = v >>> 24;
    this.pos = p + 4;
  }

  /** An HrTime ([seconds, nanoseconds]) as fixed64 Unix nanoseconds, exactly (no 2^53 rounding). */
  time(t: HrTime): void {
    const s = t[0];
    // s·1e9 + ns = (hi·1e9)·2^16 + (lo16·1e9 + ns), each product below 2^53.
    const lo16 = s % 0x10000;
    const high = Math.floor(s / 0x10000) * 1e9;
    const low = (high % 0x10000) * 0x10000 + lo16 * 1e9 + t[1];
    this.fixed32(low % 0x100000000);
    this.fixed32(Math.floor(high / 0x10000) + Math.floor(low / 0x100000000));
  }

  double(v: number): void {
    this.ensure(8);
    this.view.setFloat64(this.pos, v, true);
    this.pos += 8;
  }

  /** A length-prefixed UTF-8 string: ASCII copied as is, anything else through TextEncoder. */
  string(s: string): void {
    const n = s.length;
    this.ensure(n * 3 + 5);
    const start = this.pos;
    this.varint(n);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c > 0x7f) {
        this.pos = start;
        this.nonAscii(s);
        return;
      }
      b[p++] = c;
    }
    this.pos = p;
  }

  private nonAscii(s: string): void {
    const n = Buffer.byteLength(s, "utf8");
    this.varint(n);
    utf8.encodeInto(s, this.buf.subarray(this.pos, this.pos + n));
    this.pos += n;
  }

  /** Length-prefixed bytes from a hex id (a trace or span id), without an intermediate array. */
  id(hex: string): void {
    const n = hex.length >>> 1;
    this.varint(n);
    this.ensure(n);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < 2 * n; i += 2) b[p++] = (HEX[hex.charCodeAt(i)]! << 4) | HEX[hex.charCodeAt(i + 1)]!;
    this.pos = p;
  }

  raw(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  /**
   * A string through the cache of encoded attribute keys and span names: those repeat from span
   * to span, so each is encoded once and then copied (what does not fit goes through string()).
   */
  cached(s: string): void {
    let e = encoded.get(s);
    if (e === undefined) {
      if (encoded.size >= CACHE_MAX || s.length > CACHE_LONGEST) {
        this.string(s);
        return;
      }
      const w = new ProtoWriter(s.length * 3 + 5);
      w.string(s);
      e = w.buf.slice(0, w.pos);
      encoded.set(s, e);
    }
    this.raw(e);
  }

  bytes(v: Uint8Array): void {
    this.varint(v.length);
    this.ensure(v.length);
    this.buf.set(v, this.pos);
    this.pos += v.length;
  }

  /** Reserves `reserved` bytes for the length of the message that follows; finish() writes it. */
  begin(reserved = 1): number {
    this.ensure(reserved);
    const at = this.pos;
    this.pos += reserved;
    return at;
  }

  /** Writes the length of the message begun at `at`, moving it when its varint is not `reserved` long. */
  finish(at: number, reserved = 1): void {
    const len = this.pos - at - reserved;
    const size = varintSize(len);
    if (size !== reserved) {
      if (size > reserved) this.ensure(size - reserved);
      this.buf.copyWithin(at + size, at + reserved, this.pos);
      this.pos += size - reserved;
    }
    const b = this.buf;
    let p = at;
    let v = len;
    while (v > 0x7f) {
      b[p++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    b[p] = v;
  }
}

function anyValue(w: ProtoWriter, v: unknown): void {
  switch (typeof v) {
    case "string":
      w.byte(0x0a); // string_value
      w.string(v);
      return;
    case "boolean":
      w.byte(0x10); // bool_value
      w.byte(v ? 1 : 0);
      return;
    case "number":
      if (Number.isInteger(v) && v >= MIN_INT64 && v < MAX_INT64) {
        w.byte(0x18); // int_value
        w.int64(v);
      } else {
        w.byte(0x21); // double_value
        w.double(v);
      }
      return;
    case "object":
      if (Array.isArray(v)) {
        w.byte(0x2a); // array_value
        const array = w.begin();
        for (const item of v) {
          w.byte(0x0a); // ArrayValue.values
          const at = w.begin();
          anyValue(w, item);
          w.finish(at);
        }
        w.finish(array);
      } else if (v instanceof Uint8Array) {
        w.byte(0x3a); // bytes_value
        w.bytes(v);
      }
      // null (an array's missing element): an empty AnyValue, as the official serializer writes it.
      return;
  }
}

/** An attribute's last value and its encoded KeyValue (after the tag), for the next span's same attribute. */
class LastValue {
  constructor(
    public value: unknown,
    public bytes: Uint8Array,
    /** Changes of value lately: past a few, the bytes are kept again only now and then. */
    public changes = 0,
  ) {}
}

/**
 * By attribute key: most attributes have the same value span after span (the method, the route,
 * the model, the status), so a KeyValue is copied whole when its value is the one encoded last time.
 */
const lastValues = new Map<string, LastValue>();

/** Each attribute as a KeyValue in the field whose tag byte is `tag`. */
export function writeAttributes(w: ProtoWriter, attributes: Attributes | undefined, tag: number): void {
  if (attributes === undefined) return;
  for (const key in attributes) {
    if (!hasOwn.call(attributes, key)) continue;
    const v = attributes[key];
    const last = lastValues.get(key);
    w.byte(tag);
    if (last !== undefined && last.value === v) {
      if (last.changes > 0) last.changes--;
      w.raw(last.bytes);
      continue;
    }
    const kv = w.begin();
    w.byte(0x0a); // key
    w.cached(key);
    w.byte(0x12); // value
    const value = w.begin();
    anyValue(w, v);
    w.finish(value);
    w.finish(kv);
    // Arrays are not compared; long values are not kept.
    if (typeof v === "object" || w.pos - kv > CACHE_LONGEST) continue;
    if (last === undefined) {
      if (lastValues.size < CACHE_MAX) lastValues.set(key, new LastValue(v, w.buf.slice(kv, w.pos)));
    } else if (++last.changes < 4 || (last.changes & 63) === 0) {
      // A value that changes every time (a request id) stops costing a copy per span.
      last.value = v;
      last.bytes = w.buf.slice(kv, w.pos);
    }
  }
}

function writeEvent(w: ProtoWriter, e: TimedEvent): void {
  w.byte(0x5a); // Span.events
  const at = w.begin();
  w.byte(0x09); // time_unix_nano
  w.time(e.time);
  w.byte(0x12); // name
  w.string(e.name);
  writeAttributes(w, e.attributes, 0x1a);
  w.byte(0x20); // dropped_attributes_count
  w.varint(e.droppedAttributesCount ?? 0);
  w.finish(at);
}

/** trace_id, span_id and trace_state: fields 1 to 3 of both Span and Span.Link. */
function writeIds(w: ProtoWriter, traceId: string, spanId: string, state: string | undefined): void {
  w.byte(0x0a); // trace_id
  w.id(traceId);
  w.byte(0x12); // span_id
  w.id(spanId);
  if (state) {
    w.byte(0x1a); // trace_state
    w.string(state);
  }
}

function writeLink(w: ProtoWriter, l: Link): void {
  const c = l.context;
  w.byte(0x6a); // Span.links
  const at = w.begin();
  writeIds(w, c.traceId, c.spanId, c.traceState?.serialize());
  writeAttributes(w, l.attributes, 0x22);
  w.byte(0x28); // dropped_attributes_count
  w.varint(l.droppedAttributesCount ?? 0);
  w.byte(0x35); // flags
  w.fixed32((c.traceFlags & 0xff) | HAS_IS_REMOTE | (c.isRemote ? IS_REMOTE : 0));
  w.finish(at);
}

/** Appends `span` as one ScopeSpans.spans entry (field 2: its tag, length and Span message). */
export function writeSpan(w: ProtoWriter, span: RecordedSpan): void {
  const parent = span.parent;
  w.byte(0x12); // ScopeSpans.spans
  const at = w.begin(2); // most spans are 128 bytes to 16 KiB long
  writeIds(w, span.traceId, span.spanId, span.state);
  if (parent !== undefined) {
    w.byte(0x22); // parent_span_id
    w.id(parent.spanId);
  }
  w.byte(0x2a); // name
  w.cached(span.name);
  // SpanKind is one less than OTLP's (which has UNSPECIFIED at 0).
  if (span.kind != null) {
    w.byte(0x30); // kind
    w.varint(span.kind + 1);
  }
  w.byte(0x39); // start_time_unix_nano
  w.time(span.startTime);
  w.byte(0x41); // end_time_unix_nano
  w.time(span.endTime);
  writeAttributes(w, span.attributes, 0x4a);
  w.byte(0x50); // dropped_attributes_count
  w.varint(span.droppedAttributesCount);
  for (const e of span.events) writeEvent(w, e);
  w.byte(0x60); // dropped_events_count
  w.varint(span.droppedEventsCount);
  for (const l of span.links) writeLink(w, l);
  w.byte(0x70); // dropped_links_count
  w.varint(span.droppedLinksCount);
  w.byte(0x7a); // status
  const status = w.begin();
  if (span.status.message) {
    w.byte(0x12); // message
    w.string(span.status.message);
  }
  w.byte(0x18); // code
  w.varint(span.status.code);
  w.finish(status);
  w.byte(0x85); // flags (field 16, fixed32: a two-byte tag)
  w.byte(0x01);
  w.fixed32((span.flags & 0xff) | HAS_IS_REMOTE | (parent?.remote ? IS_REMOTE : 0));
  w.finish(at, 2);
}

/** What every request of a process starts with: its ResourceSpans.resource and ScopeSpans.scope fields. */
export interface RequestHead {
  resource: Uint8Array;
  scope: Uint8Array;
}

export function requestHead(resource: Attributes, scope: { name: string; version?: string }): RequestHead {
  const r = new ProtoWriter(1024);
  r.byte(0x0a); // ResourceSpans.resource
  const res = r.begin();
  writeAttributes(r, resource, 0x0a);
  r.byte(0x10); // dropped_attributes_count
  r.byte(0);
  r.finish(res);
  const s = new ProtoWriter(256);
  s.byte(0x0a); // ScopeSpans.scope
  const sc = s.begin();
  s.byte(0x0a); // name
  s.string(scope.name);
  if (scope.version) {
    s.byte(0x12); // version
    s.string(scope.version);
  }
  s.finish(sc);
  return { resource: r.buf.slice(0, r.pos), scope: s.buf.slice(0, s.pos) };
}

/** The bytes wrapRequest() may write in front of a batch's spans: reserve them when encoding it. */
export function headRoom(head: RequestHead): number {
  // Two tags, two lengths of at most five bytes, the resource and the scope.
  return 12 + head.resource.length + head.scope.length;
}

/**
 * One ExportTraceServiceRequest around the spans in `buf` from `start` to `end` (writeSpan's
 * output, one or more spans), written in place: a ResourceSpans with this process's resource,
 * holding one ScopeSpans with its scope, goes in the headRoom() bytes before `start`, so a batch
 * is sent from the buffer it was encoded into, without a copy.
 */
export function wrapRequest(head: RequestHead, buf: Uint8Array, start: number, end: number): Uint8Array {
  const scopeSpans = head.scope.length + (end - start);
  const resourceSpans = head.resource.length + 1 + varintSize(scopeSpans) + scopeSpans;
  const from =
    start -
    (2 + varintSize(resourceSpans) + head.resource.length + varintSize(scopeSpans) + head.scope.length);
  if (from < 0) throw new RangeError("no room for the request's head before the spans");
  const w = new ProtoWriter(0, buf.buffer as ArrayBuffer, buf.byteOffset + from);
  w.byte(0x0a); // ExportTraceServiceRequest.resource_spans
  w.varint(resourceSpans);
  w.raw(head.resource);
  w.byte(0x12); // ResourceSpans.scope_spans
  w.varint(scopeSpans);
  w.raw(head.scope);
  return new Uint8Array(buf.buffer, buf.byteOffset + from, end - from);
}
