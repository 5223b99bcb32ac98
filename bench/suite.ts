// What the suites share: the run's context (options, date, machine, provenance, the built models),
// measuring a set of servers point by point, and writing the results file.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { checkPrediction, measurePoint, type PointResult, type Prediction } from "./load.js";
import type { BenchOptions } from "./options.js";
import { describeModel, type Provenance } from "./provenance.js";
import type { Machine } from "./report.js";
import type { RunningServer } from "./servers.js";
import type { Workload } from "./workload.js";

export type Description = Awaited<ReturnType<typeof describeModel>>;

export interface SuiteContext {
  opts: BenchOptions;
  repoRoot: string;
  /** Where buildModels wrote the models. */
  modelDir: string;
  date: string;
  machine: Machine;
  source: Provenance;
  log(line: string): void;
}

export interface Starter {
  name: string;
  start(): Promise<RunningServer>;
}

export interface Measured {
  points: PointResult[];
  /** By server name, in the starters' order. */
  commands: Map<string, string>;
  predictions: Map<string, Prediction>;
  /** modelport's description of the served model, by server name (modelport servers only). */
  descriptions: Map<string, Description>;
}

/** Starts one server, checks its answer, measures one point, stops it (also on errors). */
async function onePoint(
  ctx: SuiteContext,
  starter: Starter,
  workload: Workload,
  concurrency: number,
  roundNo: number,
): Promise<{ server: RunningServer; prediction: Prediction; point: PointResult; description: Description }> {
  const { opts } = ctx;
  const server = await starter.start();
  try {
    const prediction = await checkPrediction(server, workload);
    const description = server.kind === "modelport" ? await describeModel(server) : null;
    const p = await measurePoint(server, workload, concurrency, opts.warmupS, opts.durationS, roundNo);
    const batch = p.batch ? `, mean batch ${p.batch.meanRows ?? "-"} rows (${p.batch.batches} batches)` : "";
    ctx.log(
      `  round ${roundNo} ${server.name.padEnd(15)} c=${String(concurrency).padEnd(3)} ${p.rps} req/s, ` +
        `p50 ${p.latencyMs.p50} ms, p99 ${p.latencyMs.p99} ms, non-2xx ${p.non2xx}, errors ${p.errors}${batch}; ` +
        `CPU % of a core: server ${p.cpu.serverPct}, bench ${p.cpu.benchPct}, other ${p.cpu.otherPct}`,
    );
    return { server, prediction, point: p, description };
  } finally {
    await server.child.stop();
  }
}

/**
 * Every (round, concurrency) point for every server: one server process at a time, a fresh one per
 * point, the servers one after another at each point, the order rotating from point to point (with
 * two servers: alternating which goes first) so that drifting background load hits all alike.
 */
export async function measureServers(
  ctx: SuiteContext,
  workload: Workload,
  starters: readonly Starter[],
): Promise<Measured> {
  const { opts } = ctx;
  const measured: Measured = {
    points: [],
    commands: new Map(),
    predictions: new Map(),
    descriptions: new Map(),
  };
  let turn = 0;
  for (let roundNo = 1; roundNo <= opts.rounds; roundNo++) {
    for (const c of opts.concurrency) {
      const k = turn++ % starters.length;
      for (const starter of [...starters.slice(k), ...starters.slice(0, k)]) {
        const { server, prediction, point, description } = await onePoint(ctx, starter, workload, c, roundNo);
        if (!measured.descriptions.has(server.name) && description)
          measured.descriptions.set(server.name, description);
        measured.commands.set(server.name, server.command);
        measured.predictions.set(server.name, prediction);
        measured.points.push(point);
      }
    }
  }
  // Commands in the starters' order, not the order of the first point.
  measured.commands = new Map(starters.map((s) => [s.name, measured.commands.get(s.name)!]));
  return measured;
}

/** Writes `<suite>-<date>.json` to --out (default bench/results) and returns its path. */
export function writeResults(ctx: SuiteContext, suite: string, results: unknown): string {
  const outDir = ctx.opts.outDir ? path.resolve(ctx.opts.outDir) : path.join(ctx.repoRoot, "bench/results");
  mkdirSync(outDir, { recursive: true });
  const outFile = path.join(outDir, `${suite}-${ctx.date.replace(/:/g, "-")}.json`);
  writeFileSync(outFile, `${JSON.stringify(results, null, 2)}\n`);
  return outFile;
}

/** A path as printed: relative to the working directory when inside it. */
export function shownPath(file: string): string {
  return path.relative(process.cwd(), file) || file;
}
