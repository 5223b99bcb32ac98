// Entry point of a model's worker thread: loads the backend once, then scores batches sent by
// the WorkerRunner one after another, so blocking inference never stalls the HTTP thread.
import { parentPort, workerData } from "node:worker_threads";
import { serveModel } from "./serve-model.js";
import type { WorkerData } from "./worker-protocol.js";

const port = parentPort!;

void serveModel(workerData as WorkerData, {
  send: (msg, transfer) => port.postMessage(msg, transfer),
  onMessage: (listener) => port.on("message", listener),
});
