// Entry point of a model's child process (placement "process"): waits for its spec, then serves
// the model over the IPC channel exactly as a worker thread does. The process is the model's
// own, so a native crash or an out-of-memory kill here cannot take the HTTP server down.
import { applyHeapGrowth } from "../heap-growth.js";
import { applyMallocThresholds } from "../malloc-thresholds.js";
import { serveModel } from "./serve-model.js";
import type { FromWorker, ToProcess, ToWorker } from "./worker-protocol.js";

if (!process.send) {
  process.stderr.write("process-main.js is started by modelport's ProcessRunner, not by hand\n");
  process.exit(2);
}

// As the server's own process: tensors are external memory that V8's collector counts
// (heap-growth.ts), and blocks of megabytes that glibc would unmap when freed (malloc-thresholds.ts).
applyHeapGrowth();
applyMallocThresholds();

// The server went away (exited, crashed or was SIGKILLed): the IPC channel closes, and a
// runner without its server must not live on holding the model's memory.
process.on("disconnect", () => process.exit(0));

function send(msg: FromWorker): void {
  if (!process.connected) return;
  process.send!(msg, undefined, {}, (err) => {
    // A failed send means the parent is gone; after "closed" or "load-failed" there is nothing
    // left to do.
    if (err || msg.type === "closed" || msg.type === "load-failed") process.exit(0);
  });
}

const listeners: ((msg: ToWorker) => void)[] = [];
let started = false;
process.on("message", (msg: ToProcess) => {
  if (msg.type === "init") {
    if (started) return;
    started = true;
    void serveModel(msg.data, { send, onMessage: (listener) => listeners.push(listener) });
    return;
  }
  for (const l of listeners) l(msg);
});
