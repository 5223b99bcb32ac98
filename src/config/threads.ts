// The core budget. Math libraries with their own thread pools (onnxruntime's intra-op pool,
// llama.cpp) spin while they wait, so more busy pool threads than cores does not just share the
// machine, it collapses throughput (llama.cpp on 2 cores ran ~1000× slower with 4 threads than 1).
// modelport therefore refuses layouts whose multi-threaded models cannot all have their cores.
import type { Config } from "./schema.js";

export const THREADS_DOC = "docs/Performance-tuning.md#the-thread-budget";

export interface ThreadBudget {
  cores: number;
  /** processes × Σ model threads. */
  required: number;
  /** Why the layout is refused; empty when it fits. */
  problems: string[];
  /** Layouts that fit but share cores (single-threaded models time-slice; no spinning pools). */
  warnings: string[];
}

/** Checks `config` against `cores` (os.availableParallelism() by default). */
export function threadBudget(
  config: Pick<Config, "server" | "models" | "languageModels">,
  cores: number,
): ThreadBudget {
  const processes = config.server.processes;
  // Language models (llama.cpp's pool spins too) count like tensor models.
  const models: readonly { name: string; threads: number }[] = [
    ...config.models,
    ...(config.languageModels ?? []),
  ];
  const perProcess = models.reduce((n, m) => n + m.threads, 0);
  const required = processes * perProcess;
  const problems: string[] = [];
  const warnings: string[] = [];
  const pooled = models.filter((m) => m.threads > 1);
  const layout = `${processes} process(es) × (${models.map((m) => `${m.name}: ${m.threads}`).join(" + ")} threads) = ${required} math threads on ${cores} cores`;
  for (const m of pooled) {
    if (processes * m.threads > cores) {
      problems.push(
        `model '${m.name}': ${processes} process(es) × ${m.threads} threads = ${processes * m.threads} > ${cores} cores; its thread pool would fight itself. Lower threads or processes (see ${THREADS_DOC})`,
      );
    }
  }
  if (required > cores) {
    if (pooled.length > 0 && problems.length === 0) {
      problems.push(
        `${layout}: multi-threaded models (${pooled.map((m) => m.name).join(", ")}) would oversubscribe the cores when models run at once. Give them fewer threads, serve fewer processes, or set server.allowOversubscription (see ${THREADS_DOC})`,
      );
    } else if (pooled.length === 0) {
      warnings.push(
        `${layout}: single-threaded models share cores when busy at once (time-sliced, no spinning pools)`,
      );
    }
  }
  if (config.server.allowOversubscription && problems.length) {
    warnings.push(...problems.map((p) => `allowed by server.allowOversubscription: ${p}`));
    problems.length = 0;
  }
  return { cores, required, problems, warnings };
}
