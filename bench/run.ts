// The foundation benchmark (`npm run bench`): the churn-tree model, single-row requests at
// concurrency 1, 8 and 64, against modelport's real CLI and a naive node:http + onnxruntime server,
// plus onnxruntime called in-process as the ceiling. Prints a table, the modelport/naive ratios
// and whether the bar holds; writes JSON to bench/results/ and a Markdown table for docs/PERFORMANCE.md.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildModels } from "../examples/build-models.js";
import { type InProcessResult, measureInProcess } from "./in-process.js";
import { checkPrediction, measurePoint, type PointResult } from "./load.js";
import { parseOptions, USAGE } from "./options.js";
import {
  compare,
  consoleTable,
  machine,
  markdown,
  ratioLines,
  threadLines,
  verdict,
  verdictLine,
} from "./report.js";
import { type RunningServer, startModelport, startNaive } from "./servers.js";
import { MODEL_FILE, REQUEST_BODY } from "./workload.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const log = (line: string) => process.stderr.write(`${line}\n`);

function packageVersion(dir: string): string {
  return (JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { version: string }).version;
}

async function loadServer(
  start: () => Promise<RunningServer>,
  concurrency: readonly number[],
  warmupS: number,
  durationS: number,
): Promise<{
  command: string;
  prediction: Awaited<ReturnType<typeof checkPrediction>>;
  points: PointResult[];
}> {
  const server = await start();
  try {
    const prediction = await checkPrediction(server);
    log(`${server.name}: ${server.url} (pid ${server.child.pid}) answers ${JSON.stringify(prediction)}`);
    const points: PointResult[] = [];
    for (const c of concurrency) {
      const p = await measurePoint(server, c, warmupS, durationS);
      log(
        `  c=${c}: ${p.rps} req/s, p50 ${p.latencyMs.p50} ms, p99 ${p.latencyMs.p99} ms, ` +
          `non-2xx ${p.non2xx}, errors ${p.errors}, server CPU ${p.cpu.serverPct}%, bench CPU ${p.cpu.benchPct}%`,
      );
      points.push(p);
    }
    return { command: server.command, prediction, points };
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
  const modelDir = mkdtempSync(path.join(os.tmpdir(), "modelport-bench-"));
  try {
    log(`building models into ${modelDir}`);
    await buildModels(modelDir);
    const modelPath = path.join(modelDir, MODEL_FILE);

    log(`in-process: session.run in a loop for ${opts.inProcessS} s`);
    const inProcess: InProcessResult = await measureInProcess(
      modelPath,
      Math.min(1, opts.inProcessS),
      opts.inProcessS,
    );
    log(
      `  ${inProcess.callsPerS} calls/s, p50 ${inProcess.latencyMs.p50} ms, p99 ${inProcess.latencyMs.p99} ms`,
    );

    const each = `${opts.warmupS} s warm-up + ${opts.durationS} s`;
    log(`modelport (log level ${opts.logLevel}): concurrency ${opts.concurrency.join(", ")}, ${each} each`);
    const mp = await loadServer(
      () => startModelport(modelDir, opts.logLevel),
      opts.concurrency,
      opts.warmupS,
      opts.durationS,
    );
    log(`naive: concurrency ${opts.concurrency.join(", ")}, ${each} each`);
    const nv = await loadServer(() => startNaive(modelDir), opts.concurrency, opts.warmupS, opts.durationS);

    const points = [...mp.points, ...nv.points];
    const comparisons = compare(points, opts.concurrency);
    const v = verdict(points);
    const agree =
      mp.prediction.label === nv.prediction.label &&
      mp.prediction.probabilities.every((p, i) => Math.abs(p - nv.prediction.probabilities[i]!) < 1e-6);
    const m = machine();
    const commands = [mp.command, nv.command];

    const results = {
      benchmark: "foundation",
      date,
      machine: m,
      versions: {
        modelport: packageVersion(repoRoot),
        onnxruntimeNode: packageVersion(path.join(repoRoot, "node_modules/onnxruntime-node")),
        autocannon: packageVersion(path.join(repoRoot, "node_modules/autocannon")),
      },
      options: {
        durationS: opts.durationS,
        warmupS: opts.warmupS,
        inProcessS: opts.inProcessS,
        concurrency: opts.concurrency,
        modelportLogLevel: opts.logLevel,
        pipelining: 1,
        quick: opts.quick,
      },
      workload: { model: MODEL_FILE, body: REQUEST_BODY },
      commands,
      predictions: { modelport: mp.prediction, naive: nv.prediction, agree },
      inProcess,
      points,
      comparisons,
      verdict: v,
    };
    const outDir = opts.outDir ? path.resolve(opts.outDir) : path.join(repoRoot, "bench/results");
    mkdirSync(outDir, { recursive: true });
    const outFile = path.join(outDir, `foundation-${date.replace(/:/g, "-")}.json`);
    writeFileSync(outFile, `${JSON.stringify(results, null, 2)}\n`);

    const out = [
      "",
      consoleTable(points),
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
      agree ? "" : "WARNING: modelport and the naive server disagree on the prediction.",
      "",
      "--- Markdown for docs/PERFORMANCE.md ---",
      "",
      markdown({
        date,
        machine: m,
        durationS: opts.durationS,
        warmupS: opts.warmupS,
        logLevel: opts.logLevel,
        points,
        comparisons,
        verdict: v,
        inProcess,
        commands,
      }),
      "",
      `results: ${path.relative(process.cwd(), outFile) || outFile}`,
      "",
    ];
    process.stdout.write(out.join("\n"));
  } finally {
    rmSync(modelDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${(err as Error)?.stack ?? err}\n`);
  process.exitCode = 1;
});
