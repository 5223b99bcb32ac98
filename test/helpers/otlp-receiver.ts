// A real OTLP/HTTP trace receiver for tests: a node:http server taking POST /v1/traces with a
// protobuf ExportTraceServiceRequest (gzip or not), decoded with protobufjs from the subset of
// opentelemetry-proto below (unknown fields are skipped), kept as flat spans to assert on.

import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";
import protobuf from "protobufjs";

// From opentelemetry-proto (collector/trace/v1, trace/v1, common/v1, resource/v1): the fields read here.
const PROTO = `
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message Resource { repeated KeyValue attributes = 1; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message InstrumentationScope { string name = 1; string version = 2; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value {
    string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4;
    ArrayValue array_value = 5; bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
  string name = 5; int32 kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9; repeated Event events = 11; repeated Link links = 13; Status status = 15;
}
message Event { string name = 2; repeated KeyValue attributes = 3; }
message Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; }
message Status { string message = 2; int32 code = 3; }
`;

const Request = protobuf.parse(PROTO).root.lookupType("otlp.ExportTraceServiceRequest");

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Absent for a root span. */
  parentSpanId?: string;
  name: string;
  /** SpanKind as OTLP numbers it: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  /** 0 unset, 1 ok, 2 error. */
  status: number;
  service: string;
  events: string[];
}

export interface OtlpReceiver {
  /** The base URL (set OTEL_EXPORTER_OTLP_ENDPOINT to it; the exporter posts to /v1/traces). */
  url: string;
  spans: ReceivedSpan[];
  /** Headers of every export request received. */
  requests: IncomingHttpHeaders[];
  /** Resolves with the spans once `done(spans)` holds; rejects after `timeoutMs` with what came. */
  waitFor(done: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

type Value = {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | { toNumber(): number };
  doubleValue?: number;
  arrayValue?: { values?: Value[] };
};

function value(v: Value | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return typeof v.intValue === "number" ? v.intValue : v.intValue.toNumber();
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(value);
  return undefined;
}

function attributes(list: { key: string; value?: Value }[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list ?? []) out[kv.key] = value(kv.value);
  return out;
}

const hex = (b: Uint8Array | undefined) => (b && b.length > 0 ? Buffer.from(b).toString("hex") : undefined);

/** Decodes one ExportTraceServiceRequest body into flat spans. */
export function decodeSpans(body: Uint8Array): ReceivedSpan[] {
  const msg = Request.toObject(Request.decode(body), { defaults: false }) as {
    resourceSpans?: {
      resource?: { attributes?: { key: string; value?: Value }[] };
      scopeSpans?: { spans?: any[] }[];
    }[];
  };
  const out: ReceivedSpan[] = [];
  for (const rs of msg.resourceSpans ?? []) {
    const service = String(attributes(rs.resource?.attributes)["service.name"] ?? "");
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? []) {
        const parent = hex(s.parentSpanId);
        out.push({
          traceId: hex(s.traceId)!,
          spanId: hex(s.spanId)!,
          ...(parent ? { parentSpanId: parent } : {}),
          name: s.name,
          kind: s.kind ?? 0,
          attributes: attributes(s.attributes),
          links: (s.links ?? []).map((l: { traceId: Uint8Array; spanId: Uint8Array }) => ({
            traceId: hex(l.traceId)!,
            spanId: hex(l.spanId)!,
          })),
          status: s.status?.code ?? 0,
          service,
          events: (s.events ?? []).map((e: { name: string }) => e.name),
        });
      }
  }
  return out;
}

/** `decode: false` acknowledges exports without decoding them (spans stays empty; requests counts them). */
export async function startOtlpReceiver(options: { decode?: boolean } = {}): Promise<OtlpReceiver> {
  const decode = options.decode ?? true;
  const spans: ReceivedSpan[] = [];
  const requests: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      requests.push(req.headers);
      try {
        let body = Buffer.concat(chunks);
        if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
        if (decode) spans.push(...decodeSpans(body));
        // An empty ExportTraceServiceResponse: full success.
        res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      } catch (err) {
        res.writeHead(400).end(String(err));
      }
    });
  });
  server.listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    async waitFor(done, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (!done(spans)) {
        if (Date.now() > deadline)
          throw new Error(
            `the spans awaited did not arrive within ${timeoutMs} ms; received: ${JSON.stringify(spans.map((s) => s.name))}`,
          );
        await new Promise((r) => setTimeout(r, 25));
      }
      return spans;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
