// The export worker (a worker thread started by worker-exporter.ts when tracing is on): it turns
// the packed batches the main thread posts back into span records and hands them to the official
// OTLP/HTTP protobuf exporter, which encodes and POSTs them here, off the thread that serves
// requests. The exporter reads OTEL_EXPORTER_OTLP_* from this thread's copy of the environment.
import { parentPort, workerData } from "node:worker_threads";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { type ExportInit, type FromWorker, type ToWorker, unpack } from "./export-wire.js";

const init = workerData as ExportInit;
const port = parentPort!;
const resource = resourceFromAttributes(init.resource);
const exporter = new OTLPTraceExporter();
const reply = (m: FromWorker) => port.postMessage(m);

port.on("message", (m: ToWorker) => {
  if (m.type === "export") {
    let spans: ReturnType<typeof unpack>;
    try {
      spans = unpack(m.spans, resource, init.scope);
    } catch (err) {
      reply({ type: "result", id: m.id, ok: false, error: String(err) });
      return;
    }
    exporter.export(spans, (result) =>
      reply({
        type: "result",
        id: m.id,
        ok: result.code === 0,
        ...(result.error ? { error: result.error.message } : {}),
      }),
    );
  } else {
    exporter.shutdown().then(
      () => reply({ type: "closed" }),
      () => reply({ type: "closed" }),
    );
  }
});
