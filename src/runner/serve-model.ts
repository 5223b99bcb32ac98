// The runner side of every placement: loads the backend once, reports the load, then scores
// the batches that arrive one after another and answers each by id. worker-main.ts serves it
// over a worker thread's port, process-main.ts over a child process's IPC channel.
import type { LoadedModel } from "../backends/backend.js";
import { getBackend } from "../backends/registry.js";
import { ModelportError } from "../errors.js";
import type { FromWorker, ToWorker, WireError, WorkerData } from "./worker-protocol.js";
import { transferables } from "./worker-protocol.js";

/** Where answers go and requests come from: a worker's parentPort or a child's IPC channel. */
export interface RunnerPort {
  /** Sends one message; `transfer` lists buffers the port may move instead of copying. */
  send(msg: FromWorker, transfer: ArrayBuffer[]): void;
  onMessage(listener: (msg: ToWorker) => void): void;
}

export function toWire(err: unknown): WireError {
  if (err instanceof ModelportError) {
    return { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) };
  }
  return { code: "MP_ERR_SERVER_INTERNAL", message: err instanceof Error ? err.message : String(err) };
}

/** Loads `data.spec` and serves it over `port` until asked to close. */
export async function serveModel(data: WorkerData, port: RunnerPort): Promise<void> {
  const { spec } = data;
  const rss = () => process.memoryUsage.rss();
  let model: LoadedModel;
  const rssBefore = rss();
  const started = performance.now();
  try {
    model = await getBackend(spec.backend).load(spec);
  } catch (err) {
    port.send({ type: "load-failed", error: toWire(err) }, []);
    return;
  }
  const loadMs = performance.now() - started;
  const after = rss();
  const memoryBytes = data.memory === "total" ? after : Math.max(0, after - rssBefore);
  port.send({ type: "loaded", info: { signature: model.signature, loadMs, memoryBytes } }, []);

  // Reading RSS costs about 8 µs, so it is only done when the runner watches a ceiling.
  const usage = data.reportRss ? () => ({ rss: rss() }) : () => ({});
  port.onMessage((msg) => {
    if (msg.type === "close") {
      const done = () => port.send({ type: "closed" }, []);
      model.close().then(done, done);
      return;
    }
    const started = performance.now();
    model.predict(msg.inputs).then(
      (outputs) => {
        const computeMs = performance.now() - started;
        try {
          port.send({ type: "result", id: msg.id, outputs, computeMs, ...usage() }, transferables(outputs));
        } catch (err) {
          // An answer that cannot cross (a handler returned a function, say) fails its call, not
          // the runner: nothing of it was sent.
          const cause = new ModelportError(
            "MP_ERR_HANDLER_FAILED",
            `${spec.name}: the model's answer could not be sent back: ${(err as Error).message}`,
          );
          port.send({ type: "error", id: msg.id, error: toWire(cause), ...usage() }, []);
        }
      },
      (err) => port.send({ type: "error", id: msg.id, error: toWire(err), ...usage() }, []),
    );
  });
}
