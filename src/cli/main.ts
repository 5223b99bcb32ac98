// The modelport command line: one file per command; this one only dispatches.
import { VERSION } from "../version.js";
import { UsageError } from "./args.js";
import { formatCliError } from "./cli-error.js";

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

Run 'modelport <command> --help' for a command's options. An error is one line with its code
(docs/Errors.md); --verbose, with any command, adds the stack trace. Docs: docs/ in the repository.
`;

type Command = (args: string[]) => Promise<number>;

/**
 * Each command's module, loaded only when it runs: `modelport version` or `jobs list` does not
 * pay for loading the server, the backends and every other command (a second or so at start).
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => (await import("./serve.js")).serve,
  check: async () => (await import("./check.js")).check,
  golden: async () => (await import("./golden.js")).golden,
  jobs: async () => (await import("./jobs.js")).jobs,
  keys: async () => (await import("./keys.js")).keys,
  models: async () => (await import("./models.js")).models,
  bench: async () => (await import("./bench.js")).bench,
  tune: async () => (await import("./tune.js")).tune,
  cost: async () => (await import("./cost.js")).cost,
  types: async () => (await import("./types.js")).types,
};

/**
 * Runs the CLI; resolves to the exit code (serve resolves only when the process stops). An error
 * is printed as one line with its code (stack with --verbose): 2 for usage, 1 otherwise.
 */
export async function main(args: string[]): Promise<number> {
  const verbose = args.includes("--verbose");
  const argv = args.filter((a) => a !== "--verbose");
  const [command, ...rest] = argv;
  try {
    const load = COMMANDS[command ?? ""];
    if (load) return await (await load())(rest);
    switch (command) {
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
    process.stderr.write(formatCliError(err, verbose));
    return err instanceof UsageError ? 2 : 1;
  }
}
