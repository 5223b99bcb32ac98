// One served model's lifecycle: verify the file's sha256, load it in its runner, score the
// golden example, and only then report ready. Requests go through the model's batcher. When
// the runner dies, queued work fails with a retryable code, the runner restarts with backoff,
// and the model is ready again only after its golden check passes again.
import type { Logger } from "pino";
import type { ModelConfig } from "../config/schema.js";
import { type ErrorCode, isModelportError, ModelportError } from "../errors.js";
import type { Metrics } from "../metrics/metrics.js";
import { Batcher, type BatcherObserver, type SubmitOptions } from "../runner/batcher.js";
import type { Runner, RunnerLoadInfo } from "../runner/runner.js";
import { WorkerRunner } from "../runner/worker-runner.js";
import type { ModelSignature, TensorMap } from "../tensor.js";
import { fileDigest } from "./file-digest.js";
import { compareGolden, goldenInputs, readGolden } from "./golden-check.js";

export type ModelState = "loading" | "ready" | "failed" | "restarting" | "closed";

export interface ModelStatus {
  name: string;
  version: string;
  backend: string;
  path: string;
  state: ModelState;
  ready: boolean;
  /** Why the model is not ready, in words; absent when ready. */
  reason?: string;
  code?: ErrorCode;
  sha256?: string;
  bytes?: number;
  loadMs?: number;
  memoryBytes?: number;
  golden: "passed" | "failed" | "none" | "pending";
  goldenDiff?: { output: string; problem: string }[];
  /** Times the runner was restarted after dying. */
  restarts: number;
  batching: {
    enabled: boolean;
    maxBatchRows: number;
    maxDelayMs: number;
    queuedRows: number;
    inFlight: number;
  };
}

export type RunnerFactory = (config: ModelConfig) => Runner;

const defaultRunnerFactory: RunnerFactory = (c) =>
  new WorkerRunner({
    name: c.name,
    backend: c.backend,
    path: c.path,
    threads: c.threads,
    options: { ...c.options },
  });

/** Restart delays after a crash: 0.5 s doubling to 30 s. */
export function restartDelayMs(attempt: number): number {
  return Math.min(30_000, 500 * 2 ** attempt);
}

export interface ModelHostOptions {
  runnerFactory?: RunnerFactory;
  metrics?: Metrics;
}

export class ModelHost {
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

  constructor(config: ModelConfig, log: Logger, options: ModelHostOptions = {}) {
    this.config = config;
    this.runner = (options.runnerFactory ?? defaultRunnerFactory)(config);
    this.log = log.child({ model: config.name });
    this.metrics = options.metrics;
    this.runner.onCrash((why) => this.onCrash(why));
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
    this.batcher = this.createBatcher(this.info.signature);
    await this.checkGolden();
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
    return {
      batch(rows, _requests, ms) {
        batchRows.observe(rows);
        inference.observe(ms / 1000);
      },
      queueWait: (ms) => wait.observe(ms / 1000),
      queueDepth: (rows) => depth.set(rows),
      rejected: (reason) => m.rejections.inc({ model, reason }),
    };
  }

  private async checkGolden(): Promise<void> {
    const c = this.config;
    if (!c.golden) {
      this.golden = "none";
      this.log.warn(
        `${c.name} has no golden file: it is ready once loaded, but wrong answers would go unnoticed (modelport golden record)`,
      );
      return;
    }
    const golden = await readGolden(c.golden);
    const outputs = await this.batcher!.submit(goldenInputs(golden, this.info!.signature));
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
      batching: {
        enabled: (c.batching.enabled ?? true) && (this.info?.signature.batchable ?? false),
        maxBatchRows: c.batching.maxBatchRows,
        maxDelayMs: c.batching.maxDelayMs,
        ...depth,
      },
    };
  }

  async close(): Promise<void> {
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
