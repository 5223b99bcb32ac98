// The batching suite: wide-mlp (inference-bound, ~0.6 ms per row at batch 1), single-row requests
// at concurrency 1, 8 and 64, against modelport with batching on (default settings), modelport with
// one tuned batching setting, modelport with --batching off, and the naive per-request server;
// every server with 1 intra-op thread. For modelport it reads the batches formed from /metrics.
// The churn-tree bar comes from the foundation suite when it ran in the same invocation.
import path from "node:path";
import { type Comparison, compare, summarize } from "./aggregate.js";
import {
  batchingMarkdown,
  batchingRatioLines,
  batchingVerdict,
  batchingVerdictLines,
  churnTreeBar,
} from "./batching-report.js";
import type { FoundationOutcome } from "./foundation.js";
import { measureInProcess } from "./in-process.js";
import { predictionsAgree } from "./load.js";
import { servingLine } from "./provenance.js";
import { consoleTable, noiseLine, threadLines } from "./report.js";
import { startModelport, startNaive } from "./servers.js";
import { measureServers, type Starter, type SuiteContext, shownPath, writeResults } from "./suite.js";
import { wideMlp } from "./workload.js";

/** The in-process ceiling is measured at batch 1 and at modelport's default largest batch. */
const IN_PROCESS_BATCHES = [1, 64];

