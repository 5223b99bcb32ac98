// The one place that picks how a configured model is served: by its backend and the server's
// role. On the API tier (role api) every model that holds weights is a remote model forwarding
// to the runner pool; an upstream model holds none, so every tier calls the upstream itself.
// Each backend module imports its driver lazily when it starts, so listing it here costs
// nothing for servers that never use it.
import type { Logger } from "pino";
import { LlamaCppEngine } from "../backends/llama-cpp/llama-cpp-engine.js";
import { UpstreamLanguageModel } from "../backends/upstream/upstream-language-model.js";
import type { LanguageModelConfig, ModelConfig } from "../config/schema.js";
import { LocalLanguageModel } from "../lifecycle/local-language-model.js";
import { LocalTensorModel, type RunnerFactory } from "../lifecycle/local-tensor-model.js";
import type { Metrics } from "../metrics/metrics.js";
import type { RunnerPool } from "../runner/remote/runner-pool.js";
import { RemoteLanguageModel } from "./remote-language-model.js";
import { RemoteTensorModel } from "./remote-tensor-model.js";
import type { ServedModel } from "./served-model.js";

export interface ModelDeps {
  log: Logger;
  /** The app's metrics (optional in tests and the check command). */
  metrics?: Metrics;
  /** API tier (--role api): the runners that hold the weights. */
  pool?: RunnerPool;
  /** API tier: the key it presents to its runners (the first of server.apiKeys). */
  runnerApiKey?: string;
  /** Tests: how a tensor model's runner is made. */
  runnerFactory?: RunnerFactory;
  /** Tests: overrides the least time between memory recycles. */
  minRecycleIntervalMs?: number;
}

/** A tensor model (onnx, custom). */
export function createTensorModel(config: ModelConfig, deps: ModelDeps): ServedModel {
  if (deps.pool) return new RemoteTensorModel(config, deps.pool);
  return new LocalTensorModel(config, deps.log, {
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    ...(deps.runnerFactory ? { runnerFactory: deps.runnerFactory } : {}),
    ...(deps.minRecycleIntervalMs !== undefined ? { minRecycleIntervalMs: deps.minRecycleIntervalMs } : {}),
  });
}

/** A language model (llama-cpp, transformers, upstream). */
export function createLanguageModel(config: LanguageModelConfig, deps: ModelDeps): ServedModel {
  if (config.backend === "upstream") {
    return new UpstreamLanguageModel(config, deps.log, deps.metrics ? { metrics: deps.metrics } : {});
  }
  if (deps.pool) return new RemoteLanguageModel(config, deps.pool, deps.log, deps.runnerApiKey);
  if (config.backend === "transformers") {
    return new LocalTensorModel(config, deps.log, deps.metrics ? { metrics: deps.metrics } : {});
  }
  return new LocalLanguageModel(
    config,
    new LlamaCppEngine(config, { log: deps.log }),
    deps.log,
    deps.metrics,
  );
}
