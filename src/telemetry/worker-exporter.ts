// A SpanExporter that sends each batch the BatchSpanProcessor hands it to the export worker
// (export-worker.ts) as one flat array (export-wire.ts) and reports the worker's result: the
// protobuf encoding and the HTTP POST, most of what a span costs the process, happen off the
// thread that serves requests. The processor keeps its OTEL_BSP_* queue, batch size and drops.
import { Worker } from "node:worker_threads";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-base";
import { type ExportInit, type FromWorker, pack, type ToWorker } from "./export-wire.js";

type Done = Parameters<SpanExporter["export"]>[1];

const WORKER_URL = new URL("./export-worker.js", import.meta.url);
/** How long shutdown waits for the worker's last exports. */
const SHUTDOWN_MS = 10_000;

export class WorkerSpanExporter implements SpanExporter {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Done>();
  private nextId = 1;
  private closed: Promise<void> | undefined;
  private gone: Error | undefined;
  private idle: (() => void)[] = [];

  constructor(init: ExportInit) {
    this.worker = new Worker(WORKER_URL, { workerData: init, name: "otlp-export" });
    this.worker.on("message", (m: FromWorker) => {
      if (m.type !== "result") return;
      const done = this.pending.get(m.id);
      this.pending.delete(m.id);
      done?.(m.ok ? { code: 0 } : { code: 1, error: new Error(m.error ?? "span export failed") });
      if (this.pending.size === 0) for (const wake of this.idle.splice(0)) wake();
    });
    const fail = (err: Error) => {
      this.gone = err;
      for (const done of this.pending.values()) done({ code: 1, error: err });
      this.pending.clear();
      for (const wake of this.idle.splice(0)) wake();
    };
    this.worker.on("error", fail);
    this.worker.on("exit", (code) => fail(new Error(`the span export worker exited (${code})`)));
    // It never keeps the process alive (a pending export does: the processor's timeout timer).
    // After the listeners: adding a "message" listener refs the worker's port again.
    this.worker.unref();
  }

  export(spans: ReadableSpan[], done: Done): void {
    if (this.gone || this.closed) {
      done({ code: 1, error: this.gone ?? new Error("the span exporter is shut down") });
      return;
    }
    const id = this.nextId++;
    this.pending.set(id, done);
    this.worker.postMessage({ type: "export", id, spans: pack(spans) } satisfies ToWorker);
  }

  /** Resolves once every batch handed over so far has been answered. */
  forceFlush(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  shutdown(): Promise<void> {
    this.closed ??= (async () => {
      await this.forceFlush();
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
