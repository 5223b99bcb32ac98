// One served model's lifecycle: verify the file's sha256, load it in its runner, score the
// golden example, and only then report ready. Requests go through the model's batcher. When
// the runner dies, queued work fails with a retryable code, the runner restarts with backoff,
// and the model is ready again only after its golden check passes again. When the runner asks
// to be recycled (a child process above its memory ceiling), the queue is paused and drained,
// the runner restarted and golden-checked, and the queue resumed: no request is lost, and the
// model stays ready throughout. When the runner is stuck on one batch past the hard limit
// (limits.hardTimeoutMs), it is terminated (thread) or killed (child process) at once: the
// model says not ready with the reason, the requests of that batch fail (503, retryable),
// queued requests wait within their own deadlines, and once a fresh runner passes its golden
// check the model is ready again and the queue runs on it.
import type { Logger } from "pino";
import { hardTimeoutMs, type ModelConfig } from "../config/schema.js";
import { type ErrorCode, isModelportError, ModelportError } from "../errors.js";
import { CostMeter } from "../metrics/cost.js";
import type { Metrics } from "../metrics/metrics.js";
import { Batcher, type BatcherObserver, type SubmitOptions } from "../runner/batcher.js";
import { ProcessRunner } from "../runner/process-runner.js";
import type { Runner, RunnerLoadInfo, RunnerSpec } from "../runner/runner.js";
import { WorkerRunner } from "../runner/worker-runner.js";
import type { ModelSignature, TensorMap } from "../tensor.js";
import { fileDigest } from "./file-digest.js";
import { compareGolden, goldenInputs, readGolden } from "./golden-check.js";
import type { ModelState, ModelStatus, ServedModel } from "./served-model.js";

export type { ModelState, ModelStatus } from "./served-model.js";

export type RunnerFactory = (config: ModelConfig) => Runner;

const defaultRunnerFactory: RunnerFactory = (c) => {
  const spec: RunnerSpec = {
    name: c.name,
    backend: c.backend,
    path: c.path,
    threads: c.threads,
    device: c.device,
    options: { ...c.options },
  };
  if (c.placement === "process") {
    return new ProcessRunner(c.maxRssMb ? { ...spec, maxRssMb: c.maxRssMb } : spec);
  }
  return new WorkerRunner(spec);
};

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

export interface ModelHostOptions {
  runnerFactory?: RunnerFactory;
  metrics?: Metrics;
  /** Overrides MIN_RECYCLE_INTERVAL_MS (tests). */
  minRecycleIntervalMs?: number;
}

export class ModelHost implements ServedModel {
  readonly config: ModelConfig;
  private readonly runner: Runner;
  private readonly log: Logger;
  private readonly metrics: Metrics | undefined;
  private state: ModelState = "loading";
  private reason: string | undefined = "loading";
  private code: ErrorCode | undefined = "MP_ERR_MODEL_NOT_READY";
  private info: RunnerLoadInfo | undefined;
  private digest: { sha256: string; bytes: number } | undefined;
  private golden: ModelStatus["golden"] = "pending";
  private goldenDiff: ModelStatus["goldenDiff"];
  private batcher: Batcher | undefined;
  private restarts = 0;
  private crashStreak = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private recycles = 0;
  private recycling = false;
  /** Date.now() before which a recycle request is ignored. */
  private nextRecycleAt = 0;
  private readonly minRecycleIntervalMs: number;
  private warnedCeiling = false;
  /** Bumped whenever a crash restart or close() takes the model over: a recycle that sees it change stops. */
  private epoch = 0;
  private readonly hardTimeoutMs: number;
  /** Compute time and its cost per request (src/metrics/cost.ts), fed by the batcher's observer. */
  readonly cost: CostMeter;

