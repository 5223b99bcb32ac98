// The batching stage of a tensor model's lifecycle, attached after each load (as MLServer's
// batching hook wraps a model's predict at load): an adaptive Batcher in front of the runner,
// its observer feeding the metrics and the cost meter. The model never knows it is batched.
import type { Logger } from "pino";
import type { ModelConfig } from "../config/schema.js";
import { hardTimeoutMs } from "../config/schema.js";
import type { CostMeter } from "../metrics/cost.js";
import type { Metrics } from "../metrics/metrics.js";
import { Batcher, type BatcherObserver, INLINE_SLOW_FACTOR } from "../runner/batcher.js";
import type { InlineLane } from "../runner/runner.js";
import type { ModelSignature, TensorMap } from "../tensor.js";

export interface BatchingHookDeps {
  log: Logger;
  metrics?: Metrics;
  cost: CostMeter;
  /** A batch has been on the runner past limits.hardTimeoutMs. */
  onStuck: (elapsedMs: number, rows: number) => void;
  /** The runner's copy of the model in this thread, when it has one. */
  inline?: InlineLane | undefined;
}

/** The batcher for a freshly loaded model: joins requests when config and signature allow. */
export function attachBatching(
  config: ModelConfig,
  signature: ModelSignature,
  run: (inputs: TensorMap) => Promise<TensorMap>,
  deps: BatchingHookDeps,
): Batcher {
  const b = config.batching;
  const enabled = (b.enabled ?? true) && signature.batchable;
  if (b.enabled && !signature.batchable) {
    deps.log.warn(
      `${config.name}: batching is on in config but the model has no dynamic batch dim 0 on every input and output; it runs one request per call`,
    );
  }
  const observer = deps.metrics ? batchObserver(config.name, deps.metrics, deps.cost) : undefined;
  const maxMs = b.inlineMaxMs;
  const inline = deps.inline && maxMs > 0 ? { predict: deps.inline.predict, maxMs } : undefined;
  return new Batcher(run, {
    ...b,
    model: config.name,
    batchable: enabled,
    maxQueueRows: config.limits.maxQueueRows,
    ...(observer ? { observer } : {}),
    hardTimeoutMs: hardTimeoutMs(config.limits),
    onStuck: deps.onStuck,
    onInternalError: (err) => deps.log.error({ err }, `${config.name}: batcher error (contained)`),
    ...(inline ? { inline } : {}),
    onInlineSlow: (ms, rows) =>
      deps.log.warn(
        { ms: Math.round(ms * 1000) / 1000, rows },
        `${config.name}: calls on the in-thread copy keep taking over ${INLINE_SLOW_FACTOR}x batching.inlineMaxMs (${maxMs} ms; the last ${ms.toFixed(2)} ms); every request now goes to the runner`,
      ),
  });
}

/** Batch sizes, inference and queue times, queue depth and refusals into the metrics; compute time into the cost. */
function batchObserver(model: string, m: Metrics, cost: CostMeter): BatcherObserver {
  const labels = { model };
  const batchRows = m.batchRows.labels(labels);
  const inference = m.inferenceDuration.labels(labels);
  const wait = m.queueWait.labels(labels);
  const depth = m.queueDepth.labels(labels);
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
