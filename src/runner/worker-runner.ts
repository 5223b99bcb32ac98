// A Runner that owns its model in a worker thread of the server process: onnxruntime's
// session.run blocks whatever thread calls it, so that thread must not be the HTTP one.
// terminate() stops a thread stuck in JavaScript at once (V8 interrupts even `while (true)`);
// a thread stuck inside a native call stops only when that call returns, so it is abandoned
// (it keeps its memory and a core until then) and a fresh one is started beside it.
// With `inline`, a small model also gets a copy in the server's thread (inline-lane.ts), loaded
// once after the first worker load and kept across worker restarts.
import { Worker } from "node:worker_threads";
import { ortTelemetryOffByDefault } from "../backends/ort-telemetry.js";
import { ModelportError, reviveError } from "../errors.js";
import type { TensorMap } from "../tensor.js";
import { openInlineLane } from "./inline-lane.js";
import { PendingCalls } from "./pending-calls.js";
import type { InlineLane, Runner, RunnerLoadInfo, RunnerSpec } from "./runner.js";
import type { FromWorker, ToWorker, WorkerData } from "./worker-protocol.js";
import { transferables } from "./worker-protocol.js";

const WORKER_URL = new URL("./worker-main.js", import.meta.url);

/** How long terminate() waits for the thread to stop before abandoning it (stuck in native code). */
const TERMINATE_WAIT_MS = 2000;

export interface WorkerRunnerOptions {
  /** Also load a copy in the server's thread for short requests (ONNX on the CPU). */
  inline?: boolean;
}

export class WorkerRunner implements Runner {
  readonly spec: RunnerSpec;
  inline: InlineLane | undefined;
  /** Why there is no in-thread copy, once one was tried. */
  private inlineSkipped: string | undefined;
  private worker: Worker | undefined;
  private readonly pending = new PendingCalls();
  private closing: Promise<void> | undefined;
  private readonly crashListeners: ((reason: string) => void)[] = [];
  private readonly computeListeners: ((outputs: TensorMap, ms: number) => void)[] = [];

  constructor(
    spec: RunnerSpec,
    private readonly options: WorkerRunnerOptions = {},
  ) {
    this.spec = spec;
  }

  start(): Promise<RunnerLoadInfo> {
    // A fresh generation: close() or terminate() applied to the thread they found.
    this.closing = undefined;
    const data: WorkerData = { spec: this.spec };
    // The thread's backend may load onnxruntime, which reads this process's environment.
    ortTelemetryOffByDefault();
    const worker = new Worker(WORKER_URL, { workerData: data, name: `model:${this.spec.name}` });
    this.worker = worker;
    return new Promise<RunnerLoadInfo>((resolve, reject) => {
      let loaded = false;
      worker.on("message", (msg: FromWorker) => {
        switch (msg.type) {
          case "loaded":
            loaded = true;
            this.withInline(msg.info).then(resolve, reject);
            return;
          case "load-failed":
            reject(reviveError(msg.error));
            void worker.terminate();
            return;
          case "result":
            this.pending.resolve(msg.id, msg.outputs);
            if (msg.computeMs !== undefined)
              for (const l of this.computeListeners) l(msg.outputs, msg.computeMs);
            return;
          case "error":
            this.pending.reject(msg.id, reviveError(msg.error));
            return;
          case "closed":
            return;
        }
      });
      const die = (reason: string) => {
        this.worker = undefined;
        if (!loaded) {
          reject(
            new ModelportError(
              "MP_ERR_MODEL_LOAD_FAILED",
              `the runner for ${this.spec.name} died while loading: ${reason}`,
            ),
          );
          return;
        }
        this.pending.failAll(this.spec.name, reason);
        if (!this.closing) for (const l of this.crashListeners) l(reason);
      };
      worker.on("error", (err) => {
        if (this.worker === worker) die(err.message);
      });
      worker.on("exit", (code) => {
        if (this.worker === worker) die(`worker exited with code ${code}`);
      });
    });
  }

  /** Loads the in-thread copy after the first load (a file the worker could load), and reports it. */
  private async withInline(info: RunnerLoadInfo): Promise<RunnerLoadInfo> {
    if (!this.options.inline) return info;
    if (!this.inline && this.inlineSkipped === undefined) {
      const lane = await openInlineLane(this.spec).catch((err: Error) => ({ skipped: err.message }));
      if ("skipped" in lane) this.inlineSkipped = lane.skipped;
      else if (this.closing) await lane.close();
      else this.inline = lane;
    }
    if (!this.inline) return { ...info, inline: this.inlineSkipped ?? "not loaded" };
    return { ...info, memoryBytes: info.memoryBytes + this.inline.memoryBytes, inline: "loaded" };
  }

  predict(inputs: TensorMap): Promise<TensorMap> {
    const worker = this.worker;
    if (!worker || this.closing) {
      return Promise.reject(
        new ModelportError(
          "MP_ERR_RUNNER_CRASHED",
          `the runner for ${this.spec.name} is not running; retry shortly`,
        ),
      );
    }
    return this.pending.open((id) => {
      const msg: ToWorker = { type: "predict", id, inputs };
      worker.postMessage(msg, transferables(inputs));
    });
  }

  onComputed(listener: (outputs: TensorMap, ms: number) => void): void {
    this.computeListeners.push(listener);
  }

  onCrash(listener: (reason: string) => void): void {
    this.crashListeners.push(listener);
  }

  async terminate(reason: string): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    // Detached first: its exit is not a crash, and late answers find no pending call.
    this.worker = undefined;
    this.pending.failAll(this.spec.name, reason);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      worker.terminate().catch(() => {}),
      new Promise((r) => {
        timer = setTimeout(r, TERMINATE_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    const lane = this.inline;
    this.inline = undefined;
    this.inlineSkipped = undefined;
    await lane?.close();
    const worker = this.worker;
    if (!worker) return;
    const closed = new Promise<void>((resolve) => {
      worker.on("message", (msg: FromWorker) => {
        if (msg.type === "closed") resolve();
      });
      worker.once("exit", () => resolve());
    });
    const msg: ToWorker = { type: "close" };
    worker.postMessage(msg);
    await Promise.race([closed, new Promise((r) => setTimeout(r, 5000).unref())]);
    this.worker = undefined;
    await worker.terminate();
    this.pending.failAll(this.spec.name, "the runner was closed");
  }
}