  constructor(config: ModelConfig, log: Logger, options: ModelHostOptions = {}) {
    this.config = config;
    this.runner = (options.runnerFactory ?? defaultRunnerFactory)(config);
    this.log = log.child({ model: config.name });
    this.metrics = options.metrics;
    this.cost = new CostMeter(config.name, { pricePerHour: config.pricePerHour }, options.metrics?.cost);
    this.minRecycleIntervalMs = options.minRecycleIntervalMs ?? MIN_RECYCLE_INTERVAL_MS;
    this.hardTimeoutMs = hardTimeoutMs(config.limits);
    this.runner.onCrash((why) => this.onCrash(why));
    this.runner.onRecycleNeeded?.((why) => this.onRecycleNeeded(why));
  }

  get ready(): boolean {
    return this.state === "ready";
  }

  get signature(): ModelSignature | undefined {
    return this.info?.signature;
  }

  /** Verifies, loads and golden-checks the model. Never throws: failures become the not-ready reason. */
  async start(): Promise<void> {
    const c = this.config;
    if (c.maxRssMb && c.placement !== "process") {
      this.log.warn(
        `${c.name}: maxRssMb applies to placement "process" only; the worker thread shares the server's memory, so it is ignored`,
      );
    }
    try {
      this.digest = await fileDigest(c.path);
      if (c.sha256 && c.sha256 !== this.digest.sha256) {
        throw new ModelportError(
          "MP_ERR_MODEL_CHECKSUM_MISMATCH",
          `sha256 of ${c.path} is ${this.digest.sha256} but ${c.sha256Source} says ${c.sha256}: the file changed or is not the expected one; not loaded`,
        );
      }
      await this.load();
    } catch (err) {
      const e = isModelportError(err) ? err : new ModelportError("MP_ERR_MODEL_LOAD_FAILED", String(err));
      this.fail(e.code, e.message);
    }
  }

  private async load(): Promise<void> {
    const c = this.config;
    this.info = await this.runner.start();
    this.checkCeiling(this.info);
    this.log.info(
      {
        file: c.path,
        fileBytes: this.digest?.bytes,
        sha256: this.digest?.sha256,
        loadMs: Math.round(this.info.loadMs * 10) / 10,
        memoryAddedBytes: this.info.memoryBytes,
        threads: c.threads,
      },
      `loaded ${c.name}: ${((this.digest?.bytes ?? 0) / 1024).toFixed(1)} KiB in ${this.info.loadMs.toFixed(1)} ms, +${(this.info.memoryBytes / 1048576).toFixed(1)} MiB`,
    );
    const batcher = this.createBatcher(this.info.signature);
    this.batcher = batcher;
    await this.checkGolden((inputs) => batcher.submit(inputs));
    this.crashStreak = 0;
    this.setState("ready", undefined, undefined);
  }

  private createBatcher(signature: ModelSignature): Batcher {
    const b = this.config.batching;
    const enabled = (b.enabled ?? true) && signature.batchable;
    if (b.enabled && !signature.batchable) {
      this.log.warn(
        `${this.config.name}: batching is on in config but the model has no dynamic batch dim 0 on every input and output; it runs one request per call`,
      );
    }
    return new Batcher((inputs) => this.runner.predict(inputs), {
      ...b,
      batchable: enabled,
      maxQueueRows: this.config.limits.maxQueueRows,
      observer: this.observer(),
      hardTimeoutMs: this.hardTimeoutMs,
      onStuck: (ms, rows) => this.onStuck(ms, rows),
      onInternalError: (err) => this.log.error({ err }, `${this.config.name}: batcher error (contained)`),
    });
  }

  private observer(): BatcherObserver | undefined {
    const m = this.metrics;
    if (!m) return undefined;
    const model = this.config.name;
    const labels = { model };
    const batchRows = m.batchRows.labels(labels);
    const inference = m.inferenceDuration.labels(labels);
    const wait = m.queueWait.labels(labels);
    const depth = m.queueDepth.labels(labels);
    const cost = this.cost;
    return {
      batch(rows, requests, ms) {
        batchRows.observe(rows);
        inference.observe(ms / 1000);
        cost.batch(requests, ms);
      },
      queueWait: (ms) => wait.observe(ms / 1000),
      queueDepth: (rows) => depth.set(rows),
      rejected: (reason) => m.rejections.inc({ model, reason }),
    };
  }

