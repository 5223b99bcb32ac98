// A generative model whose weights live in this process (backend llama-cpp): the one lifecycle
// of every local model (model-lifecycle.ts) around a LanguageEngine that supplies load, generate
// and close. The golden stage is the text golden check (text-golden.ts): greedy text must equal
// the file's before the model is ready.
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
import type { Metrics } from "../metrics/metrics.js";
import { ModelLifecycle } from "./model-lifecycle.js";
import { textGolden } from "./text-golden.js";

export class LocalLanguageModel implements ServedModel {
  readonly kind = "language" as const;
  readonly created = Math.floor(Date.now() / 1000);
  readonly signature = undefined;
  private readonly lifecycle: ModelLifecycle<{ loadMs: number }>;

  constructor(
    readonly config: LanguageModelConfig,
    private readonly engine: LanguageEngine,
    log: Logger,
    metrics?: Metrics,
  ) {
    const golden = config.golden;
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
        ...(golden ? { golden: () => textGolden(golden, (r) => engine.generate(r, {}, false)) } : {}),
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
    return this.engine.generate(request, options ?? {});
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
    };
  }

  close(): Promise<void> {
    return this.lifecycle.close();
  }
}
