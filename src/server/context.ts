// What every route needs: the models, the metrics and whether the server is draining.
import type { Config } from "../config/schema.js";
import type { Metrics } from "../metrics/metrics.js";
import type { ModelHost } from "../models/model-host.js";
import type { ModelRegistry } from "../models/model-registry.js";
import type { TensorMap } from "../tensor.js";

export interface AppContext {
  readonly config: Config;
  readonly registry: ModelRegistry;
  readonly metrics: Metrics;
  /** True from SIGTERM on: readiness is false and new requests are refused. */
  draining: boolean;
}

/** Scores through the model's runner and records the inference time. */
export async function infer(ctx: AppContext, host: ModelHost, inputs: TensorMap): Promise<TensorMap> {
  const started = performance.now();
  const outputs = await host.predict(inputs);
  ctx.metrics.inferenceDuration.observe({ model: host.config.name }, (performance.now() - started) / 1000);
  return outputs;
}
