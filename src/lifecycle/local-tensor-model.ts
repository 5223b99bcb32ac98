// A model whose weights live in a runner of this server (a worker thread or a child process):
// the tensor backends (onnx, custom) and transformers embeddings. The lifecycle is the one of
// every local model (model-lifecycle.ts); this file attaches what is tensor-specific to it by
// hooks: the batcher in front of the runner (with the metrics and cost observer), the tensor
// golden check, and the memory-ceiling warning. An embeddings model (backend transformers)
// takes its texts as a BYTES tensor through the same batcher, so concurrent requests share
// inferences, and answers embed() instead of predict().
import type { Logger } from "pino";
import { CancelHandle } from "../cancel.js";
import {
  type CallOptions,
  type Capabilities,
  EMBEDDINGS_CAPABILITIES,
  type ModelStatus,
  type ServedModel,
  TENSOR_CAPABILITIES,
} from "../catalogue/served-model.js";
import {
  batchingSchema,
  hardTimeoutMs,
  type LanguageModelConfig,
  type ModelConfig,
  withBatchDefaults,
} from "../config/schema.js";
import type { ModelportError } from "../errors.js";
import type { EmbedInput, EmbedOptions, EmbedResult } from "../llm/language-model.js";
import { CostMeter } from "../metrics/cost.js";
import type { Metrics } from "../metrics/metrics.js";
import type { Batcher } from "../runner/batcher.js";
import { ProcessRunner } from "../runner/process-runner.js";
import type { Runner, RunnerLoadInfo, RunnerSpec } from "../runner/runner.js";
import { WorkerRunner } from "../runner/worker-runner.js";
import type { ModelSignature, TensorMap } from "../tensor.js";
import { attachBatching } from "./batching-hook.js";
import { MIN_RECYCLE_INTERVAL_MS, ModelLifecycle } from "./model-lifecycle.js";
import { tensorGolden } from "./tensor-golden.js";

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
  // Small ONNX models on the CPU also get a copy in the server's thread (runner/inline-lane.ts).
  const inline = c.backend === "onnx" && c.device === "cpu" && c.batching.inlineMaxMs > 0;
  return new WorkerRunner(spec, { inline });
};

export interface LocalTensorModelOptions {
  runnerFactory?: RunnerFactory;
  metrics?: Metrics;
  /** Overrides MIN_RECYCLE_INTERVAL_MS (tests). */
  minRecycleIntervalMs?: number;
}

/** The runner settings of an embedding model: one worker, batching as configured. */
export function embeddingHostConfig(c: LanguageModelConfig): ModelConfig {
  return Object.freeze({
    name: c.name,
    backend: "transformers",
    path: c.path,
    version: c.version,
    ...(c.sha256 ? { sha256: c.sha256, ...(c.sha256Source ? { sha256Source: c.sha256Source } : {}) } : {}),
    ...(c.golden ? { golden: c.golden } : {}),
    // Float32 sums in another order than the golden file's float64 reference: 1e-4 is tight enough
    // to catch a wrong tokenizer, pooling or weight, and loose enough for rounding.
    tolerance: 1e-4,
    threads: c.threads,
    limits: c.limits,
    batching: c.batching ?? withBatchDefaults(batchingSchema.parse({}), "embeddings"),
    placement: "worker",
    device: "cpu",
    options: c.options,
    ...(c.description ? { description: c.description } : {}),
    ...(c.pricePerHour !== undefined ? { pricePerHour: c.pricePerHour } : {}),
  } satisfies ModelConfig);
}

export class LocalTensorModel implements ServedModel {
  readonly config: ModelConfig | LanguageModelConfig;
  readonly kind: "tensor" | "language";
  readonly capabilities: Capabilities;
  readonly created = Math.floor(Date.now() / 1000);
  /** Compute time and its cost per request (src/metrics/cost.ts), fed by the batcher's observer. */
  readonly cost: CostMeter;
  private readonly run: ModelConfig;
  private readonly runner: Runner;
  private readonly lifecycle: ModelLifecycle<RunnerLoadInfo>;
  private readonly log: Logger;
  private batcher: Batcher | undefined;
  private warnedCeiling = false;
  private activeEmbeds = 0;

