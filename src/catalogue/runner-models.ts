// The API tier's view of models it was not configured with: a runner that serves a model
// repository (or a config of its own) reports models by name, and the API tier serves each
// one it has not heard of through the runners, with the runner's own limits. Upstream models
// are left out: every tier calls an upstream itself, from its own config.
import { type EntryContext, resolveEntry } from "../config/load.js";
import { modelLimitsSchema, modelSchema } from "../config/schema.js";
import type { RunnerModelReport } from "../runner/remote/runner-endpoint.js";
import type { ServedModelConfig } from "./served-model.js";

/**
 * The config the API tier holds for a model `runner` reported: its name, backend and version,
 * the server's defaults, and the runner's limits where it listed them.
 * @returns the config, or why the report cannot be served.
 */
export function configFromReport(
  name: string,
  report: RunnerModelReport,
  runner: string,
  ctx: EntryContext,
): ServedModelConfig | { problem: string } {
  const where = `runner ${runner}: model '${name}'`;
  if (report.backend === "upstream")
    return { problem: `${where}: an upstream model is served from each tier's own config` };
  const entry = {
    name,
    backend: report.backend,
    path: `${runner}/v1/models/${name}`,
    version: report.version,
  };
  // The runner's limits (it lists them merged with server-wide ones: only a model's own keys are
  // taken) when they parse, else the defaults: the runner checks its own either way.
  const own = Object.keys(modelLimitsSchema.shape);
  const limits = Object.fromEntries(Object.entries(report.limits ?? {}).filter(([k]) => own.includes(k)));
  const withLimits = modelSchema.safeParse({ ...entry, limits });
  const parsed = withLimits.success ? withLimits : modelSchema.safeParse(entry);
  if (!parsed.success)
    return { problem: `${where}: ${parsed.error.issues.map((i) => i.message).join("; ")}` };
  const problems: string[] = [];
  const config = resolveEntry(parsed.data, where, ctx, problems);
  return problems.length ? { problem: problems.join("; ") } : config;
}
