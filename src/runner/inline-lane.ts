// A second copy of a small ONNX model in the server's own thread. A request that reaches an idle
// model and is predicted to compute in well under a millisecond is scored here, without the two
// thread hops (and the wake-ups of an idle core) that a worker round trip costs: at concurrency 1
// that hop is most of what modelport adds to a bare server (docs/PERFORMANCE.md). The batcher
// decides, from its measured cost model, when a request may take this lane (batcher.ts).
//
// Only small files qualify (INLINE_MAX_FILE_BYTES): the copy doubles the model's memory, and its
// inference blocks the HTTP thread, so it is kept for models whose every call is short.
import { stat } from "node:fs/promises";
import type { LoadedModel } from "../backends/backend.js";
import { getBackend } from "../backends/registry.js";
import type { InlineLane, RunnerSpec } from "./runner.js";

/** Largest model file given an in-thread copy (its weights are held twice). */
export const INLINE_MAX_FILE_BYTES = 16 * 1024 * 1024;

/**
 * Loads the in-thread copy of `spec` with one intra-op thread (the HTTP thread's own), or says
 * why it does not: a file above INLINE_MAX_FILE_BYTES, or a load that failed here.
 */
export async function openInlineLane(spec: RunnerSpec): Promise<InlineLane | { skipped: string }> {
  const { size } = await stat(spec.path);
  if (size > INLINE_MAX_FILE_BYTES) {
    return {
      skipped: `the file is ${(size / 1048576).toFixed(1)} MiB, above the ${INLINE_MAX_FILE_BYTES / 1048576} MiB kept in the server's thread`,
    };
  }
  const before = process.memoryUsage.rss();
  let model: LoadedModel;
  try {
    model = await getBackend(spec.backend).load({ ...spec, threads: 1 });
  } catch (err) {
    return { skipped: `the in-thread copy did not load: ${(err as Error).message}` };
  }
  const memoryBytes = Math.max(0, process.memoryUsage.rss() - before);
  return { predict: (inputs) => model.predict(inputs), close: () => model.close(), memoryBytes };
}
