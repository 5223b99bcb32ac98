// A Runner that owns its model in a supervised child process (placement "process"): a native
// crash, an abort or an out-of-memory kill takes down the child, never the HTTP server. The
// child is a fork of process-main.js speaking the worker protocol: its spec and its load report
// over the IPC channel (V8 serialization), batches and answers as frames on a socket of their own
// (tensor-frames.ts), so a large tensor crosses with one copy on the receiving side. With a memory ceiling
// (maxRssMb) the child reports its RSS with every answer, and the runner asks its owner for a
// recycle (onRecycleNeeded) when the RSS is above the ceiling. terminate() SIGKILLs a child
// stuck past the hard limit, whatever it is stuck in.
import { type ChildProcess, fork } from "node:child_process";
import type { Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { ModelportError, reviveError } from "../errors.js";
import type { TensorMap } from "../tensor.js";
import { PendingCalls } from "./pending-calls.js";
import type { Runner, RunnerLoadInfo, RunnerSpec } from "./runner.js";
import { FRAME_CHANNEL_FD, FrameReader, writeFrame } from "./tensor-frames.js";
import type { FromWorker, ToProcess, ToWorker } from "./worker-protocol.js";

const PROCESS_MAIN = fileURLToPath(new URL("./process-main.js", import.meta.url));

/** How long close() lets the child close its model and exit before it is SIGKILLed. */
const CLOSE_TIMEOUT_MS = 5000;

/** The server's node flags minus those that cannot be shared with a second process (a debugger port, the test runner). */
function childExecArgv(): string[] {
  return process.execArgv.filter((a) => !/^--(inspect|debug|test|watch)/.test(a));
}

/** The child's frame channel (tensor-frames.ts): batches out, answers back. */
const framesOf = (child: ChildProcess) => child.stdio[FRAME_CHANNEL_FD] as Socket;

function describeExit(pid: number | undefined, code: number | null, signal: NodeJS.Signals | null): string {
  if (signal === "SIGKILL") {
    return `runner process ${pid} was killed by SIGKILL, sent from outside the server: often the kernel's out-of-memory killer`;
  }
  if (signal) return `runner process ${pid} was killed by ${signal}`;
  return `runner process ${pid} exited with code ${code}`;
}

export class ProcessRunner implements Runner {
  readonly spec: RunnerSpec;
  private child: ChildProcess | undefined;
  private loaded = false;
  private readonly pending = new PendingCalls();
  private closing: Promise<void> | undefined;
  private readonly crashListeners: ((reason: string) => void)[] = [];
  private readonly recycleListeners: ((reason: string) => void)[] = [];
  private readonly maxRssBytes: number | undefined;
  private readonly closeTimeoutMs: number;

  constructor(spec: RunnerSpec, options: { closeTimeoutMs?: number } = {}) {
    this.spec = spec;
    this.maxRssBytes = spec.maxRssMb ? spec.maxRssMb * 1024 * 1024 : undefined;
    this.closeTimeoutMs = options.closeTimeoutMs ?? CLOSE_TIMEOUT_MS;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  start(): Promise<RunnerLoadInfo> {
    if (this.child) {
      return Promise.reject(
        new ModelportError(
          "MP_ERR_MODEL_LOAD_FAILED",
          `the runner for ${this.spec.name} is already running; close it first`,
        ),
      );
    }
    // A fresh generation: close() applies to the child it found, start() after it runs a new one.
    this.closing = undefined;
    this.loaded = false;
    const child = fork(PROCESS_MAIN, [], {
      serialization: "advanced",
      // stdout/stderr are the server's, as for a worker thread: a native crash's last words land
      // in the server's output.
      stdio: ["ignore", "inherit", "inherit", "ipc", "pipe"],
      execArgv: childExecArgv(),
    });
    const frames = framesOf(child);
    this.child = child;
    return new Promise<RunnerLoadInfo>((resolve, reject) => {
      const loadFailed = (reason: string) =>
        new ModelportError(
          "MP_ERR_MODEL_LOAD_FAILED",
          `the runner process for ${this.spec.name} died while loading: ${reason}`,
        );
      const onMessage = (msg: FromWorker) => {
        if (this.child !== child) return;
        switch (msg.type) {
          case "loaded":
            this.loaded = true;
            resolve(msg.info);
            return;
          case "load-failed":
            reject(reviveError(msg.error));
            child.kill("SIGKILL");
            return;
          case "result":
            this.pending.resolve(msg.id, msg.outputs);
            if (msg.rss !== undefined) this.observeRss(msg.rss);
            return;
          case "error":
            this.pending.reject(msg.id, reviveError(msg.error));
            if (msg.rss !== undefined) this.observeRss(msg.rss);
            return;
          case "closed":
            return;
        }
      };
      const reader = new FrameReader((msg) => onMessage(msg as FromWorker));
      frames.on("data", (chunk: Buffer) => {
        try {
          reader.push(chunk);
        } catch (err) {
          // Nothing the child sends is malformed unless it is broken: end it as a crash.
          if (this.child === child) {
            process.emitWarning(`runner process ${child.pid}: ${(err as Error).message}; killing it`);
            child.kill("SIGKILL");
          }
        }
      });
      // A dying child resets the socket; its exit (below) does the work.
      frames.on("error", () => {});
      child.on("message", onMessage);
      child.on("exit", (code, signal) => {
        if (this.child !== child) return;
        const reason = this.closing ? "it was closed" : describeExit(child.pid, code, signal);
        this.child = undefined;
        const wasLoaded = this.loaded;
        this.loaded = false;
        if (!wasLoaded) {
          reject(loadFailed(reason));
          return;
        }
        this.pending.failAll(this.spec.name, reason);
        if (!this.closing) for (const l of this.crashListeners) l(reason);
      });
      // Only a failed spawn has no exit event to follow; later errors (a send to a dying child)
      // are followed by "exit", which does the work.
      child.on("error", (err) => {
        if (this.child !== child || child.pid !== undefined) return;
        this.child = undefined;
        reject(loadFailed(err.message));
      });
      const init: ToProcess = {
        type: "init",
        data: { spec: this.spec, memory: "total", reportRss: this.maxRssBytes !== undefined },
      };
      child.send(init, (err) => {
        if (err && this.child === child) child.kill("SIGKILL");
      });
    });
  }

  predict(inputs: TensorMap): Promise<TensorMap> {
    const child = this.child;
    if (!child || !this.loaded || this.closing) {
      return Promise.reject(
        new ModelportError(
          "MP_ERR_RUNNER_CRASHED",
          `the runner for ${this.spec.name} is not running; retry shortly`,
        ),
      );
    }
    return this.pending.open((id) => {
      // A failed write means the child is dying: its exit fails every pending call.
      writeFrame(framesOf(child), { type: "predict", id, inputs });
    });
  }

  onCrash(listener: (reason: string) => void): void {
    this.crashListeners.push(listener);
  }

  onRecycleNeeded(listener: (reason: string) => void): void {
    this.recycleListeners.push(listener);
  }

  async terminate(reason: string): Promise<void> {
    const child = this.child;
    if (!child) return;
    // Detached first: its exit is not a crash, and late answers find no pending call.
    this.child = undefined;
    this.loaded = false;
    this.pending.failAll(this.spec.name, reason);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGKILL");
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      exited,
      new Promise((r) => {
        timer = setTimeout(r, this.closeTimeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /** Asks the child to close its model and exit; SIGKILL when it has not within the timeout. */
  private async shutdown(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once("exit", () => resolve());
    });
    if (this.loaded && child.connected) {
      // On the frame channel, so it comes after every batch sent before it.
      const msg: ToWorker = { type: "close" };
      writeFrame(framesOf(child), msg, (err) => {
        if (err) child.kill("SIGKILL");
      });
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<"timeout">((resolve) => {
        timer = setTimeout(() => resolve("timeout"), this.closeTimeoutMs);
      });
      const how = await Promise.race([exited, timeout]);
      clearTimeout(timer);
      if (how === "timeout") child.kill("SIGKILL");
    } else {
      // Still loading: there is no model to close yet.
      child.kill("SIGKILL");
    }
    await exited;
    this.pending.failAll(this.spec.name, "the runner was closed");
  }

  private observeRss(rss: number): void {
    const max = this.maxRssBytes;
    if (max === undefined || rss <= max || this.closing) return;
    const reason = `runner process RSS ${(rss / 1048576).toFixed(1)} MiB is above maxRssMb ${this.spec.maxRssMb}`;
    for (const l of this.recycleListeners) l(reason);
  }
}
