// modelport's spans and their encoding against OpenTelemetry's own. (1) The hand-written OTLP span
// encoder (src/telemetry/otlp-encode.ts) against the official one: the same spans are encoded by
// both (@opentelemetry/otlp-transformer's ProtobufTraceSerializer and writeSpan + wrapRequest),
// both requests are decoded with protobufjs from every field the encoder writes, and the decoded
// messages must be equal. The spans cover a root span and a remote parent with a trace state,
// every attribute value type, non-ASCII strings, events, links with trace states and attributes,
// error and ok status, dropped counts and a span over 16 KiB. (2) modelport's span
// (src/telemetry/span.ts) against the SDK's SpanImpl: the same calls, limits included, must export
// the same span; and its sampling against the SDK's samplers. (3) The span processor
// (src/telemetry/span-processor.ts) against a stand-in for the export worker: batch size, schedule
// delay, queue limit, flush and shutdown.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createTraceState, ROOT_CONTEXT, type Span, type SpanContext, trace } from "@opentelemetry/api";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  ParentBasedSampler,
  type ReadableSpan,
  type Sampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import protobuf from "protobufjs";
import {
  headRoom,
  ProtoWriter,
  requestHead,
  wrapRequest,
  writeSpan,
} from "../../src/telemetry/otlp-encode.js";
import type { TraceParent } from "../../src/telemetry/propagation.js";
import { createSpanFactory, sampling } from "../../src/telemetry/sdk.js";
import {
  type BatchSettings,
  SAMPLERS,
  type SamplerName,
  type SpanLimits,
  tracingSettings,
} from "../../src/telemetry/settings.js";
import type { RecordedSpan, SpanHome } from "../../src/telemetry/span.js";
import { type BatchSink, OtlpSpanProcessor } from "../../src/telemetry/span-processor.js";

// opentelemetry-proto (collector/trace/v1, trace/v1, common/v1, resource/v1): every field written.
const PROTO = `
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message InstrumentationScope {
  string name = 1; string version = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4;
}
message KeyValue { string key = 1; AnyValue value = 2; }
message KeyValueList { repeated KeyValue values = 1; }
message AnyValue {
  oneof value {
    string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4;
    ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
  string name = 5; int32 kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9; uint32 dropped_attributes_count = 10;
  repeated Event events = 11; uint32 dropped_events_count = 12;
  repeated Link links = 13; uint32 dropped_links_count = 14; Status status = 15; fixed32 flags = 16;
}
message Event {
  fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4;
}
message Link {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4;
  uint32 dropped_attributes_count = 5; fixed32 flags = 6;
}
message Status { string message = 2; int32 code = 3; }
`;
const Request = protobuf.parse(PROTO).root.lookupType("otlp.ExportTraceServiceRequest");

/** The decoded request as a plain object: 64-bit integers as strings, bytes as hex, defaults and oneof names shown. */
function decode(bytes: Uint8Array): unknown {
  const object = Request.toObject(Request.decode(bytes), {
    longs: String,
    bytes: String,
    defaults: true,
    arrays: true,
    oneofs: true,
  });
  return JSON.parse(
    JSON.stringify(object, (_k, v) => (typeof v === "number" && Number.isNaN(v) ? "NaN" : v)),
  );
}

/** modelport's span factory (src/telemetry/sdk.ts) over a home that keeps every ended span. */
function recorder(options: { sampled?: boolean; limits?: Partial<SpanLimits> } = {}) {
  const ended: RecordedSpan[] = [];
  const home: SpanHome = {
    onEnd: (s) => void ended.push(s),
    limits: { ...DEFAULT_LIMITS, attributeCount: 40, eventCount: 3, linkCount: 3, ...options.limits },
    resource: resourceFromAttributes({ "service.name": "tést", "service.version": "1.2.3", "host.cores": 2 }),
    scope: { name: "modelport-test", version: "9.9.9" },
  };
  const sampler = options.sampled === false ? "always_off" : "always_on";
  return { factory: createSpanFactory(sampling({ sampler, ratio: 1 }), home), ended };
}

