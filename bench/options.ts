// Command-line flags of the benchmark (`node dist/bench/run.js --help`).
import { parseArgs } from "node:util";

export const USAGE = `Usage: node dist/bench/run.js [options]     (or: npm run bench -- [options])

  --duration S         measured seconds per load point (default 8)
  --warmup S           warm-up seconds before each load point, thrown away (default 2)
  --quick              short run for a smoke test: --duration 2 --warmup 1, 1 s in-process
  --concurrency LIST   comma-separated connection counts (default 1,8,64)
  --log-level LEVEL    modelport's --log-level (default info: one log line per request)
  --out DIR            where the JSON results go (default bench/results)
  -h, --help           this help
`;

export interface BenchOptions {
  durationS: number;
  warmupS: number;
  inProcessS: number;
  concurrency: number[];
  logLevel: string;
  /** null: bench/results in the repository. */
  outDir: string | null;
  quick: boolean;
}

function positive(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${flag} must be a positive number, got '${value}'`);
  return n;
}

function nonNegative(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${flag} must be a number >= 0, got '${value}'`);
  return n;
}

/** Parsed options, or null when --help was asked for. */
export function parseOptions(argv: string[]): BenchOptions | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: "string" },
      warmup: { type: "string" },
      quick: { type: "boolean" },
      concurrency: { type: "string" },
      "log-level": { type: "string" },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) return null;
  const quick = values.quick ?? false;
  const concurrency = (values.concurrency ?? "1,8,64").split(",").map((c) => {
    const n = positive("concurrency", c.trim());
    if (!Number.isInteger(n)) throw new Error(`--concurrency takes whole numbers, got '${c}'`);
    return n;
  });
  return {
    durationS: values.duration !== undefined ? positive("duration", values.duration) : quick ? 2 : 8,
    warmupS: values.warmup !== undefined ? nonNegative("warmup", values.warmup) : quick ? 1 : 2,
    inProcessS: quick ? 1 : 5,
    concurrency,
    logLevel: values["log-level"] ?? "info",
    outDir: values.out ?? null,
    quick,
  };
}
