// The one lifecycle of every local model, tensor or language: verify the file's sha256, load
// it (the engine: a runner, or a driver in this process), attach what requests go through
// (hooks.attach: the batcher), score the golden example (hooks.golden: tensors or text), and
// only then report ready. The backends supply load, infer and close; everything here is the
// same for all of them.
//
// When the engine dies (a runner's thread or child process), queued work fails with a retryable
// code, the engine restarts with backoff, and the model is ready again only after its golden
// check passes again. When the engine asks to be recycled (a child process above its memory
// ceiling), the queue is paused and drained, the engine restarted and golden-checked, and the
// queue resumed: no request is lost, and the model stays ready throughout. When the engine is
// stuck on one call past the hard limit (limits.hardTimeoutMs; the batcher reports it through
// stuck()), it is terminated at once: the model says not ready with the reason, the requests of
// that call fail (503, retryable), queued requests wait within their own deadlines, and once a
// fresh engine passes its golden check the model is ready again and the queue runs on it.
import type { Logger } from "pino";
import type { ModelState, ModelStatus } from "../catalogue/served-model.js";
import { ERRORS, type ErrorCode, isModelportError, ModelportError } from "../errors.js";
import { fileDigest } from "./file-digest.js";

/** What a backend supplies: load, close, and for runners, crash and recycle signals. */
export interface Engine<I extends EngineLoadInfo = EngineLoadInfo> {
  /** The process that owns the weights when it is not the server's own. */
  readonly pid?: number | undefined;
  /** Loads; rejects with a ModelportError. May be called again after a crash or close() for a fresh copy. */
  start(): Promise<I>;
  /** Idempotent; never fires onCrash. */
  close(): Promise<void>;
  /** Stops at once, failing the call in progress (one stuck past the hard limit). */
  terminate?(reason: string): Promise<void>;
  /** The engine died unexpectedly; its calls in flight have already been rejected. */
  onCrash?(listener: (reason: string) => void): void;
  /** The engine is healthy but should be replaced once drained (its memory passed the ceiling). */
  onRecycleNeeded?(listener: (reason: string) => void): void;
}

export interface EngineLoadInfo {
  /** Wall time of the load, in milliseconds. */
  loadMs: number;
  /** Resident memory the load added (thread) or the child's RSS (process), when measured. */
  memoryBytes?: number;
}

/** What requests go through once loaded (the batcher): paused and drained by a recycle. */
export interface ServingQueue {
  pause(): void;
  resume(): void;
  whenIdle(): Promise<void>;
  failQueued(err: ModelportError): void;
}

/** The golden check's answer: passed, or the differences in words. */
export type GoldenVerdict =
  | { passed: true }
  | { passed: false; message: string; diff?: { output: string; problem: string }[] };

export interface LifecycleHooks<I extends EngineLoadInfo> {
  /** After every load, before the golden check: builds what requests go through. */
  attach?(info: I): ServingQueue | undefined;
  /**
   * Scores the golden example: through the serving queue, or straight on the engine (`direct`)
   * while a recycle holds the queue paused. Absent when the model has no golden file.
   */
  golden?(direct: boolean): Promise<GoldenVerdict>;
  /** After every load, with what it reported (warnings such as a memory ceiling below the footprint). */
  loaded?(info: I): void;
  /** Every state change (the model-ready gauge). */
  stateChanged?(state: ModelState): void;
}

export interface LifecycleSpec {
  name: string;
  /** The file or folder whose sha256 is checked; undefined when there is none (upstream). */
  path?: string;
  sha256?: string;
  sha256Source?: string;
  /** The golden file, for messages and logs; the check itself is hooks.golden. */
  golden?: string;
  hardTimeoutMs: number;
  /** Least time between the end of one recycle and the start of the next (MIN_RECYCLE_INTERVAL_MS). */
  minRecycleIntervalMs?: number;
}

/** Restart delays after a crash: 0.5 s doubling to 30 s. */
export function restartDelayMs(attempt: number): number {
  return Math.min(30_000, 500 * 2 ** attempt);
}

/**
 * Least time between the end of one recycle and the start of the next. A recycle pauses the
 * model for a load plus a golden check, so a ceiling the runner exceeds right after loading
 * (set below the model's own footprint) must not turn into a loop of reloads: it costs at most
 * one pause per 30 s, and a warning says the ceiling is too low. A time rather than a batch
 * count, because the pause's share of the time is what users feel, whatever the traffic.
 */
export const MIN_RECYCLE_INTERVAL_MS = 30_000;