export async function runBatching(
  ctx: SuiteContext,
  foundation: FoundationOutcome | null,
  commandLine: string,
): Promise<string> {
  const { opts, date, source, log } = ctx;
  const m = ctx.machine;
  const workload = wideMlp(ctx.modelDir);
  const modelPath = path.join(ctx.modelDir, workload.modelFile);

  log(`batching suite (${workload.modelName})`);
  const inProcess = [];
  for (const rows of IN_PROCESS_BATCHES) {
    log(`in-process: session.run at batch ${rows} in a loop for ${opts.inProcessS} s`);
    const r = await measureInProcess(
      modelPath,
      workload,
      Math.min(1, opts.inProcessS),
      opts.inProcessS,
      rows,
    );
    log(`  ${r.rowsPerS} rows/s (${r.callsPerS} calls/s), p50 ${r.latencyMs.p50} ms per call`);
    inProcess.push(r);
  }

  const threads = ["--threads", "1"];
  const servers: (Starter & { what: string })[] = [
    {
      name: "modelport",
      what: "default settings",
      start: () => startModelport(ctx.modelDir, opts.logLevel, workload, { flags: threads }),
    },
  ];
  const tunedName = opts.tuned ? "modelport-tuned" : null;
  if (opts.tuned) {
    const { maxBatchRows, maxDelayMs } = opts.tuned;
    servers.push({
      name: "modelport-tuned",
      what: "one tuned setting",
      start: () =>
        startModelport(ctx.modelDir, opts.logLevel, workload, {
          name: "modelport-tuned",
          flags: [
            ...threads,
            "--batch-max-rows",
            String(maxBatchRows),
            "--batch-max-delay-ms",
            String(maxDelayMs),
          ],
        }),
    });
  }
  servers.push(
    {
      name: "modelport-off",
      what: "one request per session.run",
      start: () =>
        startModelport(ctx.modelDir, opts.logLevel, workload, {
          name: "modelport-off",
          flags: [...threads, "--batching", "off"],
        }),
    },
    {
      name: "naive",
      what: "node:http + onnxruntime-node, one request per session.run on the main thread, 1 intra-op thread",
      start: () => startNaive(ctx.modelDir, workload),
    },
  );

  log(
    `servers: ${servers.map((s) => s.name).join(", ")}; concurrency ${opts.concurrency.join(", ")}, ` +
      `${opts.warmupS} s warm-up + ${opts.durationS} s per point, ${opts.rounds} round(s), ` +
      `modelport log level ${opts.logLevel}`,
  );
  const measured = await measureServers(ctx, workload, servers);
  const { points } = measured;
  const names = servers.map((s) => s.name);

  const summaries = summarize(points, opts.concurrency, names);
  const comparisons: Comparison[] = [];
  for (const name of names.filter((n) => n !== "naive")) {
    comparisons.push(...compare(points, opts.concurrency, name, "naive"));
    if (name !== "modelport-off")
      comparisons.push(...compare(points, opts.concurrency, name, "modelport-off"));
  }
  comparisons.sort((a, b) => a.concurrency - b.concurrency);
  const churnTree = churnTreeBar(foundation);
  const v = batchingVerdict(
    summaries,
    comparisons,
    points,
    tunedName,
    churnTree,
    foundation ? { noisyRounds: foundation.verdict.noisyRounds, rounds: foundation.verdict.rounds } : null,
  );

  const reference = measured.predictions.get("naive")!;
  const disagree = names.filter((n) => !predictionsAgree(measured.predictions.get(n)!, reference));
  const serving = Object.fromEntries(
    [...measured.descriptions].map(([name, d]) => [name, servingLine(d) ?? "(no model description)"]),
  );
  const serverList = servers.map((s) => ({
    name: s.name,
    what: serving[s.name] ? `${s.what}; ${serving[s.name]}` : s.what,
    command: measured.commands.get(s.name)!,
  }));

  const results = {
    benchmark: "batching",
    date,
    machine: m,
    source,
    commandLine,
    modelportModels: Object.fromEntries(measured.descriptions),
    options: {
      durationS: opts.durationS,
      warmupS: opts.warmupS,
      inProcessS: opts.inProcessS,
      concurrency: opts.concurrency,
      rounds: opts.rounds,
      modelportLogLevel: opts.logLevel,
      tuned: opts.tuned,
      pipelining: 1,
      quick: opts.quick,
    },
    workload: { model: workload.modelFile, body: workload.body },
    servers: serverList,
    predictions: { ...Object.fromEntries(measured.predictions), agree: disagree.length === 0 },
    inProcess,
    summaries,
    comparisons,
    verdict: v,
    foundationResults: foundation ? shownPath(foundation.resultsFile) : null,
    points,
  };
  const outFile = writeResults(ctx, "batching", results);

  const noise = noiseLine(points);
  const out = [
    "",
    `Batching suite: ${workload.description}`,
    "",
    consoleTable(summaries),
    `CPU% columns: % of one core (${m.cpus} cores = ${m.cpus * 100}%); CPU us/req: server CPU time per ` +
      "request; mean batch: rows per batch modelport formed (GET /metrics before and after each point); " +
      "bench = autocannon + log consumer; other = rest of the machine (other processes, irq, steal).",
    ...(noise ? [noise] : []),
    "",
    ...inProcess.map(
      (r) =>
        `in-process ceiling, batch ${r.batchRows}: ${r.rowsPerS} rows/s (${r.callsPerS} calls/s), ` +
        `p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms per call`,
    ),
    "",
    "server threads, % of one core (busiest first):",
    threadLines(points),
    "",
    "paired ratios (server/baseline):",
    batchingRatioLines(comparisons),
    "",
    ...batchingVerdictLines(v),
    ...serverList.map((s) => `${s.name}: ${s.what}`),
    `tree: commit ${source.commit}, ${source.srcChanges ?? "?"} uncommitted file(s) in src/`,
    ...(disagree.length === 0
      ? []
      : [`WARNING: ${disagree.join(", ")} disagree(s) with the naive server on the prediction.`]),
    "",
    "--- Markdown for docs/PERFORMANCE.md ---",
    "",
    batchingMarkdown({
      date,
      machine: m,
      workload: workload.description,
      durationS: opts.durationS,
      warmupS: opts.warmupS,
      rounds: opts.rounds,
      logLevel: opts.logLevel,
      servers: serverList,
      summaries,
      comparisons,
      inProcess,
      verdict: v,
      source,
      foundationResults: foundation ? path.basename(foundation.resultsFile) : null,
      commandLine,
    }),
    "",
    `results: ${shownPath(outFile)}`,
    "",
  ];
  return out.join("\n");
}
