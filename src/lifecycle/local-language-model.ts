// A generative model whose weights live in this process (backend llama-cpp): the one lifecycle
// of every local model (model-lifecycle.ts) around a LanguageEngine that supplies load, generate
// and close. The golden stage is the text golden check (text-golden.ts): greedy text must equal
// the file's before the model is ready. Each generation's share of the machine time and its
// tokens go to the model's cost meter (docs/Cost.md#llamacpp-models).
import type { Logger } from "pino";
import {
  type Capabilities,
  generativeCapabilities,
  type ModelStatus,
  type ServedModel,
} from "../catalogue/served-model.js";
import { hardTimeoutMs, type LanguageModelConfig } from "../config/schema.js";
import type { ModelportError } from "../errors.js";
import type { LanguageEngine } from "../llm/language-engine.js";
import type { GenerateOptions, GenerateRequest, GenerateResult } from "../llm/language-model.js";
import { CostMeter, pricesOf } from "../metrics/cost.js";
import type { Metrics } from "../metrics/metrics.js";
import { ModelLifecycle } from "./model-lifecycle.js";
import { textGolden } from "./text-golden.js";

export class LocalLanguageModel implements ServedModel {
  readonly kind = "language" as const;
  readonly created = Math.floor(Date.now() / 1000);
  readonly signature = undefined;
  private readonly lifecycle: ModelLifecycle<{ loadMs: number }>;
  /** Requests, machine time, tokens and dollars so far (src/metrics/cost.ts). */
  readonly cost: CostMeter;

  constructor(
    readonly config: LanguageModelConfig,
    private readonly engine: LanguageEngine,
    log: Logger,
    metrics?: Metrics,
  ) {
    const golden = config.golden;
    this.cost = new CostMeter(config.name, pricesOf(config), metrics?.cost);
    this.lifecycle = new ModelLifecycle(
      {
        name: config.name,
        path: config.path,
        ...(config.sha256 ? { sha256: config.sha256 } : {}),
        ...(config.sha256Source ? { sha256Source: config.sha256Source } : {}),
        ...(golden ? { golden } : {}),
        hardTimeoutMs: hardTimeoutMs(config.limits),
      },
      engine,
      {
        // The golden check is counted as one request, as a tensor model's is.
        ...(golden ? { golden: () => textGolden(golden, (r) => this.metered(r, {}, false)) } : {}),
        stateChanged: (state) => metrics?.modelReady.set({ model: config.name }, state === "ready" ? 1 : 0),
      },
      log.child({ model: config.name }),
    );
  }

  get name(): string {
    return this.config.name;
  }

  get version(): string {
    return this.config.version;
  }

  get backend(): LanguageModelConfig["backend"] {
    return this.config.backend;
  }

  get ready(): boolean {
    return this.lifecycle.ready;
  }

  get capabilities(): Capabilities {
    return generativeCapabilities(this.engine.chat);
  }

  start(): Promise<void> {
    return this.lifecycle.start();
  }

  /** @throws ModelportError MP_ERR_MODEL_NOT_READY / MP_ERR_SERVER_SHUTTING_DOWN, or the engine's. */
  generate(request: GenerateRequest, options?: GenerateOptions): Promise<GenerateResult> {
    if (!this.lifecycle.ready) return Promise.reject(this.notReadyError());
    return this.metered(request, options ?? {}, true);
  }

  /**
   * Generates and counts the generation's machine time and tokens in the cost meter; one that
   * failed after it got a sequence counts its time, with no tokens.
   */
  private metered(
    request: GenerateRequest,
    options: GenerateOptions,
    capped: boolean,
  ): Promise<GenerateResult> {
    let ms = 0;
    const outer = options.onCompute;
    const background = options.background === true;
    const counted: GenerateOptions = {
      ...options,
      onCompute: (m) => {
        ms += m;
        outer?.(m);
      },
    };
    return this.engine.generate(request, counted, capped).then(
      (result) => {
        this.cost.tokens(result.usage.promptTokens, result.usage.completionTokens, ms, background);
        return result;
      },
      (err: unknown) => {
        if (ms > 0) this.cost.tokens(0, 0, ms, background);
        throw err;
      },
    );
  }

  notReadyError(): ModelportError {
    return this.lifecycle.notReadyError();
  }

  status(): ModelStatus {
    const c = this.config;
    return {
      name: c.name,
      version: c.version,
      backend: c.backend,
      path: c.path,
      ...this.lifecycle.status(),
      ...this.engine.details(),
      cost: this.cost.snapshot(),
    };
  }

  close(): Promise<void> {
    return this.lifecycle.close();
  }
}
