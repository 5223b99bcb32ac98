// The foundation suite (the default of `npm run bench`): the churn-tree model, single-row requests
// at concurrency 1, 8 and 64, against modelport's real CLI and a naive node:http + onnxruntime
// server, plus onnxruntime called in-process as the ceiling. Prints a table, the modelport/naive
// ratios and whether the bar holds; writes JSON to bench/results/ and a Markdown table for
// docs/PERFORMANCE.md.
import path from "node:path";
import { type Comparison, compare, summarize } from "./aggregate.js";
import { measureInProcess } from "./in-process.js";
import { predictionsAgree } from "./load.js";
import { servingLine } from "./provenance.js";
import {
  consoleTable,
  markdown,
  noiseLine,
  ratioLines,
  threadLines,
  type Verdict,
  verdict,
  verdictLine,
} from "./report.js";
import { startModelport, startNaive } from "./servers.js";
import { measureServers, type SuiteContext, shownPath, writeResults } from "./suite.js";
import { CHURN_TREE } from "./workload.js";

export interface FoundationOutcome {
  /** What to print on stdout. */
  text: string;
  comparisons: Comparison[];
  verdict: Verdict;
  resultsFile: string;
}

export async function runFoundation(ctx: SuiteContext): Promise<FoundationOutcome> {
  const { opts, date, source, log } = ctx;
  const m = ctx.machine;
  const workload = CHURN_TREE;
  const modelPath = path.join(ctx.modelDir, workload.modelFile);

  log(`foundation suite (${workload.modelName})`);
  log(`in-process: session.run in a loop for ${opts.inProcessS} s`);
  const inProcess = await measureInProcess(
    modelPath,
    workload,
    Math.min(1, opts.inProcessS),
    opts.inProcessS,
  );
  log(
    `  ${inProcess.callsPerS} calls/s, p50 ${inProcess.latencyMs.p50} ms, p99 ${inProcess.latencyMs.p99} ms`,
  );

  log(
    `servers: concurrency ${opts.concurrency.join(", ")}, ${opts.warmupS} s warm-up + ${opts.durationS} s ` +
      `per point, ${opts.rounds} round(s), modelport log level ${opts.logLevel}`,
  );
  const measured = await measureServers(ctx, workload, [
    { name: "modelport", start: () => startModelport(ctx.modelDir, opts.logLevel, workload) },
    { name: "naive", start: () => startNaive(ctx.modelDir, workload) },
  ]);
  const { points } = measured;

  const summaries = summarize(points, opts.concurrency, ["modelport", "naive"]);
  const comparisons = compare(points, opts.concurrency);
  const v = verdict(summaries, comparisons, points);
  const mp = measured.predictions.get("modelport")!;
  const nv = measured.predictions.get("naive")!;
  const agree = predictionsAgree(mp, nv);
  const commandList = [...measured.commands.values()];
  const modelportDescription = measured.descriptions.get("modelport") ?? null;

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
    workload: { model: workload.modelFile, body: workload.body },
    commands: commandList,
    predictions: { modelport: mp, naive: nv, agree },
    inProcess,
    summaries,
    comparisons,
    verdict: v,
    points,
  };
  const outFile = writeResults(ctx, "foundation", results);

  const noise = noiseLine(points);
  const out = [
    "",
    consoleTable(summaries),
    `CPU% columns: % of one core (${m.cpus} cores = ${m.cpus * 100}%); CPU us/req: server CPU time per ` +
      "request; mean batch: rows per batch modelport formed; bench = autocannon + log consumer; " +
      "other = rest of the machine (other processes, irq, steal).",
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
    `results: ${shownPath(outFile)}`,
    "",
  ];
  return { text: out.join("\n"), comparisons, verdict: v, resultsFile: outFile };
}