function asModelportError(err: unknown): ModelportError {
  return isModelportError(err) ? err : new ModelportError("MP_ERR_MODEL_LOAD_FAILED", String(err));
}

/** The part of ModelStatus the lifecycle owns. */
export type LifecycleStatus = Pick<
  ModelStatus,
  | "state"
  | "ready"
  | "reason"
  | "code"
  | "sha256"
  | "bytes"
  | "loadMs"
  | "memoryBytes"
  | "golden"
  | "goldenDiff"
  | "restarts"
  | "recycles"
>;

export class ModelLifecycle<I extends EngineLoadInfo = EngineLoadInfo> {
  private state: ModelState = "loading";
  private reason: string | undefined = "loading";
  private code: ErrorCode | undefined = "MP_ERR_MODEL_NOT_READY";
  private loadInfo: I | undefined;
  private digest: { sha256: string; bytes: number } | undefined;
  private golden: ModelStatus["golden"];
  private goldenDiff: ModelStatus["goldenDiff"];
  private queue: ServingQueue | undefined;
  private restarts = 0;
  private crashStreak = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private recycles = 0;
  private recycling = false;
  /** Date.now() before which a recycle request is ignored. */
  private nextRecycleAt = 0;
  /** Bumped whenever a crash restart or close() takes the model over: a recycle that sees it change stops. */
  private epoch = 0;
  private closing: Promise<void> | undefined;
  private readonly minRecycleIntervalMs: number;

  constructor(
    private readonly spec: LifecycleSpec,
    private readonly engine: Engine<I>,
    private readonly hooks: LifecycleHooks<I>,
    private readonly log: Logger,
  ) {
    this.golden = hooks.golden ? "pending" : "none";
    this.minRecycleIntervalMs = spec.minRecycleIntervalMs ?? MIN_RECYCLE_INTERVAL_MS;
    engine.onCrash?.((why) => this.onCrash(why));
    engine.onRecycleNeeded?.((why) => this.onRecycleNeeded(why));
  }

  get ready(): boolean {
    return this.state === "ready";
  }

  get currentState(): ModelState {
    return this.state;
  }

  /** What the last load reported. */
  get info(): I | undefined {
    return this.loadInfo;
  }

  /** Verifies, loads and golden-checks the model. Never rejects: failures become the not-ready reason. */
  async start(): Promise<void> {
    const s = this.spec;
    try {
      if (s.path !== undefined) {
        this.digest = await fileDigest(s.path);
        if (s.sha256 && s.sha256 !== this.digest.sha256) {
          throw new ModelportError(
            "MP_ERR_MODEL_CHECKSUM_MISMATCH",
            `sha256 of ${s.path} is ${this.digest.sha256} but ${s.sha256Source ?? "the config"} says ${s.sha256}: the file changed or is not the expected one; not loaded`,
          );
        }
      }
      await this.load();
    } catch (err) {
      const e = asModelportError(err);
      this.fail(e.code, e.message);
    }
  }

  private async load(): Promise<void> {
    const info = await this.engine.start();
    if (this.state === "closed") return;
    this.loadInfo = info;
    this.hooks.loaded?.(info);
    this.queue = this.hooks.attach?.(info);
    await this.checkGolden(false);
    if (this.isClosed()) return;
    this.crashStreak = 0;
    this.setState("ready", undefined, undefined);
  }

  /**
   * Runs the golden check. A check that does not finish within the hard limit terminates the
   * engine and fails: a model that hangs on its own golden example is not ready.
   */
  private async checkGolden(direct: boolean): Promise<void> {
    const check = this.hooks.golden;
    if (!check) {
      this.golden = "none";
      this.log.warn(
        `${this.spec.name} has no golden file: it is ready once loaded, but wrong answers would go unnoticed (modelport golden record)`,
      );
      return;
    }
    const verdict = await this.withinHardLimit(check(direct));
    if (!verdict.passed) {
      this.golden = "failed";
      this.goldenDiff = verdict.diff;
      throw new ModelportError("MP_ERR_MODEL_GOLDEN_MISMATCH", verdict.message);
    }
    this.golden = "passed";
    this.goldenDiff = undefined;
    this.log.info({ golden: this.spec.golden }, `${this.spec.name} matches its golden example`);
  }