  /** Warns once when a freshly loaded runner is already above its memory ceiling. */
  private checkCeiling(info: RunnerLoadInfo): void {
    const max = this.config.maxRssMb;
    if (!max || this.config.placement !== "process" || this.warnedCeiling) return;
    if (info.memoryBytes <= max * 1048576) return;
    this.warnedCeiling = true;
    this.log.warn(
      `${this.config.name}: the runner uses ${(info.memoryBytes / 1048576).toFixed(1)} MiB right after loading, above maxRssMb ${max}; it will be recycled at most once per ${this.minRecycleIntervalMs / 1000} s. Raise maxRssMb above the model's own footprint`,
    );
  }

  /**
   * Scores the golden example through the queue, or straight on the runner (`run`) while the
   * queue is paused. A runner that does not answer within the hard limit is terminated and the
   * check fails: a model that hangs on its own golden example is not ready.
   */
  private async checkGolden(run: (inputs: TensorMap) => Promise<TensorMap>): Promise<void> {
    const c = this.config;
    if (!c.golden) {
      this.golden = "none";
      this.log.warn(
        `${c.name} has no golden file: it is ready once loaded, but wrong answers would go unnoticed (modelport golden record)`,
      );
      return;
    }
    const golden = await readGolden(c.golden);
    const outputs = await this.withinHardLimit(run(goldenInputs(golden, this.info!.signature)));
    const diffs = compareGolden(golden, outputs, c.tolerance);
    if (diffs.length) {
      this.golden = "failed";
      this.goldenDiff = diffs;
      throw new ModelportError(
        "MP_ERR_MODEL_GOLDEN_MISMATCH",
        `golden check failed (${c.golden}): ${diffs.map((d) => `output '${d.output}': ${d.problem}`).join("; ")}`,
      );
    }
    this.golden = "passed";
    this.goldenDiff = undefined;
    this.log.info({ golden: c.golden }, `${c.name} matches its golden example`);
  }

