// Command-line flags of the benchmark (`node dist/bench/run.js --help`).
import { parseArgs } from "node:util";

export const USAGE = `Usage: node dist/bench/run.js [options]     (or: npm run bench -- [options])

  --duration S         measured seconds per load point (default 8)
  --warmup S           warm-up seconds before each load point, thrown away (default 2)
  --quick              short run for a smoke test: --duration 2 --warmup 1, 1 s in-process
  --rounds N           measure every point N times, alternating which server goes first;
                       report medians (default 1; use 3 on a noisy machine)
  --concurrency LIST   comma-separated connection counts (default 1,8,64)
  --log-level LEVEL    modelport's --log-level (default info: one log line per request)
  --out DIR            where the JSON results go (default bench/results)
  -h, --help           this help
`;

/** A bad flag: reported with the usage text, without a stack. */
export class UsageError extends Error {}

export interface BenchOptions {
  durationS: number;
  warmupS: number;
  inProcessS: number;
  concurrency: number[];
  rounds: number;
  logLevel: string;
  /** null: bench/results in the repository. */
  outDir: string | null;
  quick: boolean;
}

function positive(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new UsageError(`--${flag} must be a positive number, got '${value}'`);
  return n;
}

function wholePositive(flag: string, value: string): number {
  const n = positive(flag, value);
  if (!Number.isInteger(n)) throw new UsageError(`--${flag} takes whole numbers, got '${value}'`);
  return n;
}

function nonNegative(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`--${flag} must be a number >= 0, got '${value}'`);
  return n;
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      duration: { type: "string" },
      warmup: { type: "string" },
      quick: { type: "boolean" },
      concurrency: { type: "string" },
      rounds: { type: "string" },
      "log-level": { type: "string" },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
}

/** Parsed options, or null when --help was asked for. */
export function parseOptions(argv: string[]): BenchOptions | null {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values } = parsed;
  if (values.help) return null;
  const quick = values.quick ?? false;
  const concurrency = (values.concurrency ?? "1,8,64")
    .split(",")
    .map((c) => wholePositive("concurrency", c.trim()));
  return {
    durationS: values.duration !== undefined ? positive("duration", values.duration) : quick ? 2 : 8,
    warmupS: values.warmup !== undefined ? nonNegative("warmup", values.warmup) : quick ? 1 : 2,
    inProcessS: quick ? 1 : 5,
    concurrency,
    rounds: values.rounds !== undefined ? wholePositive("rounds", values.rounds) : 1,
    logLevel: values["log-level"] ?? "info",
    outDir: values.out ?? null,
    quick,
  };
}