  /** `config` is a tensor model's, or (backend transformers) an embeddings model's. */
  constructor(config: ModelConfig | LanguageModelConfig, log: Logger, options: LocalTensorModelOptions = {}) {
    this.config = config;
    const embeddings = config.backend === "transformers";
    const run = embeddings ? embeddingHostConfig(config as LanguageModelConfig) : (config as ModelConfig);
    this.run = run;
    this.kind = embeddings ? "language" : "tensor";
    this.capabilities = embeddings ? EMBEDDINGS_CAPABILITIES : TENSOR_CAPABILITIES;
    if (!embeddings) this.embed = undefined;
    this.log = log.child({ model: config.name });
    this.runner = (options.runnerFactory ?? defaultRunnerFactory)(run);
    this.runner.onComputed?.((outputs, ms) => this.batcher?.observeCompute(outputs, ms));
    const metrics = options.metrics;
    this.cost = new CostMeter(config.name, { pricePerHour: run.pricePerHour }, metrics?.cost);
    const minRecycleIntervalMs = options.minRecycleIntervalMs ?? MIN_RECYCLE_INTERVAL_MS;
    this.lifecycle = new ModelLifecycle(
      {
        name: run.name,
        path: run.path,
        ...(run.sha256 ? { sha256: run.sha256 } : {}),
        ...(run.sha256Source ? { sha256Source: run.sha256Source } : {}),
        ...(run.golden ? { golden: run.golden } : {}),
        hardTimeoutMs: hardTimeoutMs(run.limits),
        minRecycleIntervalMs,
      },
      this.runner,
      {
        loaded: (info) => this.loaded(info, minRecycleIntervalMs),
        attach: (info) => {
          this.batcher = attachBatching(run, info.signature, (inputs) => this.runner.predict(inputs), {
            log: this.log,
            ...(metrics ? { metrics } : {}),
            cost: this.cost,
            onStuck: (ms, rows) => this.lifecycle.stuck(ms, rows),
            inline: this.runner.inline,
          });
          return this.batcher;
        },
        ...(run.golden
          ? {
              // The in-thread copy answers requests too: it must score the golden example as well.
              golden: (direct: boolean) => {
                const lane = this.runner.inline;
                return tensorGolden(
                  run,
                  this.lifecycle.info!.signature,
                  (inputs) => (direct ? this.runner.predict(inputs) : this.batcher!.submit(inputs)),
                  lane ? { name: "the in-thread copy", run: lane.predict } : undefined,
                );
              },
            }
          : {}),
        stateChanged: (state) => metrics?.modelReady.set({ model: run.name }, state === "ready" ? 1 : 0),
      },
      this.log,
    );
  }

  get name(): string {
    return this.config.name;
  }

  get version(): string {
    return this.config.version;
  }

  get backend(): ModelConfig["backend"] {
    return this.run.backend;
  }

  get ready(): boolean {
    return this.lifecycle.ready;
  }

  get signature(): ModelSignature | undefined {
    return this.lifecycle.info?.signature;
  }

  /** Verifies, loads and golden-checks the model. Never throws: failures become the not-ready reason. */
  start(): Promise<void> {
    const c = this.run;
    if (c.maxRssMb && c.placement !== "process") {
      this.log.warn(
        `${c.name}: maxRssMb applies to placement "process" only; the worker thread shares the server's memory, so it is ignored`,
      );
    }
    return this.lifecycle.start();
  }

  private loaded(info: RunnerLoadInfo, minRecycleIntervalMs: number): void {
    const c = this.run;
    this.log.info(
      {
        file: c.path,
        loadMs: Math.round(info.loadMs * 10) / 10,
        memoryAddedBytes: info.memoryBytes,
        threads: c.threads,
      },
      `loaded ${c.name} in ${info.loadMs.toFixed(1)} ms, +${(info.memoryBytes / 1048576).toFixed(1)} MiB`,
    );
    // Warns once when a freshly loaded runner is already above its memory ceiling.
    const max = c.maxRssMb;
    if (!max || c.placement !== "process" || this.warnedCeiling || info.memoryBytes <= max * 1048576) return;
    this.warnedCeiling = true;
    this.log.warn(
      `${c.name}: the runner uses ${(info.memoryBytes / 1048576).toFixed(1)} MiB right after loading, above maxRssMb ${max}; it will be recycled at most once per ${minRecycleIntervalMs / 1000} s. Raise maxRssMb above the model's own footprint`,
    );
  }

