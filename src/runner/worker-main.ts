// Entry point of a model's worker thread: loads the backend once, then scores batches sent by
// the WorkerRunner one after another, so blocking inference never stalls the HTTP thread.
import { parentPort, workerData } from "node:worker_threads";
import type { LoadedModel } from "../backends/backend.js";
import { getBackend } from "../backends/registry.js";
import { ModelportError } from "../errors.js";
import type { FromWorker, ToWorker, WireError, WorkerData } from "./worker-protocol.js";
import { transferables } from "./worker-protocol.js";

const port = parentPort!;
const { spec } = workerData as WorkerData;

function toWire(err: unknown): WireError {
  if (err instanceof ModelportError) {
    return { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) };
  }
  return { code: "MP_ERR_SERVER_INTERNAL", message: err instanceof Error ? err.message : String(err) };
}

function send(msg: FromWorker, transfer: ArrayBuffer[] = []): void {
  port.postMessage(msg, transfer);
}

async function main(): Promise<void> {
  let model: LoadedModel;
  const rssBefore = process.memoryUsage().rss;
  const started = performance.now();
  try {
    model = await getBackend(spec.backend).load(spec);
  } catch (err) {
    send({ type: "load-failed", error: toWire(err) });
    return;
  }
  const loadMs = performance.now() - started;
  const memoryBytes = Math.max(0, process.memoryUsage().rss - rssBefore);
  send({ type: "loaded", info: { signature: model.signature, loadMs, memoryBytes } });

  port.on("message", (msg: ToWorker) => {
    if (msg.type === "close") {
      model.close().then(
        () => send({ type: "closed" }),
        () => send({ type: "closed" }),
      );
      return;
    }
    model.predict(msg.inputs).then(
      (outputs) => send({ type: "result", id: msg.id, outputs }, transferables(outputs)),
      (err) => send({ type: "error", id: msg.id, error: toWire(err) }),
    );
  });
}

void main();
