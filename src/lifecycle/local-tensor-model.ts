// An embedding model (backend `transformers`) as a LanguageModel, so the OpenAI routes serve
// it. The work is done by a ModelHost like any tensor model: a worker thread owns the
// transformers.js session (transformers-backend.ts), the adaptive batcher joins concurrent
// requests' texts into one inference, the golden text's embedding must match before the model
// is ready, and a crash restarts the worker. Texts travel as a BYTES tensor, so the batcher
// needs no special case.
import type { Logger } from "pino";
import { batchingSchema, type LanguageModelConfig, type ModelConfig } from "../../config/schema.js";
import { ModelportError } from "../../errors.js";
import type {
  EmbedResult,
  GenerateResult,
  LanguageModel,
  LanguageModelCapabilities,
  LanguageModelStatus,
} from "../../llm/language-model.js";
import type { CostSnapshot } from "../../metrics/cost.js";
import type { Metrics } from "../../metrics/metrics.js";
import { ModelHost } from "../../models/model-host.js";
import type { ModelStatus } from "../../models/served-model.js";
import { CancelHandle } from "../../runner/cancel.js";

export interface TransformersModelOptions {
  metrics?: Metrics;
}

/** The ModelHost settings of an embedding model: one worker, batching as configured. */
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
    batching: c.batching ?? batchingSchema.parse({}),
    placement: "worker",
    device: "cpu",
    options: c.options,
    ...(c.description ? { description: c.description } : {}),
    ...(c.pricePerHour !== undefined ? { pricePerHour: c.pricePerHour } : {}),
  } satisfies ModelConfig);
}

export class TransformersLanguageModel implements LanguageModel {
  readonly name: string;
  readonly backend = "transformers" as const;
  readonly capabilities: LanguageModelCapabilities = { chat: false, completion: false, embeddings: true };
  readonly created = Math.floor(Date.now() / 1000);
  private readonly host: ModelHost;
  private active = 0;

  constructor(
    readonly config: LanguageModelConfig,
    log: Logger,
    options: TransformersModelOptions = {},
  ) {
    this.name = config.name;
    this.host = new ModelHost(embeddingHostConfig(config), log, {
      ...(options.metrics ? { metrics: options.metrics } : {}),
    });
  }

  start(): Promise<void> {
    return this.host.start();
  }

  close(): Promise<void> {
    return this.host.close();
  }

  /** The underlying host's status (batching, runner, golden diff) for /v1/models/{model}. */
  hostStatus(): ModelStatus {
    return this.host.status();
  }

  cost(): CostSnapshot {
    return this.host.cost.snapshot();
  }

  status(): LanguageModelStatus & { cost: CostSnapshot } {
    const s = this.host.status();
    const state = s.state === "restarting" ? "loading" : s.state;
    return {
      name: this.name,
      backend: this.backend,
      state,
      ready: s.ready,
      ...(s.reason ? { reason: s.reason } : {}),
      ...(s.code ? { code: s.code } : {}),
      // A host of its own never delegates its golden check to a remote runner.
      golden: s.golden === "runner" ? "pending" : s.golden,
      ...(s.loadMs !== undefined ? { loadMs: s.loadMs } : {}),
      path: s.path,
      ...(s.bytes !== undefined ? { bytes: s.bytes } : {}),
      ...(s.sha256 ? { sha256: s.sha256 } : {}),
      concurrency: {
        active: this.active,
        waiting: s.batching.queuedRows,
        limit: this.config.limits.maxQueueRows,
      },
      cost: this.host.cost.snapshot(),
    };
  }

  generate(): Promise<GenerateResult> {
    return Promise.reject(
      new ModelportError(
        "MP_ERR_LLM_CAPABILITY_UNSUPPORTED",
        `model '${this.name}' is an embeddings model: use POST /v1/embeddings, not chat or completions`,
        { model: this.name },
      ),
    );
  }

  /**
   * Embeds `inputs` through the batcher (so concurrent requests share inferences).
   * @throws ModelportError MP_ERR_MODEL_NOT_READY, MP_ERR_MODEL_OVERLOADED, MP_ERR_DEADLINE_EXCEEDED,
   * MP_ERR_REQUEST_CANCELED, MP_ERR_INFERENCE_FAILED.
   */
  async embed(
    inputs: readonly string[],
    options: { readonly signal?: AbortSignal } = {},
  ): Promise<EmbedResult> {
    const cancel = new CancelHandle();
    const signal = options.signal;
    const onAbort = () => cancel.cancel();
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) cancel.cancel();
    this.active++;
    try {
      const out = await this.host.predict(
        { text: { datatype: "BYTES", shape: [inputs.length], data: [...inputs] } },
        { deadline: performance.now() + this.config.limits.timeoutMs, cancel },
      );
      const emb = out.embedding!;
      const dim = emb.shape[1]!;
      const data = emb.data as Float32Array;
      const vectors: Float32Array[] = [];
      for (let i = 0; i < inputs.length; i++) vectors.push(data.subarray(i * dim, (i + 1) * dim));
      let promptTokens = 0;
      for (const t of out.tokens!.data as Int32Array) promptTokens += t;
      this.host.cost.countTokens(promptTokens);
      return { vectors, promptTokens };
    } finally {
      this.active--;
      signal?.removeEventListener("abort", onAbort);
    }
  }
}
