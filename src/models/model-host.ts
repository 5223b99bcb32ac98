// One served model's lifecycle: verify the file's sha256, load it in its runner, score the
// golden example, and only then report ready. Holds the reason whenever it is not ready.
import type { Logger } from "pino";
import type { ModelConfig } from "../config/schema.js";
import { type ErrorCode, isModelportError, ModelportError } from "../errors.js";
import type { Runner, RunnerLoadInfo } from "../runner/runner.js";
import { WorkerRunner } from "../runner/worker-runner.js";
import type { ModelSignature, TensorMap } from "../tensor.js";
import { fileDigest } from "./file-digest.js";
import { compareGolden, goldenInputs, readGolden } from "./golden-check.js";

export type ModelState = "loading" | "ready" | "failed" | "closed";

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

export class ModelHost {
  readonly config: ModelConfig;
  private readonly runner: Runner;
  private readonly log: Logger;
  private state: ModelState = "loading";
  private reason: string | undefined = "loading";
  private code: ErrorCode | undefined = "MP_ERR_MODEL_NOT_READY";
  private info: RunnerLoadInfo | undefined;
  private digest: { sha256: string; bytes: number } | undefined;
  private golden: ModelStatus["golden"] = "pending";
  private goldenDiff: ModelStatus["goldenDiff"];
  private readonly listeners: ((host: ModelHost) => void)[] = [];

  constructor(config: ModelConfig, log: Logger, runnerFactory: RunnerFactory = defaultRunnerFactory) {
    this.config = config;
    this.runner = runnerFactory(config);
    this.log = log.child({ model: config.name });
    this.runner.onCrash((why) => this.fail("MP_ERR_RUNNER_CRASHED", `the runner stopped: ${why}`));
  }

  get ready(): boolean {
    return this.state === "ready";
  }

  get signature(): ModelSignature | undefined {
    return this.info?.signature;
  }

  /** Called whenever readiness changes. */
  onChange(listener: (host: ModelHost) => void): void {
    this.listeners.push(listener);
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
      this.info = await this.runner.start();
      this.log.info(
        {
          file: c.path,
          fileBytes: this.digest.bytes,
          sha256: this.digest.sha256,
          loadMs: Math.round(this.info.loadMs * 10) / 10,
          memoryAddedBytes: this.info.memoryBytes,
          threads: c.threads,
        },
        `loaded ${c.name}: ${(this.digest.bytes / 1024).toFixed(1)} KiB in ${this.info.loadMs.toFixed(1)} ms, +${(this.info.memoryBytes / 1048576).toFixed(1)} MiB`,
      );
      await this.checkGolden();
      this.setState("ready", undefined, undefined);
    } catch (err) {
      const e = isModelportError(err) ? err : new ModelportError("MP_ERR_MODEL_LOAD_FAILED", String(err));
      this.fail(e.code, e.message);
    }
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
    const outputs = await this.runner.predict(goldenInputs(golden, this.info!.signature));
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
    this.log.info({ golden: c.golden }, `${c.name} matches its golden example`);
  }

  /** Scores one batch. @throws ModelportError MP_ERR_MODEL_NOT_READY when the model is not ready. */
  predict(inputs: TensorMap): Promise<TensorMap> {
    if (this.state !== "ready") return Promise.reject(this.notReadyError());
    return this.runner.predict(inputs);
  }

  notReadyError(): ModelportError {
    return new ModelportError(
      "MP_ERR_MODEL_NOT_READY",
      `model '${this.config.name}' is not ready: ${this.reason ?? this.state}`,
      { model: this.config.name, state: this.state, ...(this.code ? { cause: this.code } : {}) },
    );
  }

  status(): ModelStatus {
    const c = this.config;
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
    };
  }

  async close(): Promise<void> {
    this.setState("closed", "closed", "MP_ERR_SERVER_SHUTTING_DOWN");
    await this.runner.close();
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
    for (const l of this.listeners) l(this);
  }
}
