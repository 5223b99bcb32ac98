// The export worker (a worker thread started by worker-exporter.ts when tracing is on): it takes
// the batches of spans the serving thread encoded (otlp-encode.ts), wraps each in one
// ExportTraceServiceRequest with this process's resource and scope, and sends it with the
// official OTLP/HTTP transport: the export delegate OTLPTraceExporter is built on
// (@opentelemetry/otlp-exporter-base), configured the same way from OTEL_EXPORTER_OTLP_*
// (endpoint, headers, timeout, compression) in this thread's copy of the environment, with its
// retries and its limit on concurrent exports; only the serializer differs, returning the bytes
// already encoded instead of encoding span objects.
import { readlinkSync } from "node:fs";
import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import {
  convertLegacyHttpOptions,
  createOtlpHttpExportDelegate,
} from "@opentelemetry/otlp-exporter-base/node-http";
import {
  type IExportTraceServiceResponse,
  type ISerializer,
  ProtobufTraceSerializer,
} from "@opentelemetry/otlp-transformer";
import type { ExportInit, FromWorker, ToWorker } from "./export-wire.js";
import { headRoom, requestHead, wrapRequest } from "./otlp-encode.js";

interface Batch {
  bytes: Uint8Array;
  end: number;
  count: number;
}

/**
 * Sending spans waits for no request, so this thread yields its core to the ones that serve: on
 * Linux it lowers its own scheduling priority to the lowest (nice 19; /proc/thread-self names the
 * thread, and setpriority on a thread id applies to that thread alone). A busy machine then runs
 * it in the time the serving threads leave; elsewhere, or where that fails, it keeps its priority.
 */
function yieldToServing(): void {
  try {
    setPriority(Number(readlinkSync("/proc/thread-self").split("/").pop()), 19);
  } catch {
    // Not Linux, or no /proc: the default priority.
  }
}
yieldToServing();

const init = workerData as ExportInit;
const port = parentPort!;
const head = requestHead(init.resource, init.scope);
// Where each batch's spans start: the serving thread left this much room in front of them.
const room = headRoom(head);
const serializer: ISerializer<Batch, IExportTraceServiceResponse> = {
  serializeRequest: (batch) => wrapRequest(head, batch.bytes, room, batch.end),
  deserializeResponse: (data) => ProtobufTraceSerializer.deserializeResponse(data),
};
// As OTLPTraceExporter (@opentelemetry/exporter-trace-otlp-proto) builds its delegate.
const delegate = createOtlpHttpExportDelegate(
  convertLegacyHttpOptions({}, "TRACES", "v1/traces", { "Content-Type": "application/x-protobuf" }),
  serializer,
  "otlp_http_span_exporter",
  { name: "span", countItems: (batch: Batch) => batch.count },
  undefined,
);
const reply = (m: FromWorker) => port.postMessage(m);

port.on("message", (m: ToWorker) => {
  if (m.type === "export") {
    const { buffer } = m;
    // The request is sent (and resent by retries) from the buffer itself, which goes back when done.
    delegate.export({ bytes: new Uint8Array(buffer), end: m.end, count: m.count }, (result) => {
      const out: FromWorker = { type: "result", id: m.id, ok: result.code === 0, buffer };
      if (result.error) out.error = result.error.message;
      port.postMessage(out, [buffer]);
    });
  } else {
    delegate.shutdown().then(
      () => reply({ type: "closed" }),
      () => reply({ type: "closed" }),
    );
  }
});
