// The foundation benchmark (`npm run bench`): the churn-tree model, single-row requests at
// concurrency 1, 8 and 64, against modelport's real CLI and a naive node:http + onnxruntime server,
// plus onnxruntime called in-process as the ceiling. Prints a table, the modelport/naive ratios
// and whether the bar holds; writes JSON to bench/results/ and a Markdown table for docs/PERFORMANCE.md.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildModels } from "../examples/build-models.js";
import { compare, summarize } from "./aggregate.js";
import { measureInProcess } from "./in-process.js";
import { checkPrediction, measurePoint, type PointResult } from "./load.js";
import { type BenchOptions, parseOptions, USAGE, UsageError } from "./options.js";
import { describeModel, provenance, servingLine } from "./provenance.js";
import {
  consoleTable,
  machine,
  markdown,
  noiseLine,
  ratioLines,
  threadLines,
  verdict,
  verdictLine,
} from "./report.js";
import { type RunningServer, startModelport, startNaive } from "./servers.js";
import { MODEL_FILE, REQUEST_BODY } from "./workload.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const log = (line: string) => process.stderr.write(`${line}\n`);

type Prediction = Awaited<ReturnType<typeof checkPrediction>>;
type Description = Awaited<ReturnType<typeof describeModel>>;

/** Starts one server, checks its answer, measures one point, stops it (also on errors). */
async function onePoint(
  start: () => Promise<RunningServer>,
  opts: BenchOptions,
  concurrency: number,
  roundNo: number,
): Promise<{ server: RunningServer; prediction: Prediction; point: PointResult; description: Description }> {
  const server = await start();
  try {
    const prediction = await checkPrediction(server);
    const description = server.name === "modelport" ? await describeModel(server) : null;
    const p = await measurePoint(server, concurrency, opts.warmupS, opts.durationS, roundNo);
    log(
      `  round ${roundNo} ${server.name.padEnd(9)} c=${String(concurrency).padEnd(3)} ${p.rps} req/s, ` +
        `p50 ${p.latencyMs.p50} ms, p99 ${p.latencyMs.p99} ms, non-2xx ${p.non2xx}, errors ${p.errors}; ` +
        `CPU % of a core: server ${p.cpu.serverPct}, bench ${p.cpu.benchPct}, other ${p.cpu.otherPct}`,
    );
    return { server, prediction, point: p, description };
  } finally {
    await server.child.stop();
  }
}

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2));
  if (opts === null) {
    process.stdout.write(USAGE);
    return;
  }
  const date = new Date().toISOString();
  const source = provenance(repoRoot);
  const modelDir = mkdtempSync(path.join(os.tmpdir(), "modelport-bench-"));
  // Removed on any exit, including process.exit from a signal handler (children.ts).
  process.on("exit", () => rmSync(modelDir, { recursive: true, force: true }));
  log(`building models into ${modelDir}`);
  await buildModels(modelDir);
  const modelPath = path.join(modelDir, MODEL_FILE);

  log(`in-process: session.run in a loop for ${opts.inProcessS} s`);
  const inProcess = await measureInProcess(modelPath, Math.min(1, opts.inProcessS), opts.inProcessS);
  log(
    `  ${inProcess.callsPerS} calls/s, p50 ${inProcess.latencyMs.p50} ms, p99 ${inProcess.latencyMs.p99} ms`,
  );

  // One server process at a time, a fresh one per point; the two alternate point by point (and
  // which goes first alternates too) so that drifting background load hits both alike.
  const starters = {
    modelport: () => startModelport(modelDir, opts.logLevel),
    naive: () => startNaive(modelDir),
  };
  log(
    `servers: concurrency ${opts.concurrency.join(", ")}, ${opts.warmupS} s warm-up + ${opts.durationS} s ` +
      `per point, ${opts.rounds} round(s), modelport log level ${opts.logLevel}`,
  );
  const points: PointResult[] = [];
  const commands = new Map<string, string>();
  const predictions = new Map<string, Prediction>();
  let modelportDescription: Description = null;
  let turn = 0;
  for (let roundNo = 1; roundNo <= opts.rounds; roundNo++) {
    for (const c of opts.concurrency) {
      const order = turn++ % 2 === 0 ? (["modelport", "naive"] as const) : (["naive", "modelport"] as const);
      for (const name of order) {
        const { server, prediction, point, description } = await onePoint(starters[name], opts, c, roundNo);
        modelportDescription ??= description;
        commands.set(name, server.command);
        predictions.set(name, prediction);
        points.push(point);
      }
    }
  }

  const summaries = summarize(points, opts.concurrency);
  const comparisons = compare(points, opts.concurrency);
  const v = verdict(summaries, comparisons, points);
  const mp = predictions.get("modelport")!;
  const nv = predictions.get("naive")!;
  const agree =
    mp.label === nv.label && mp.probabilities.every((p, i) => Math.abs(p - nv.probabilities[i]!) < 1e-6);
  const m = machine();
  const commandList = [commands.get("modelport")!, commands.get("naive")!];

  const results = {
    benchmark: "foundation",
    date,
    machine: m,
    source,
    modelportModel: modelportDescription,
    options: {
      durationS: opts.durationS,
      warmupS: opts.warmupS,
      inProcessS: opts.inProcessS,
      concurrency: opts.concurrency,
      rounds: opts.rounds,
      modelportLogLevel: opts.logLevel,
      pipelining: 1,
      quick: opts.quick,
    },
    workload: { model: MODEL_FILE, body: REQUEST_BODY },
    commands: commandList,
    predictions: { modelport: mp, naive: nv, agree },
    inProcess,
    summaries,
    comparisons,
    verdict: v,
    points,
  };
  const outDir = opts.outDir ? path.resolve(opts.outDir) : path.join(repoRoot, "bench/results");
  mkdirSync(outDir, { recursive: true });
  const outFile = path.join(outDir, `foundation-${date.replace(/:/g, "-")}.json`);
  writeFileSync(outFile, `${JSON.stringify(results, null, 2)}\n`);

  const noise = noiseLine(points);
  const out = [
    "",
    consoleTable(summaries),
    `CPU% columns: % of one core (${m.cpus} cores = ${m.cpus * 100}%); CPU us/req: server CPU time per ` +
      "request; bench = autocannon + log consumer; other = rest of the machine (other processes, irq, steal).",
    ...(noise ? [noise] : []),
    "",
    `in-process ceiling: ${inProcess.callsPerS} calls/s, p50 ${inProcess.latencyMs.p50} ms, ` +
      `p99 ${inProcess.latencyMs.p99} ms (${inProcess.calls} calls)`,
    "",
    "server threads, % of one core (busiest first):",
    threadLines(points),
    "",
    ratioLines(comparisons),
    "",
    verdictLine(v),
    `modelport: ${servingLine(modelportDescription) ?? "(no model description)"}; tree: commit ${source.commit}, ` +
      `${source.srcChanges ?? "?"} uncommitted file(s) in src/`,
    ...(agree ? [] : ["WARNING: modelport and the naive server disagree on the prediction."]),
    "",
    "--- Markdown for docs/PERFORMANCE.md ---",
    "",
    markdown({
      date,
      machine: m,
      durationS: opts.durationS,
      warmupS: opts.warmupS,
      rounds: opts.rounds,
      logLevel: opts.logLevel,
      summaries,
      comparisons,
      verdict: v,
      inProcess,
      commands: commandList,
      source,
      serving: servingLine(modelportDescription),
    }),
    "",
    `results: ${path.relative(process.cwd(), outFile) || outFile}`,
    "",
  ];
  process.stdout.write(out.join("\n"));
}

main().catch((err: unknown) => {
  if (err instanceof UsageError) {
    process.stderr.write(`bench: ${err.message}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  process.stderr.write(`bench: ${(err as Error)?.stack ?? err}\n`);
  process.exitCode = 1;
});