const DEFAULT_LIMITS = tracingSettings({ OTEL_TRACES_EXPORTER: "otlp" })!.limits;

const REMOTE: TraceParent = {
  traceId: "0af7651916cd43dd8448eb211c80319c",
  spanId: "b7ad6b7169203331",
  flags: 1,
  state: "vendor=v1,other=1",
  remote: true,
};

function makeSpans(): RecordedSpan[] {
  const { factory, ended } = recorder();
  // A root span with every attribute value type and non-ASCII text.
  const root = factory.start(
    "POST /v1/models/{model}/predict",
    1,
    undefined,
    {
      "http.request.method": "POST",
      "http.response.status_code": 200,
      "modelport.model": "modèle-日本-🙂",
      "clé.non-ascii": "x",
      "bool.true": true,
      "bool.false": false,
      "int.zero": 0,
      "int.big": 2 ** 40 + 3,
      "int.negative": -42,
      "int.most-negative": -(2 ** 63),
      "int.past-int64": 2 ** 63,
      "double.fraction": 3.25,
      "double.negative": -0.5,
      "double.nan": Number.NaN,
      "double.infinity": Number.POSITIVE_INFINITY,
      "array.strings": ["a", "bé", ""],
      "array.ints": [1, -2, 3_000_000_000],
      "array.doubles": [1.5, -2.25],
      "array.bools": [true, false],
      "array.with-null": ["x", null, "y"],
      "array.empty": [],
      "string.long": "l".repeat(300),
      "string.empty": "",
      "string.lone-surrogate": "a\ud800b",
    },
    undefined,
  );
  root.addEvent("retry", { attempt: 2, "raison.é": "délai" }, [1_764_000_000, 123_456_789]);
  root.recordException(new Error("panne réseau — ⚡"));
  root.setStatus({ code: 2, message: "échec: upstream 503" });
  root.end();
  // A child of a remote parent with a trace state, with links (trace states, attributes).
  const linked = factory.start("modelport.batch", 0, REMOTE, { "modelport.batch.rows": 3 }, [
    REMOTE,
    factory.parentOf(root),
  ]);
  linked.addLink({
    context: {
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      traceFlags: 0,
      traceState: createTraceState("a=b"),
    },
    attributes: { "link.kind": "joined", n: 1 },
  });
  linked.end();
  // A local child with status OK, no attributes, an explicit start and end time.
  const child = factory.start(
    "modelport.infer",
    0,
    factory.parentOf(root),
    undefined,
    undefined,
    [1_764_000_000, 5],
  );
  child.setStatus({ code: 1 });
  child.end([1_764_000_001, 999_999_999]);
  // Over every limit: dropped attributes, events and links; over 16 KiB (a three-byte length).
  const big = factory.start(
    "big",
    4,
    undefined,
    undefined,
    Array.from({ length: 5 }, (_, i) => ({ ...REMOTE, spanId: `00000000000000${i}${i}` })),
  );
  for (let i = 0; i < 45; i++) big.setAttribute(`attr.${i}`, i % 2 === 0 ? "v".repeat(800) : i);
  for (let i = 0; i < 5; i++) big.addEvent(`event ${i}`);
  big.end();
  // Client and producer kinds, a trace state copied from the remote parent.
  for (const kind of [2, 3]) factory.start(`kind ${kind}`, kind, REMOTE, undefined, undefined).end();
  return ended;
}

function encodeOurs(spans: readonly RecordedSpan[], size = 64): Uint8Array {
  const first = spans[0]!;
  const head = requestHead(first.resource.attributes, first.instrumentationScope);
  const room = headRoom(head);
  const writer = new ProtoWriter(size, undefined, room);
  for (const s of spans) writeSpan(writer, s);
  return wrapRequest(head, writer.buf, room, writer.pos);
}

