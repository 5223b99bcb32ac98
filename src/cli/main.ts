// The modelport command line: one file per command; this one only dispatches.
import { VERSION } from "../version.js";
import { UsageError } from "./args.js";
import { BENCH_HELP, bench } from "./bench.js";
import { CHECK_HELP, check } from "./check.js";
import { COST_HELP, cost } from "./cost.js";
import { GOLDEN_HELP, golden } from "./golden.js";
import { JOBS_HELP, jobs } from "./jobs.js";
import { KEYS_HELP, keys } from "./keys.js";
import { MODELS_HELP, models } from "./models.js";
import { SERVE_HELP, serve } from "./serve.js";
import { TUNE_HELP, tune } from "./tune.js";
import { TYPES_HELP, types } from "./types.js";

const HELP = `modelport ${VERSION}: serve ONNX models and TypeScript handlers over HTTP.

Usage: modelport <command> [options]

Commands:
  serve [MODEL] [-c FILE]   serve models (modelport serve model.onnx, modelport serve -c modelport.yaml)
  check [MODEL] [-c FILE]   verify sha256, load and golden check without serving; exit 1 on failure
  golden record MODEL ...   write a golden file from given inputs
  jobs list|show|cancel|retry|purge   inspect and manage asynchronous jobs
  keys create NAME|list     named API keys with roles, models and limits (docs/Multi-tenant.md)
  models list|load|unload|promote|rollback   change what a running server has loaded (docs/Models-over-time.md)
  bench URL [--model NAME]  load a running server at one or more concurrencies: req/s, p50/p90/p99, chart
  tune MODEL                try serving layouts (processes × threads × batching) and write the best as config
  cost [URL]                per model: requests, cost per 1,000 requests, compute ms per request (docs/Cost.md)
  types [URL] > models.ts   TypeScript types of a server's models, for the typed client (docs/Client.md)
  version                   print the version

Run 'modelport <command> --help' for a command's options. Docs: docs/ in the repository.
`;

/** Runs the CLI; resolves to the exit code (serve resolves only when the process stops). */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case "serve":
        return await serve(rest);
      case "check":
        return await check(rest);
      case "golden":
        return await golden(rest);
      case "jobs":
        return await jobs(rest);
      case "keys":
        return await keys(rest);
      case "models":
        return await models(rest);
      case "bench":
        return await bench(rest);
      case "tune":
        return await tune(rest);
      case "cost":
        return await cost(rest);
      case "types":
        return await types(rest);
      case "version":
      case "--version":
      case "-v":
        process.stdout.write(`${VERSION}\n`);
        return 0;
      case undefined:
      case "help":
      case "--help":
      case "-h":
        process.stdout.write(HELP);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command '${command}'`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`modelport: ${err.message}\nRun 'modelport --help'.\n`);
      return 2;
    }
    throw err;
  }
}

export {
  BENCH_HELP,
  CHECK_HELP,
  COST_HELP,
  GOLDEN_HELP,
  JOBS_HELP,
  KEYS_HELP,
  MODELS_HELP,
  SERVE_HELP,
  TUNE_HELP,
  TYPES_HELP,
};
