// The benchmark (`npm run bench`, `npm run bench:batching`, `npm run bench:jobs`): builds the example
// models, then runs the suites asked for with --suite: foundation (the default; churn-tree,
// bench/foundation.ts), batching (wide-mlp, bench/batching.ts), all (those two, the batching verdict
// taking its churn-tree bar from the foundation suite), jobs (the jobs API, bench/jobs.ts) or
// embeddings (POST /v1/embeddings with batching on vs off, bench/embeddings.ts) or llm
// (streamed completions on llama.cpp vs node-llama-cpp in-process, bench/llm.ts) or overhead (what
// modelport adds where batching cannot help, bench/overhead.ts). Each suite prints
// its tables, verdict and Markdown for docs/PERFORMANCE.md on stdout and writes its JSON to bench/results/; progress goes to stderr.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildModels } from "../examples/build-models.js";
import { runBatching } from "./batching.js";
import { runEmbeddings } from "./embeddings.js";
import { type FoundationOutcome, runFoundation } from "./foundation.js";
import { runJobs } from "./jobs.js";
import { runLlm } from "./llm.js";
import { parseOptions, USAGE, UsageError } from "./options.js";
import { runOverhead } from "./overhead.js";
import { provenance } from "./provenance.js";
import { machine } from "./report.js";
import { runScaleout } from "./scaleout.js";
import type { SuiteContext } from "./suite.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const log = (line: string) => process.stderr.write(`${line}\n`);

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opts = parseOptions(argv);
  if (opts === null) {
    process.stdout.write(USAGE);
    return;
  }
  const modelDir = mkdtempSync(path.join(os.tmpdir(), "modelport-bench-"));
  // Removed on any exit, including process.exit from a signal handler (children.ts).
  process.on("exit", () => rmSync(modelDir, { recursive: true, force: true }));
  log(`building models into ${modelDir}`);
  await buildModels(modelDir);
  const ctx: SuiteContext = {
    opts,
    repoRoot,
    modelDir,
    date: new Date().toISOString(),
    machine: machine(),
    source: provenance(repoRoot),
    log,
  };
  const commandLine = ["node dist/bench/run.js", ...argv].join(" ");

  let foundation: FoundationOutcome | null = null;
  if (opts.suite === "foundation" || opts.suite === "all") {
    foundation = await runFoundation(ctx);
    process.stdout.write(foundation.text);
  }
  if (opts.suite === "batching" || opts.suite === "all") {
    process.stdout.write(await runBatching(ctx, foundation, commandLine));
  }
  if (opts.suite === "jobs") {
    process.stdout.write((await runJobs(ctx, commandLine)).text);
  }
  if (opts.suite === "scaleout") {
    process.stdout.write(await runScaleout(ctx, commandLine));
  }
  if (opts.suite === "llm") {
    process.stdout.write(await runLlm(ctx, commandLine));
  }
  if (opts.suite === "overhead") {
    process.stdout.write(await runOverhead(ctx, commandLine));
  }
  if (opts.suite === "embeddings") {
    process.stdout.write(await runEmbeddings(ctx, commandLine));
  }
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