describe("the OTLP span encoder", () => {
  it("encodes the same request as the official serializer, decoded field by field", () => {
    const spans = makeSpans();
    assert.equal(spans.length, 6);
    const big = spans.find((s) => s.name === "big")!;
    assert.ok(big.droppedAttributesCount > 0 && big.droppedEventsCount > 0 && big.droppedLinksCount > 0);
    const official = ProtobufTraceSerializer.serializeRequest(spans)!;
    const ours = encodeOurs(spans);
    assert.ok(ours.length > 16 * 1024);
    assert.deepStrictEqual(decode(ours), decode(official));
    // Same fields in the same order with the same (shortest) lengths: the bytes match too.
    assert.ok(Buffer.from(ours).equals(Buffer.from(official)));
    // Again, now that every key, name and repeated attribute is cached.
    const twice = [...spans, ...spans];
    const again = encodeOurs(twice);
    assert.deepStrictEqual(decode(again), decode(ProtobufTraceSerializer.serializeRequest(twice)!));
  });

  it("encodes each span alone the same way (a root span, a remote parent, each kind)", () => {
    for (const span of makeSpans()) {
      const official = ProtobufTraceSerializer.serializeRequest([span])!;
      assert.deepStrictEqual(decode(encodeOurs([span])), decode(official), span.name);
    }
  });

  it("writes what the receiver reads: ids, parent, remote flag, times in nanoseconds", () => {
    const spans = makeSpans();
    const decoded = decode(encodeOurs(spans)) as {
      resourceSpans: { scopeSpans: { scope: { name: string }; spans: Record<string, any>[] }[] }[];
    };
    const out = decoded.resourceSpans[0]!.scopeSpans[0]!;
    assert.equal(out.scope.name, "modelport-test");
    const [root, linked, child] = out.spans;
    const b64hex = (s: string) => Buffer.from(s, "base64").toString("hex");
    assert.equal(b64hex(root!.traceId), spans[0]!.traceId);
    assert.equal(root!.parentSpanId, "");
    assert.equal(b64hex(linked!.parentSpanId), REMOTE.spanId);
    assert.equal(linked!.traceState, "vendor=v1,other=1");
    assert.equal(linked!.flags, 0x301);
    assert.equal(root!.flags, 0x101);
    assert.equal(child!.startTimeUnixNano, "1764000000000000005");
    assert.equal(child!.endTimeUnixNano, "1764000001999999999");
  });
});

const SETTINGS: BatchSettings = {
  maxQueueSize: 2048,
  maxExportBatchSize: 512,
  scheduledDelayMillis: 60_000,
  exportTimeoutMillis: 30_000,
};

/** A stand-in for the export worker: records each batch's spans (decoded), answers when released. */
function sink(options: { hold?: boolean } = {}) {
  const head = requestHead({ "service.name": "t" }, { name: "s" });
  const batches: { count: number; names: string[] }[] = [];
  const held: (() => void)[] = [];
  let closed = false;
  const s: BatchSink = {
    headRoom: headRoom(head),
    export(buffer, end, count) {
      const req = decode(wrapRequest(head, new Uint8Array(buffer), headRoom(head), end)) as {
        resourceSpans: { scopeSpans: { spans: { name: string }[] }[] }[];
      };
      batches.push({ count, names: req.resourceSpans[0]!.scopeSpans[0]!.spans.map((x) => x.name) });
      return options.hold ? new Promise<void>((resolve) => held.push(resolve)) : Promise.resolve();
    },
    async shutdown() {
      closed = true;
    },
  };
  return { sink: s, batches, held, isClosed: () => closed };
}

function spansNamed(n: number, prefix: string): RecordedSpan[] {
  const { factory, ended } = recorder();
  for (let i = 0; i < n; i++) factory.start(`${prefix}${i}`, 0, undefined, undefined, undefined).end();
  return ended;
}

