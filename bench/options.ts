// Command-line flags of the benchmark (`node dist/bench/run.js --help`).
import { parseArgs } from "node:util";

export const USAGE = `Usage: node dist/bench/run.js [options]     (or: npm run bench -- [options])

  --suite NAME         foundation (default): churn-tree, modelport vs the naive server;
                       batching: wide-mlp, modelport with batching on / tuned / off vs naive;
                       all: both, and the batching benchmark's verdict over both
                       (npm run bench:batching = --suite all);
                       jobs: the jobs API on churn-tree with SQLite, submission throughput
                       and submit-to-succeeded latency (npm run bench:jobs)
                       embeddings: POST /v1/embeddings (transformers), batching on vs off at
                       concurrency 32, bar >= 3x judged on bench-embed (MiniLM-L6 sizes, built
                       on demand), tiny-embed as a secondary row (npm run bench:embeddings)
                       scaleout: --role api + runners through Redis: jobs/s with 1 vs 2
                       runners (bar >= 1.8x) and the API->runner hop at c=1 (bar <= 1 ms
                       added to p50) (npm run bench:scaleout)
                       llm: bench-llama (GGUF, built on demand) streamed through
                       /v1/completions vs node-llama-cpp in-process: TTFT (bar <= 5 ms
                       added) and decode tokens/s (bar >= 90%) (npm run bench:llm)
                       overhead: what modelport adds where batching cannot help: a small
                       MLP (1 row at c=1, 32 rows at c=1 and 64) vs the naive server;
                       large tensors (image- and detector-shaped, OIP JSON and binary,
                       light and with the real families' arithmetic, the light
                       detector also with its runner in a child process and on the
                       HTTP thread) and a stateful 4-input model vs onnxruntime
                       in-process, with a bare node:http OIP server beside them; the
                       --concurrency flag does not apply (npm run bench:overhead)
  --cases LIST         overhead suite: only these cases (comma-separated ids, e.g.
                       image-binary,detect-full-binary; default all)
  --server-cpus LIST   overhead suite: start each server (modelport and the baselines,
                       not the bench's own client) under taskset -c LIST (Linux), e.g.
                       1 to keep a server's threads on one core
  --tuned R/MS         batching suite: also modelport with --batch-max-rows R
                       --batch-max-delay-ms MS (default 64/1; "off" to skip)
  --duration S         measured seconds per load point (default 8; jobs suite 10)
  --warmup S           warm-up seconds before each load point, thrown away (default 2)
  --quick              short run for a smoke test: --duration 2 --warmup 1, 1 s in-process,
                       jobs suite: 100 sequential jobs
  --rounds N           measure every point N times, rotating which server goes first;
                       report medians (default 1; use 3 on a noisy machine)
  --concurrency LIST   comma-separated connection counts (default 1,8,64; jobs suite 32)
  --jobs N             jobs suite: sequential jobs timed submit to succeeded (default 500)
  --log-level LEVEL    modelport's --log-level (default info: one log line per request)
  --out DIR            where the JSON results go (default bench/results)
  -h, --help           this help
`;

/** A bad flag: reported with the usage text, without a stack. */
export class UsageError extends Error {}

const SUITES = [
  "foundation",
  "batching",
  "all",
  "jobs",
  "embeddings",
  "scaleout",
  "llm",
  "overhead",
] as const;
export type Suite = (typeof SUITES)[number];

export interface BenchOptions {
  suite: Suite;
  /** The batching suite's tuned modelport setting, or null for none. */
  tuned: { maxBatchRows: number; maxDelayMs: number } | null;
  durationS: number;
  warmupS: number;
  inProcessS: number;
  concurrency: number[];
  rounds: number;
  /** Jobs suite: sequential jobs timed from submission to succeeded. */
  latencyJobs: number;
  logLevel: string;
  /** null: bench/results in the repository. */
  outDir: string | null;
  quick: boolean;
  /** Overhead suite: the case ids to run; null for all. */
  cases: string[] | null;
  /** Overhead suite: taskset's CPU list for the servers; null to leave them to the scheduler. */
  serverCpus: string | null;
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

/** taskset's list form: 1, 0-3, 0,2 (digits, commas and ranges only). */
function cpuList(value: string | undefined): string | null {
  if (value === undefined) return null;
  if (!/^\d+(-\d+)?(,\d+(-\d+)?)*$/.test(value))
    throw new UsageError(`--server-cpus takes a CPU list such as 1, 0-1 or 0,2; got '${value}'`);
  return value;
}

function parseTuned(value: string): BenchOptions["tuned"] {
  if (value === "off") return null;
  const [rows, ms, ...rest] = value.split("/");
  if (rows === undefined || ms === undefined || rest.length > 0)
    throw new UsageError(`--tuned takes ROWS/MS (e.g. 64/1) or off, got '${value}'`);
  return { maxBatchRows: wholePositive("tuned", rows), maxDelayMs: nonNegative("tuned", ms) };
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      suite: { type: "string" },
      cases: { type: "string" },
      "server-cpus": { type: "string" },
      tuned: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      quick: { type: "boolean" },
      concurrency: { type: "string" },
      rounds: { type: "string" },
      jobs: { type: "string" },
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
  const suite = values.suite ?? "foundation";
  if (!(SUITES as readonly string[]).includes(suite))
    throw new UsageError(`--suite must be ${SUITES.join(", ")}; got '${suite}'`);
  const jobs = suite === "jobs";
  const concurrency = (values.concurrency ?? (jobs || suite === "embeddings" ? "32" : "1,8,64"))
    .split(",")
    .map((c) => wholePositive("concurrency", c.trim()));
  return {
    suite: suite as Suite,
    tuned: parseTuned(values.tuned ?? "64/1"),
    durationS:
      values.duration !== undefined ? positive("duration", values.duration) : quick ? 2 : jobs ? 10 : 8,
    warmupS: values.warmup !== undefined ? nonNegative("warmup", values.warmup) : quick ? 1 : 2,
    inProcessS: quick ? 1 : 5,
    concurrency,
    rounds: values.rounds !== undefined ? wholePositive("rounds", values.rounds) : 1,
    latencyJobs: values.jobs !== undefined ? wholePositive("jobs", values.jobs) : quick ? 100 : 500,
    logLevel: values["log-level"] ?? "info",
    outDir: values.out ?? null,
    quick,
    cases: values.cases !== undefined ? values.cases.split(",").map((c) => c.trim()) : null,
    serverCpus: cpuList(values["server-cpus"]),
  };
}