  /** `call`, or a rejection after the hard limit, when the engine is terminated. */
  private async withinHardLimit<T>(call: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const why = `the golden example did not finish within limits.hardTimeoutMs (${this.spec.hardTimeoutMs} ms)`;
        call.catch(() => {}); // it fails when the engine is terminated
        void this.engine.terminate?.(why);
        reject(new ModelportError("MP_ERR_MODEL_LOAD_FAILED", `${why}; the runner was stopped`));
      }, this.spec.hardTimeoutMs);
    });
    try {
      return await Promise.race([call, limit]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * MP_ERR_SERVER_SHUTTING_DOWN once closed; the failure's own code (checksum, golden, load) when
   * the model failed for good, since a retry cannot help until a fixed file is loaded; else
   * MP_ERR_MODEL_NOT_READY (loading, restarting), which a retry after Retry-After can cure.
   */
  notReadyError(): ModelportError {
    const name = this.spec.name;
    if (this.state === "closed") {
      return new ModelportError("MP_ERR_SERVER_SHUTTING_DOWN", `model '${name}' is closed`, { model: name });
    }
    if (this.state === "failed" && this.code && !ERRORS[this.code].retryable) {
      return new ModelportError(
        this.code,
        `model '${name}' failed and will not become ready by itself: ${this.reason ?? "failed"}. A retry cannot help; fix the model and load it again (POST /v2/repository/models/${name}/load) or restart the server`,
        { model: name, state: this.state, cause: this.code },
      );
    }
    return new ModelportError(
      "MP_ERR_MODEL_NOT_READY",
      `model '${name}' is not ready: ${this.reason ?? this.state}`,
      {
        model: name,
        state: this.state,
        ...(this.code ? { cause: this.code } : {}),
        retryAfterSeconds: 1,
      },
    );
  }

  status(): LifecycleStatus {
    const info = this.loadInfo;
    return {
      state: this.state,
      ready: this.state === "ready",
      ...(this.reason && this.state !== "ready" ? { reason: this.reason } : {}),
      ...(this.code && this.state !== "ready" ? { code: this.code } : {}),
      ...(this.digest ? { sha256: this.digest.sha256, bytes: this.digest.bytes } : {}),
      ...(info ? { loadMs: info.loadMs } : {}),
      ...(info?.memoryBytes !== undefined ? { memoryBytes: info.memoryBytes } : {}),
      golden: this.golden,
      ...(this.goldenDiff ? { goldenDiff: this.goldenDiff } : {}),
      restarts: this.restarts,
      recycles: this.recycles,
    };
  }

  /** Idempotent: fails what is queued with MP_ERR_SERVER_SHUTTING_DOWN and closes the engine. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.epoch++;
      if (this.restartTimer) clearTimeout(this.restartTimer);
      this.setState("closed", "closed", "MP_ERR_SERVER_SHUTTING_DOWN");
      this.queue?.failQueued(
        new ModelportError(
          "MP_ERR_SERVER_SHUTTING_DOWN",
          "the server is shutting down; retry on another instance",
        ),
      );
      await this.engine.close();
    })();
    return this.closing;
  }

  private onCrash(why: string): void {
    if (this.state === "closed") return;
    this.epoch++;
    this.queue?.failQueued(
      new ModelportError(
        "MP_ERR_RUNNER_CRASHED",
        `the runner for ${this.spec.name} stopped (${why}); retry shortly`,
      ),
    );
    const delay = restartDelayMs(this.crashStreak++);
    this.setState(
      "restarting",
      `the runner stopped (${why}); restarting in ${delay} ms`,
      "MP_ERR_RUNNER_CRASHED",
    );
    this.log.error(
      { delayMs: delay, restarts: this.restarts },
      `${this.spec.name}: runner stopped (${why}); restarting`,
    );
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.restarts++;
      this.load().catch((err) => {
        const e = asModelportError(err);
        this.fail(e.code, e.message);
      });
    }, delay);
    this.restartTimer.unref();
  }

  /**
   * The engine is healthy but should be replaced (its memory passed the ceiling). Ignored while
   * not ready (a crash restart is already replacing it), while a recycle runs, and for
   * minRecycleIntervalMs after the last one.
   */
  private onRecycleNeeded(why: string): void {
    const queue = this.queue;
    if (this.state !== "ready" || this.recycling || !queue || Date.now() < this.nextRecycleAt) return;
    this.recycling = true;
    void this.recycle(why, queue).finally(() => {
      this.recycling = false;
      this.nextRecycleAt = Date.now() + this.minRecycleIntervalMs;
    });
  }

  /**
   * Pause the queue, let the calls in flight finish, close and restart the engine, check the
   * golden example, resume. The model stays ready: requests queue meanwhile (their deadlines
   * still apply). A crash or close meanwhile takes over; a failed restart or golden check makes
   * the model not ready, as a failed restart after a crash does.
   */
  private async recycle(why: string, queue: ServingQueue): Promise<void> {
    const name = this.spec.name;
    const started = performance.now();
    const current = () => this.state === "ready" && this.queue === queue;
    this.log.warn(
      { reason: why, recycles: this.recycles },
      `${name}: recycling the runner (${why}): draining, then restarting it`,
    );
    queue.pause();
    try {
      await queue.whenIdle();
      if (!current()) return;
      await this.engine.close();
      if (!current()) return;
      this.recycles++;
      const info = await this.engine.start();
      if (this.state === "closed") {
        await this.engine.close();
        return;
      }
      this.loadInfo = info;
      this.hooks.loaded?.(info);
      await this.checkGolden(true);
      if (!current()) return;
      const ms = performance.now() - started;
      this.log.info(
        { recycles: this.recycles, ms: Math.round(ms), memoryBytes: info.memoryBytes },
        `${name}: runner recycled in ${ms.toFixed(0)} ms; serving again`,
      );
    } catch (err) {
      if (!current()) return; // a crash restart or shutdown owns the model now
      const e = asModelportError(err);
      this.fail(e.code, `recycling the runner failed: ${e.message}`);
      queue.failQueued(this.notReadyError());
    } finally {
      queue.resume();
    }
  }

  /**
   * The serving queue reports a call on the engine past the hard limit. While ready: replace the
   * engine. During a memory recycle (which waits for that call to drain): stop the engine so the
   * recycle goes on. Otherwise a restart already owns the engine.
   */
  stuck(elapsedMs: number, rows: number): void {
    const why = `was stuck on a batch of ${rows} row(s) for ${Math.round(elapsedMs)} ms, past limits.hardTimeoutMs (${this.spec.hardTimeoutMs} ms), and was stopped`;
    const queue = this.queue;
    if (this.state !== "ready" || !queue) return;
    if (this.recycling) {
      void this.engine.terminate?.(`it ${why}`);
      return;
    }
    this.recycling = true;
    void this.replaceStuck(why, queue).finally(() => {
      this.recycling = false;
    });
  }

  /**
   * Stop the stuck engine at once (the requests of its call fail with a retryable 503), report
   * not ready with the reason, start a fresh engine, check the golden example, and resume the
   * queue: requests that were waiting run on the new engine within their own deadlines (those
   * the restart outlasts get 504). A failed restart leaves the model not ready and fails the
   * queue, as a failed restart after a crash does.
   */
  private async replaceStuck(why: string, queue: ServingQueue): Promise<void> {
    const name = this.spec.name;
    const epoch = this.epoch;
    const current = () => this.epoch === epoch && this.state !== "closed";
    const started = performance.now();
    queue.pause();
    this.setState("restarting", `the runner ${why}; restarting it`, "MP_ERR_RUNNER_CRASHED");
    this.log.error(
      { recycles: this.recycles, hardTimeoutMs: this.spec.hardTimeoutMs },
      `${name}: the runner ${why}; restarting it`,
    );
    try {
      if (this.engine.terminate) await this.engine.terminate(`it ${why}`);
      else await this.engine.close();
      if (!current()) return;
      this.recycles++;
      const info = await this.engine.start();
      if (this.state === "closed") {
        await this.engine.close();
        return;
      }
      if (!current()) return;
      this.loadInfo = info;
      this.hooks.loaded?.(info);
      await this.checkGolden(true);
      if (!current()) return;
      this.setState("ready", undefined, undefined);
      const ms = performance.now() - started;
      this.log.info(
        { recycles: this.recycles, ms: Math.round(ms) },
        `${name}: stuck runner replaced in ${ms.toFixed(0)} ms; serving again`,
      );
    } catch (err) {
      if (!current()) return;
      const e = asModelportError(err);
      this.fail(e.code, `restarting the stuck runner failed: ${e.message}`);
      queue.failQueued(this.notReadyError());
    } finally {
      queue.resume();
    }
  }

  /** Read anew after an await: close() may have run meanwhile. */
  private isClosed(): boolean {
    return this.state === "closed";
  }

  private fail(code: ErrorCode, reason: string): void {
    if (this.state === "closed") return;
    this.log.error({ code }, `${this.spec.name} is not ready: ${reason}`);
    this.setState("failed", reason, code);
  }

  private setState(state: ModelState, reason: string | undefined, code: ErrorCode | undefined): void {
    this.state = state;
    this.reason = reason;
    this.code = code;
    this.hooks.stateChanged?.(state);
  }
}