  /**
   * Scores inputs through the batcher.
   * @throws ModelportError MP_ERR_MODEL_NOT_READY when not ready; the batcher's codes otherwise.
   */
  predict(inputs: TensorMap, options?: CallOptions): Promise<TensorMap> {
    if (!this.lifecycle.ready || !this.batcher) return Promise.reject(this.notReadyError());
    return this.batcher.submit(inputs, options);
  }

  /**
   * Embeds `inputs` through the batcher (so concurrent requests share inferences); backend
   * transformers only (undefined otherwise).
   * @throws ModelportError MP_ERR_MODEL_NOT_READY, MP_ERR_MODEL_OVERLOADED, MP_ERR_DEADLINE_EXCEEDED,
   * MP_ERR_REQUEST_CANCELED, MP_ERR_INFERENCE_FAILED; MP_ERR_REQUEST_INVALID for token ids the
   * model cannot take (empty, outside its vocabulary, longer than its positions).
   */
  embed?: (inputs: readonly EmbedInput[], options?: EmbedOptions) => Promise<EmbedResult> = async (
    inputs,
    options = {},
  ) => {
    this.activeEmbeds++;
    try {
      // Texts and token ids go as two inputs (ids as BYTES rows of comma-joined ids), so each
      // batches with its own kind; a request holding both sends two calls.
      const texts: number[] = [];
      const tokenized: number[] = [];
      for (const [i, x] of inputs.entries()) (typeof x === "string" ? texts : tokenized).push(i);
      const call = (name: "text" | "ids", rows: number[]) =>
        rows.length === 0
          ? undefined
          : this.predict(
              {
                [name]: {
                  datatype: "BYTES",
                  shape: [rows.length],
                  data: rows.map((i) =>
                    name === "text" ? (inputs[i] as string) : (inputs[i] as number[]).join(","),
                  ),
                },
              },
              {
                deadline: performance.now() + this.run.limits.timeoutMs,
                cancel: options.cancel ?? new CancelHandle(),
                ...(options.background ? { background: true } : {}),
                ...(options.onCompute ? { onCompute: options.onCompute } : {}),
              },
            );
      const parts = await Promise.all([call("text", texts), call("ids", tokenized)]);
      const vectors: Float32Array[] = new Array(inputs.length);
      let promptTokens = 0;
      [texts, tokenized].forEach((rows, k) => {
        const out = parts[k];
        if (!out) return;
        const emb = out.embedding!;
        const dim = emb.shape[1]!;
        const data = emb.data as Float32Array;
        rows.forEach((i, r) => {
          vectors[i] = data.subarray(r * dim, (r + 1) * dim);
        });
        for (const t of out.tokens!.data as Int32Array) promptTokens += t;
      });
      this.cost.countTokens(promptTokens);
      return { vectors, promptTokens };
    } finally {
      this.activeEmbeds--;
    }
  };

  notReadyError(): ModelportError {
    return this.lifecycle.notReadyError();
  }

  status(): ModelStatus {
    const c = this.run;
    const depth = this.batcher?.depth ?? { queuedRows: 0, inFlight: 0 };
    return {
      name: c.name,
      version: c.version,
      backend: c.backend,
      path: c.path,
      ...this.lifecycle.status(),
      runner: {
        placement: c.placement,
        ...(this.runner.pid !== undefined ? { pid: this.runner.pid } : {}),
      },
      batching: {
        enabled: (c.batching.enabled ?? true) && (this.signature?.batchable ?? false),
        maxBatchRows: c.batching.maxBatchRows,
        maxDelayMs: c.batching.maxDelayMs,
        ...depth,
        inline: this.inlineStatus(),
        runnerBusyMs: Math.round(this.batcher?.runnerBusyMs ?? 0),
      },
      ...(this.kind === "language"
        ? {
            concurrency: {
              active: this.activeEmbeds,
              waiting: depth.queuedRows,
              limit: c.limits.maxQueueRows,
            },
          }
        : {}),
      cost: this.cost.snapshot(),
    };
  }

  private inlineStatus(): { state: string; maxMs: number; calls: number } {
    const maxMs = this.run.batching.inlineMaxMs;
    const lane = this.batcher?.inlineStatus ?? { active: false, calls: 0 };
    const why = this.lifecycle.info?.inline;
    const state = lane.active ? "active" : why === "loaded" ? "dropped" : (why ?? "off");
    return { state, maxMs, calls: lane.calls };
  }

  close(): Promise<void> {
    return this.lifecycle.close();
  }
}