describe("the span processor", () => {
  it("hands over full batches at once, and forceFlush the rest", async () => {
    const out = sink();
    const p = new OtlpSpanProcessor({ ...SETTINGS, maxExportBatchSize: 4 }, out.sink);
    for (const s of spansNamed(10, "s")) p.onEnd(s);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      out.batches.map((b) => b.count),
      [4, 4],
    );
    await p.forceFlush();
    assert.deepEqual(
      out.batches.map((b) => b.names),
      [
        ["s0", "s1", "s2", "s3"],
        ["s4", "s5", "s6", "s7"],
        ["s8", "s9"],
      ],
    );
    await p.forceFlush();
    assert.equal(out.batches.length, 3);
  });

  it("exports a batch that is not full after the schedule delay", async () => {
    const out = sink();
    const p = new OtlpSpanProcessor({ ...SETTINGS, scheduledDelayMillis: 10 }, out.sink);
    for (const s of spansNamed(3, "t")) p.onEnd(s);
    assert.equal(out.batches.length, 0);
    for (let i = 0; i < 200 && out.batches.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(out.batches, [{ count: 3, names: ["t0", "t1", "t2"] }]);
  });

  it("drops spans beyond the queue size while an export runs, one export at a time", async () => {
    const out = sink({ hold: true });
    const p = new OtlpSpanProcessor({ ...SETTINGS, maxQueueSize: 6, maxExportBatchSize: 3 }, out.sink);
    // 3 go out at once (held), 6 wait, 3 are dropped.
    for (const s of spansNamed(12, "q")) p.onEnd(s);
    assert.equal(out.batches.length, 1);
    const flushed = p.forceFlush();
    while (out.held.length > 0 || out.batches.length < 3) {
      out.held.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    await flushed;
    assert.deepEqual(
      out.batches.map((b) => b.names),
      [
        ["q0", "q1", "q2"],
        ["q3", "q4", "q5"],
        ["q6", "q7", "q8"],
      ],
    );
  });

  it("exports everything on shutdown, then takes no more spans and closes the worker", async () => {
    const out = sink();
    const p = new OtlpSpanProcessor(SETTINGS, out.sink);
    const [a, b] = spansNamed(2, "z");
    p.onEnd(a!);
    await p.shutdown();
    p.onEnd(b!);
    await p.forceFlush();
    assert.deepEqual(out.batches, [{ count: 1, names: ["z0"] }]);
    assert.ok(out.isClosed());
  });

  it("gives up an export after the export timeout and goes on", async () => {
    const out = sink({ hold: true });
    const p = new OtlpSpanProcessor(
      { ...SETTINGS, maxExportBatchSize: 1, exportTimeoutMillis: 20 },
      out.sink,
    );
    for (const s of spansNamed(2, "w")) p.onEnd(s);
    await p.forceFlush();
    assert.deepEqual(
      out.batches.map((b) => b.names),
      [["w0"], ["w1"]],
    );
  });
});

/** The same calls, as a user of the API makes them, on any span. */
function script(span: Span, other: SpanContext): void {
  span.setAttribute("kept", "abcdefgh");
  span.setAttribute("", "empty key");
  span.setAttribute("null", null as never);
  span.setAttribute("object", { a: 1 } as never);
  span.setAttribute("mixed", [1, "a"] as never);
  span.setAttribute("holes", ["abcdef", null, "x"]);
  span.setAttribute("number", 7);
  span.setAttribute("kept", "replaced value");
  span.setAttributes({ bool: true, "past.limit": 1, "past.limit.2": 2 });
  span.addEvent("first", { a: 1, b: "bcdefg", c: 3 }, [1_764_000_000, 1]);
  span.addEvent("second", [1_764_000_000, 2]);
  span.addEvent("third");
  span.addLink({ context: other, attributes: { x: "xyzxyz", y: 2 } });
  span.addLinks([{ context: other }, { context: { ...other, spanId: "1111111111111111" } }]);
  const e = Object.assign(new Error("boom"), { code: "MP_ERR_TEST" });
  span.recordException(e, [1_764_000_000, 3]);
  span.recordException("just text", [1_764_000_000, 4]);
  span.setStatus({ code: 2, message: "failed" });
  span.setStatus({ code: 0 });
  span.updateName("renamed");
  span.setStatus({ code: 1 });
  span.setStatus({ code: 2, message: "ignored after OK" });
  span.end();
  span.setAttribute("after.end", 1);
  span.end();
}

/** A decoded span with the fields that are random or clock-dependent blanked. */
function comparable(bytes: Uint8Array): unknown {
  const d = decode(bytes) as { resourceSpans: { scopeSpans: { spans: Record<string, unknown>[] }[] }[] };
  const span = d.resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
  for (const k of ["traceId", "spanId", "startTimeUnixNano", "endTimeUnixNano"]) span[k] = "";
  // The one event added without a time of its own.
  for (const e of span.events as { name: string; timeUnixNano: string }[])
    if (e.name === "third") e.timeUnixNano = "";
  return span;
}

function sdkSampler(name: SamplerName, ratio: number): Sampler {
  const byRatio = new TraceIdRatioBasedSampler(ratio);
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return byRatio;
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: byRatio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

describe("modelport's span against the SDK's", () => {
  const cut: SpanLimits = {
    attributeCount: 5,
    attributeValueLength: 4,
    eventCount: 3,
    linkCount: 2,
    attributePerEvent: 2,
    attributePerLink: 1,
  };

  // With a value length limit a span's first attributes are set one by one; without, its object is taken as is.
  for (const limits of [cut, { ...cut, attributeValueLength: Number.POSITIVE_INFINITY }])
    it(`the same calls, limits included, export the same span (value length limit ${limits.attributeValueLength})`, () => {
      const sdkEnded: ReadableSpan[] = [];
      const provider = new BasicTracerProvider({
        spanLimits: {
          attributeCountLimit: limits.attributeCount,
          attributeValueLengthLimit: limits.attributeValueLength,
          eventCountLimit: limits.eventCount,
          linkCountLimit: limits.linkCount,
          attributePerEventCountLimit: limits.attributePerEvent,
          attributePerLinkCountLimit: limits.attributePerLink,
        },
        spanProcessors: [
          {
            onStart: () => {},
            onEnd: (s) => void sdkEnded.push(s),
            forceFlush: async () => {},
            shutdown: async () => {},
          },
        ],
      });
      const other: SpanContext = {
        traceId: REMOTE.traceId,
        spanId: REMOTE.spanId,
        traceFlags: 1,
        isRemote: true,
      };
      const parent = trace.setSpanContext(ROOT_CONTEXT, { ...other, traceState: createTraceState("k=v") });
      const sdkSpan = provider
        .getTracer("t")
        .startSpan("scripted", { kind: 2, attributes: { first: "1234567" } }, parent);
      script(sdkSpan, other);
      const { factory, ended } = recorder({ limits });
      const ours = factory.start("scripted", 2, { ...REMOTE, state: "k=v" }, { first: "1234567" }, undefined);
      script(ours, other);
      assert.equal(sdkEnded.length, 1);
      assert.equal(ended.length, 1);
      const expected = comparable(ProtobufTraceSerializer.serializeRequest(sdkEnded)!);
      assert.deepStrictEqual(comparable(ProtobufTraceSerializer.serializeRequest(ended)!), expected);
      assert.deepStrictEqual(comparable(encodeOurs(ended)), expected);
      // The script did reach every limit.
      const span = ended[0]!;
      assert.ok(span.droppedAttributesCount > 0 && span.droppedEventsCount > 0 && span.droppedLinksCount > 0);
      assert.equal(span.attributes.first, limits.attributeValueLength === 4 ? "1234" : "1234567");
      assert.equal(span.isRecording(), false);
    });

  it("reads the limits from OTEL_SPAN_* and OTEL_ATTRIBUTE_*, with the SDK's defaults and precedence", () => {
    const on = { OTEL_TRACES_EXPORTER: "otlp" };
    assert.deepEqual(DEFAULT_LIMITS, {
      attributeCount: 128,
      attributeValueLength: Number.POSITIVE_INFINITY,
      eventCount: 128,
      linkCount: 128,
      attributePerEvent: 128,
      attributePerLink: 128,
    });
    const general = tracingSettings({
      ...on,
      OTEL_ATTRIBUTE_COUNT_LIMIT: "7",
      OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: "9",
    })!;
    assert.equal(general.limits.attributeCount, 7);
    assert.equal(general.limits.attributeValueLength, 9);
    const span = tracingSettings({
      ...on,
      OTEL_ATTRIBUTE_COUNT_LIMIT: "7",
      OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT: "3",
      OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT: "0",
      OTEL_SPAN_LINK_COUNT_LIMIT: "0",
    })!;
    assert.equal(span.limits.attributeCount, 3);
    assert.equal(span.limits.attributeValueLength, Number.POSITIVE_INFINITY);
    assert.equal(span.limits.linkCount, 0);
    assert.throws(
      () => tracingSettings({ ...on, OTEL_SPAN_EVENT_COUNT_LIMIT: "1.5" }),
      /MP_ERR_CONFIG_INVALID|whole number/,
    );
  });

  it("samples as the SDK's samplers do, for each parent", () => {
    const ids = Array.from({ length: 200 }, (_, i) =>
      (i * 2654435761).toString(16).padStart(8, "0").repeat(4),
    );
    const parents: (TraceParent | undefined)[] = [
      undefined,
      { ...REMOTE, flags: 1 },
      { ...REMOTE, flags: 0 },
      { traceId: REMOTE.traceId, spanId: REMOTE.spanId, flags: 1 },
      { traceId: REMOTE.traceId, spanId: REMOTE.spanId, flags: 0 },
    ];
    for (const name of SAMPLERS) {
      const ours = sampling({ sampler: name, ratio: 0.3 });
      const sdk = sdkSampler(name, 0.3);
      for (const parent of parents)
        for (const id of ids) {
          const traceId = parent?.traceId ?? id;
          const context = parent
            ? trace.setSpanContext(ROOT_CONTEXT, {
                traceId: parent.traceId,
                spanId: parent.spanId,
                traceFlags: parent.flags,
                isRemote: parent.remote === true,
              })
            : ROOT_CONTEXT;
          const expected =
            sdk.shouldSample(context, traceId, "s", 0, {}, []).decision ===
            SamplingDecision.RECORD_AND_SAMPLED;
          assert.equal(
            ours(parent, traceId),
            expected,
            `${name}, parent ${JSON.stringify(parent)}, ${traceId}`,
          );
        }
    }
  });

  it("an unsampled span records nothing and is not exported, but carries the trace on", () => {
    const { factory, ended } = recorder({ sampled: false });
    const span = factory.start("dropped", 1, REMOTE, { a: 1 }, [REMOTE]);
    span.setAttribute("b", 2);
    assert.equal(span.isRecording(), false);
    const parent = factory.parentOf(span);
    assert.equal(parent.traceId, REMOTE.traceId);
    assert.equal(parent.flags, 0);
    assert.equal(parent.state, REMOTE.state);
    assert.match(parent.spanId, /^[0-9a-f]{16}$/);
    span.end();
    assert.equal(ended.length, 0);
  });

  it("makes new 128-bit trace ids and 64-bit span ids, lowercase hex, all different", () => {
    const { factory } = recorder();
    const seen = new Set<string>();
    for (let i = 0; i < 3000; i++) {
      const c = factory.start("s", 0, undefined, undefined, undefined).spanContext();
      assert.match(c.traceId, /^[0-9a-f]{32}$/);
      assert.match(c.spanId, /^[0-9a-f]{16}$/);
      seen.add(c.traceId).add(c.spanId);
    }
    assert.equal(seen.size, 6000);
  });
});
