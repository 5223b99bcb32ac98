// The serving thread's end of the export worker (export-worker.ts): the span processor
// (span-processor.ts) hands it each batch of encoded spans, whose ArrayBuffer is transferred to
// the worker (no copy, no structured clone of span fields), and gets back the worker's result with
// the buffer, to encode a later batch into. The HTTP POST, its retries and its gzip happen on the
// worker, off the thread that serves requests.
import { Worker } from "node:worker_threads";
import type { ExportInit, FromWorker, ToWorker } from "./export-wire.js";
import { headRoom, requestHead } from "./otlp-encode.js";
import type { BatchSink } from "./span-processor.js";

const WORKER_URL = new URL("./export-worker.js", import.meta.url);
/** Buffers kept for reuse: one batch is exported at a time, so two are usually enough. */
const SPARES = 2;
/** How long shutdown waits for the worker's last exports. */
const SHUTDOWN_MS = 10_000;

type Done = (err?: Error) => void;

export class ExportWorker implements BatchSink {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Done>();
  private nextId = 1;
  private closed: Promise<void> | undefined;
  private gone: Error | undefined;
  private readonly spares: ArrayBuffer[] = [];
  readonly headRoom: number;

  constructor(init: ExportInit) {
    // The worker writes the same head in front of each batch.
    this.headRoom = headRoom(requestHead(init.resource, init.scope));
    this.worker = new Worker(WORKER_URL, { workerData: init, name: "otlp-export" });
    this.worker.on("message", (m: FromWorker) => {
      if (m.type !== "result") return;
      this.keep(m.buffer);
      const done = this.pending.get(m.id);
      this.pending.delete(m.id);
      done?.(m.ok ? undefined : new Error(m.error ?? "span export failed"));
    });
    const fail = (err: Error) => {
      this.gone = err;
      for (const done of this.pending.values()) done(err);
      this.pending.clear();
    };
    this.worker.on("error", fail);
    this.worker.on("exit", (code) => fail(new Error(`the span export worker exited (${code})`)));
    // It never keeps the process alive (a pending export does: the processor's timeout timer).
    // After the listeners: adding a "message" listener refs the worker's port again.
    this.worker.unref();
  }

  spare(size: number): ArrayBuffer | undefined {
    const i = this.spares.findIndex((b) => b.byteLength >= size);
    return i < 0 ? undefined : this.spares.splice(i, 1)[0];
  }

  /** Keeps the SPARES largest buffers the worker gave back. */
  private keep(buffer: ArrayBuffer): void {
    this.spares.push(buffer);
    if (this.spares.length > SPARES) {
      this.spares.sort((a, b) => b.byteLength - a.byteLength);
      this.spares.length = SPARES;
    }
  }

  export(buffer: ArrayBuffer, end: number, count: number): Promise<void> {
    if (this.gone || this.closed)
      return Promise.reject(this.gone ?? new Error("the span exporter is shut down"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, (err) => (err ? reject(err) : resolve()));
      this.worker.postMessage({ type: "export", id, buffer, end, count } satisfies ToWorker, [buffer]);
    });
  }

  shutdown(): Promise<void> {
    this.closed ??= (async () => {
      if (!this.gone) {
        const closed = new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, SHUTDOWN_MS);
          this.worker.on("message", (m: FromWorker) => {
            if (m.type === "closed") {
              clearTimeout(timer);
              resolve();
            }
          });
          this.worker.once("exit", () => {
            clearTimeout(timer);
            resolve();
          });
        });
        this.worker.postMessage({ type: "shutdown" } satisfies ToWorker);
        await closed;
      }
      await this.worker.terminate();
    })();
    return this.closed;
  }
}
