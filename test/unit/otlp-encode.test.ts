// The hand-written OTLP span encoder (src/telemetry/otlp-encode.ts) against the official one: the
// same SDK spans are encoded by both (@opentelemetry/otlp-transformer's ProtobufTraceSerializer
// and writeSpan + wrapRequest), both requests are decoded with protobufjs from every field the
// encoder writes, and the decoded messages must be equal. The spans cover a root span and a
// remote parent with a trace state, every attribute value type, non-ASCII strings, events, links
// with trace states and attributes, error and ok status, dropped counts and a span over 16 KiB.
// Then the span processor (src/telemetry/span-processor.ts) against a stand-in for the export
// worker: batch size, schedule delay, queue limit, unsampled spans, flush and shutdown.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createTraceState, ROOT_CONTEXT, type SpanContext, trace } from "@opentelemetry/api";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  type ReadableSpan,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import protobuf from "protobufjs";
import { ProtoWriter, requestHead, wrapRequest, writeSpan } from "../../src/telemetry/otlp-encode.js";
import type { BatchSettings } from "../../src/telemetry/settings.js";
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

/** Tracer over a processor that keeps every ended span. */
function recorder(options: { sampled?: boolean } = {}) {
  const ended: ReadableSpan[] = [];
  const keep: SpanProcessor = {
    onStart: () => {},
    onEnd: (s) => void ended.push(s),
    forceFlush: async () => {},
    shutdown: async () => {},
  };
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "tést", "service.version": "1.2.3", "host.cores": 2 }),
    spanLimits: { attributeCountLimit: 40, eventCountLimit: 3, linkCountLimit: 3 },
    spanProcessors: [keep],
    ...(options.sampled === false ? { sampler: new AlwaysOffSampler() } : {}),
  });
  return { tracer: provider.getTracer("modelport-test", "9.9.9"), ended };
}

const REMOTE: SpanContext = {
  traceId: "0af7651916cd43dd8448eb211c80319c",
  spanId: "b7ad6b7169203331",
  traceFlags: 1,
  isRemote: true,
  traceState: createTraceState("vendor=v1,other=1"),
};

function makeSpans(): ReadableSpan[] {
  const { tracer, ended } = recorder();
  // A root span with every attribute value type and non-ASCII text.
  const root = tracer.startSpan(
    "POST /v1/models/{model}/predict",
    {
      kind: 1,
      attributes: {
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
    },
    ROOT_CONTEXT,
  );
  root.addEvent("retry", { attempt: 2, "raison.é": "délai" }, [1_764_000_000, 123_456_789]);
  root.recordException(new Error("panne réseau — ⚡"));
  root.setStatus({ code: 2, message: "échec: upstream 503" });
  root.end();
  // A child of a remote parent with a trace state, with links (trace states, attributes).
  const linked = tracer.startSpan(
    "modelport.batch",
    {
      kind: 0,
      attributes: { "modelport.batch.rows": 3 },
      links: [
        { context: REMOTE, attributes: { "link.kind": "joined", n: 1 } },
        { context: root.spanContext() },
        {
          context: {
            traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
            spanId: "00f067aa0ba902b7",
            traceFlags: 0,
            traceState: createTraceState("a=b"),
          },
        },
      ],
    },
    trace.setSpanContext(ROOT_CONTEXT, REMOTE),
  );
  linked.end();
  // A local child with status OK, no attributes, an explicit start and end time.
  const child = tracer.startSpan(
    "modelport.infer",
    { startTime: [1_764_000_000, 5] },
    trace.setSpan(ROOT_CONTEXT, root),
  );
  child.setStatus({ code: 1 });
  child.end([1_764_000_001, 999_999_999]);
  // Over every limit: dropped attributes, events and links; over 16 KiB (a three-byte length).
  const big = tracer.startSpan("big", {
    kind: 4,
    links: Array.from({ length: 5 }, (_, i) => ({
      context: { ...REMOTE, spanId: `00000000000000${i}${i}` },
    })),
  });
  for (let i = 0; i < 45; i++) big.setAttribute(`attr.${i}`, i % 2 === 0 ? "v".repeat(800) : i);
  for (let i = 0; i < 5; i++) big.addEvent(`event ${i}`);
  big.end();
  // Client and producer kinds, a trace state copied from the remote parent.
  for (const kind of [2, 3])
    tracer.startSpan(`kind ${kind}`, { kind }, trace.setSpanContext(ROOT_CONTEXT, REMOTE)).end();
  return ended;
}

function encodeOurs(spans: readonly ReadableSpan[], writer = new ProtoWriter(64)): Uint8Array {
  for (const s of spans) writeSpan(writer, s);
  const first = spans[0]!;
  const head = requestHead(first.resource.attributes, first.instrumentationScope);
  return wrapRequest(head, writer.buf.subarray(0, writer.pos));
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
    assert.equal(b64hex(root!.traceId), spans[0]!.spanContext().traceId);
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
    export(buffer, length, count) {
      const req = decode(wrapRequest(head, new Uint8Array(buffer, 0, length))) as {
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

function spansNamed(n: number, prefix: string, sampled = true): ReadableSpan[] {
  const { tracer, ended } = recorder({ sampled });
  for (let i = 0; i < n; i++) tracer.startSpan(`${prefix}${i}`).end();
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

  it("skips unsampled spans", async () => {
    const out = sink();
    const p = new OtlpSpanProcessor(SETTINGS, out.sink);
    for (const s of spansNamed(3, "u", false)) p.onEnd(s);
    await p.forceFlush();
    assert.equal(out.batches.length, 0);
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
