// All served language models by name (config.languageModels), started one after another at
// boot, with their share of /readyz. Kept apart from the tensor ModelRegistry: language models
// stream tokens and hold sequences, they do not take tensors through a batcher.
import type { Logger } from "pino";
import type { LanguageModelConfig } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import type { Metrics } from "../metrics/metrics.js";
import { type Readiness, readinessOf } from "../models/model-registry.js";
import { RemoteLanguageModel } from "../runner/remote/remote-language-model.js";
import type { RunnerPool } from "../runner/remote/runner-pool.js";
import { LANGUAGE_MODEL_FACTORIES } from "./language-backends.js";
import type { LanguageModel, LanguageModelStatus } from "./language-model.js";

export interface LanguageModelDeps {
  log: Logger;
  /** API tier (--role api): the runners that serve llama-cpp and transformers models. */
  pool?: RunnerPool;
  /** API tier: the key it presents to its runners (the first of server.apiKeys). */
  runnerApiKey?: string;
  /** The app's metrics: batch and cost figures of embeddings and upstream models (optional in tests). */
  metrics?: Metrics;
}

/** Stands in for a model whose backend is not available in this build: never ready, says why. */
class UnavailableModel implements LanguageModel {
  readonly capabilities = { chat: false, completion: false, embeddings: false };
  readonly created = Math.floor(Date.now() / 1000);
  readonly name: string;
  readonly backend: LanguageModelConfig["backend"];
  constructor(private readonly config: LanguageModelConfig) {
    this.name = config.name;
    this.backend = config.backend;
  }
  async start(): Promise<void> {}
  async close(): Promise<void> {}
  status(): LanguageModelStatus {
    return {
      name: this.name,
      backend: this.backend,
      state: "failed",
      ready: false,
      reason: `backend '${this.backend}' is not available in this build of modelport`,
      code: "MP_ERR_MODEL_LOAD_FAILED",
      golden: "none",
      path: this.config.path,
      concurrency: { active: 0, waiting: 0, limit: 0 },
    };
  }
  generate(): Promise<never> {
    return Promise.reject(
      new ModelportError(
        "MP_ERR_MODEL_NOT_READY",
        `model '${this.name}' is not ready: ${this.status().reason}`,
      ),
    );
  }
}

export class LanguageModelRegistry {
  private readonly models = new Map<string, LanguageModel>();

  constructor(configs: readonly LanguageModelConfig[], deps: LanguageModelDeps) {
    for (const c of configs) {
      // The API tier holds no weights: local backends are served by its runners. An upstream
      // model holds none either, so the API tier calls the upstream itself.
      if (deps.pool && c.backend !== "upstream") {
        this.models.set(c.name, new RemoteLanguageModel(c, deps.pool, deps, deps.runnerApiKey));
        continue;
      }
      const factory = LANGUAGE_MODEL_FACTORIES[c.backend];
      this.models.set(c.name, factory ? factory(c, deps) : new UnavailableModel(c));
    }
  }

  /** Loads and checks every model in order; resolves when all have settled, ready or not. */
  async startAll(): Promise<void> {
    for (const m of this.models.values()) await m.start();
  }

  all(): LanguageModel[] {
    return [...this.models.values()];
  }

  has(name: string): boolean {
    return this.models.has(name);
  }

  /** @throws ModelportError MP_ERR_MODEL_NOT_FOUND (404) naming the served language models. */
  get(name: string): LanguageModel {
    const m = this.models.get(name);
    if (!m) {
      const names = [...this.models.keys()];
      throw new ModelportError(
        "MP_ERR_MODEL_NOT_FOUND",
        `no language model named '${name}'; served: ${names.length ? names.join(", ") : "none"}`,
        { model: name },
      );
    }
    return m;
  }

  /** The same shape as ModelRegistry.readiness(), so /readyz can merge the two. */
  readiness(): Readiness {
    return readinessOf([...this.models.values()].map((m) => m.status()));
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.models.values()].map((m) => m.close()));
  }
}