  /** `call`, or a rejection after the hard limit, when the runner is terminated. */
  private async withinHardLimit<T>(call: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const why = `the golden example did not finish within limits.hardTimeoutMs (${this.hardTimeoutMs} ms)`;
        call.catch(() => {}); // it fails when the runner is terminated
        void this.runner.terminate?.(why);
        reject(new ModelportError("MP_ERR_MODEL_LOAD_FAILED", `${why}; the runner was stopped`));
      }, this.hardTimeoutMs);
    });
    try {
      return await Promise.race([call, limit]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Scores inputs through the batcher.
   * @throws ModelportError MP_ERR_MODEL_NOT_READY when not ready; the batcher's codes otherwise.
   */
  predict(inputs: TensorMap, options?: SubmitOptions): Promise<TensorMap> {
    if (this.state !== "ready" || !this.batcher) return Promise.reject(this.notReadyError());
    return this.batcher.submit(inputs, options);
  }

  notReadyError(): ModelportError {
    return new ModelportError(
      "MP_ERR_MODEL_NOT_READY",
      `model '${this.config.name}' is not ready: ${this.reason ?? this.state}`,
      {
        model: this.config.name,
        state: this.state,
        ...(this.code ? { cause: this.code } : {}),
      },
    );
  }

  status(): ModelStatus {
    const c = this.config;
    const depth = this.batcher?.depth ?? { queuedRows: 0, inFlight: 0 };
    return {
      name: c.name,
      version: c.version,
      backend: c.backend,
      path: c.path,
      state: this.state,
      ready: this.state === "ready",
      ...(this.reason ? { reason: this.reason } : {}),
      ...(this.code && this.state !== "ready" ? { code: this.code } : {}),
      ...(this.digest ? { sha256: this.digest.sha256, bytes: this.digest.bytes } : {}),
      ...(this.info ? { loadMs: this.info.loadMs, memoryBytes: this.info.memoryBytes } : {}),
      golden: this.golden,
      ...(this.goldenDiff ? { goldenDiff: this.goldenDiff } : {}),
      restarts: this.restarts,
      recycles: this.recycles,
      runner: {
        placement: c.placement,
        ...(this.runner.pid !== undefined ? { pid: this.runner.pid } : {}),
      },
      batching: {
        enabled: (c.batching.enabled ?? true) && (this.info?.signature.batchable ?? false),
        maxBatchRows: c.batching.maxBatchRows,
        maxDelayMs: c.batching.maxDelayMs,
        ...depth,
      },
      cost: this.cost.snapshot(),
    };
  }

  async close(): Promise<void> {
    this.epoch++;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.setState("closed", "closed", "MP_ERR_SERVER_SHUTTING_DOWN");
    this.batcher?.failQueued(
      new ModelportError(
        "MP_ERR_SERVER_SHUTTING_DOWN",
        "the server is shutting down; retry on another instance",
      ),
    );
    await this.runner.close();
  }

  private onCrash(why: string): void {
    if (this.state === "closed") return;
    this.epoch++;
    this.batcher?.failQueued(
      new ModelportError(
        "MP_ERR_RUNNER_CRASHED",
        `the runner for ${this.config.name} stopped (${why}); retry shortly`,
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
      `${this.config.name}: runner stopped (${why}); restarting`,
    );
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.restarts++;
      this.load().catch((err) => {
        const e = isModelportError(err) ? err : new ModelportError("MP_ERR_MODEL_LOAD_FAILED", String(err));
        this.fail(e.code, e.message);
      });
    }, delay);
    this.restartTimer.unref();
  }

  /**
   * The runner is healthy but should be replaced (its memory passed the ceiling). Ignored while
   * not ready (a crash restart is already replacing it), while a recycle runs, and for
   * MIN_RECYCLE_INTERVAL_MS after the last one.
   */
  private onRecycleNeeded(why: string): void {
    const batcher = this.batcher;
    if (this.state !== "ready" || this.recycling || !batcher || Date.now() < this.nextRecycleAt) return;
    this.recycling = true;
    void this.recycle(why, batcher).finally(() => {
      this.recycling = false;
      this.nextRecycleAt = Date.now() + this.minRecycleIntervalMs;
    });
  }

  /**
   * Pause the queue, let the batches in flight finish, close and restart the runner, check the
   * golden example, resume. The model stays ready: requests queue meanwhile (their deadlines
   * still apply). A crash or close meanwhile takes over; a failed restart or golden check makes
   * the model not ready, as a failed restart after a crash does.
   */
  private async recycle(why: string, batcher: Batcher): Promise<void> {
    const c = this.config;
    const started = performance.now();
    const current = () => this.state === "ready" && this.batcher === batcher;
    this.log.warn(
      { reason: why, recycles: this.recycles, queuedRows: batcher.depth.queuedRows },
      `${c.name}: recycling the runner (${why}): draining, then restarting it`,
    );
    batcher.pause();
    try {
      await batcher.whenIdle();
      if (!current()) return;
      await this.runner.close();
      if (!current()) return;
      this.recycles++;
      const info = await this.runner.start();
      if (this.state === "closed") {
        await this.runner.close();
        return;
      }
      this.info = info;
      this.checkCeiling(info);
      await this.checkGolden((inputs) => this.runner.predict(inputs));
      if (!current()) return;
      this.log.info(
        {
          recycles: this.recycles,
          ms: Math.round(performance.now() - started),
          memoryBytes: info.memoryBytes,
        },
        `${c.name}: runner recycled in ${(performance.now() - started).toFixed(0)} ms; serving again`,
      );
    } catch (err) {
      if (!current()) return; // a crash restart or shutdown owns the model now
      const e = isModelportError(err) ? err : new ModelportError("MP_ERR_MODEL_LOAD_FAILED", String(err));
      this.fail(e.code, `recycling the runner failed: ${e.message}`);
      batcher.failQueued(this.notReadyError());
    } finally {
      batcher.resume();
    }
  }

  /**
   * The batcher reports a batch on the runner past the hard limit. While ready: recycle the
   * runner. During a memory recycle (which waits for that batch to drain): stop the runner so
   * the recycle goes on. Otherwise a restart already owns the runner.
   */
  private onStuck(elapsedMs: number, rows: number): void {
    const why = `was stuck on a batch of ${rows} row(s) for ${Math.round(elapsedMs)} ms, past limits.hardTimeoutMs (${this.hardTimeoutMs} ms), and was stopped`;
    const batcher = this.batcher;
    if (this.state !== "ready" || !batcher) return;
    if (this.recycling) {
      void this.runner.terminate?.(`it ${why}`);
      return;
    }
    this.recycling = true;
    void this.recycleStuck(why, batcher).finally(() => {
      this.recycling = false;
    });
  }

  /**
   * Stop the stuck runner at once (the requests of its batches fail with a retryable 503),
   * report not ready with the reason, start a fresh runner, check the golden example, and
   * resume the queue: requests that were waiting run on the new runner within their own
   * deadlines (those the recycle outlasts get 504). A failed restart leaves the model not ready
   * and fails the queue, as a failed restart after a crash does.
   */
  private async recycleStuck(why: string, batcher: Batcher): Promise<void> {
    const c = this.config;
    const epoch = this.epoch;
    const current = () => this.epoch === epoch && this.state !== "closed";
    const started = performance.now();
    batcher.pause();
    this.setState("restarting", `the runner ${why}; restarting it`, "MP_ERR_RUNNER_CRASHED");
    this.log.error(
      { recycles: this.recycles, queuedRows: batcher.depth.queuedRows, hardTimeoutMs: this.hardTimeoutMs },
      `${c.name}: the runner ${why}; restarting it`,
    );
    try {
      if (this.runner.terminate) await this.runner.terminate(`it ${why}`);
      else await this.runner.close();
      if (!current()) return;
      this.recycles++;
      const info = await this.runner.start();
      if (this.state === "closed") {
        await this.runner.close();
        return;
      }
      if (!current()) return;
      this.info = info;
      this.checkCeiling(info);
      await this.checkGolden((inputs) => this.runner.predict(inputs));
      if (!current()) return;
      this.setState("ready", undefined, undefined);
      this.log.info(
        { recycles: this.recycles, ms: Math.round(performance.now() - started) },
        `${c.name}: stuck runner replaced in ${(performance.now() - started).toFixed(0)} ms; serving again`,
      );
    } catch (err) {
      if (!current()) return;
      const e = isModelportError(err) ? err : new ModelportError("MP_ERR_MODEL_LOAD_FAILED", String(err));
      this.fail(e.code, `restarting the stuck runner failed: ${e.message}`);
      batcher.failQueued(this.notReadyError());
    } finally {
      batcher.resume();
    }
  }

  private fail(code: ErrorCode, reason: string): void {
    if (this.state === "closed") return;
    this.log.error({ code }, `${this.config.name} is not ready: ${reason}`);
    this.setState("failed", reason, code);
  }

  private setState(state: ModelState, reason: string | undefined, code: ErrorCode | undefined): void {
    this.state = state;
    this.reason = reason;
    this.code = code;
    this.metrics?.modelReady.set({ model: this.config.name }, state === "ready" ? 1 : 0);
  }
}
