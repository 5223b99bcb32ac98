// One load point: autocannon at a given concurrency (connections, pipelining 1), an optional
// warm-up run that is thrown away, then the measured run. Latency percentiles come from every 2xx
// response's own time (sub-millisecond), not autocannon's integer-millisecond histogram.
// Shared by `modelport bench`, `modelport tune` and the benchmark in bench/.
import autocannon from "autocannon";
import { round, Samples } from "./stats.js";

/** What every request of a run sends. */
export interface Target {
  url: string;
  method: string;
  headers: Record<string, string>;
  /** Text, or bytes sent as they are. */
  body?: string | Buffer;
}

export interface LoadPhase {
  phase: "warmup" | "measure";
  concurrency: number;
  /** Seconds since the phase started, and how long it lasts. */
  elapsedS: number;
  totalS: number;
  /** Responses so far in this phase. */
  responses: number;
}

export interface LoadOptions {
  concurrency: number;
  durationS: number;
  /** Seconds of load before the measured run, thrown away (default 0). */
  warmupS?: number;
  /** Per-request timeout in seconds (default 10). */
  timeoutS?: number;
  /** Called about every 250 ms while load runs. */
  onProgress?: (p: LoadPhase) => void;
  /** Called just before the measured run starts (e.g. to snapshot CPU counters). */
  onMeasureStart?: () => void;
}

export interface LoadResult {
  concurrency: number;
  durationS: number;
  /** Responses received (any status). */
  requests: number;
  /** Responses per second. */
  rps: number;
  /** Latency of 2xx responses, ms; null when there were none. */
  latencyMs: {
    p50: number | null;
    p90: number | null;
    p99: number | null;
    max: number | null;
    mean: number | null;
  };
  /** autocannon's own (integer-millisecond) histogram, for reference. */
  autocannonLatencyMs: { p50: number; p99: number };
  /** Connection errors and timeouts (no response at all). */
  errors: number;
  timeouts: number;
  /** Responses with a status outside 200–299. */
  non2xx: number;
  statusCodes: Record<string, number>;
  /** A few distinct error messages, for the report. */
  errorMessages: string[];
}

const finite = (x: number): number | null => (Number.isFinite(x) ? round(x) : null);

function cannon(target: Target, connections: number, durationS: number, timeoutS: number) {
  return autocannon({
    url: target.url,
    method: target.method,
    headers: target.headers,
    ...(target.body !== undefined ? { body: target.body } : {}),
    connections,
    pipelining: 1,
    duration: durationS,
    timeout: timeoutS,
  });
}

/** Runs `fn` every 250 ms with the seconds since start; returns a stop function. */
function every250(fn: (elapsedS: number) => void): () => void {
  const start = performance.now();
  const timer = setInterval(() => fn((performance.now() - start) / 1000), 250);
  return () => clearInterval(timer);
}

/** Runs the warm-up (if any) and the measured run against `target`. */
export async function runLoad(target: Target, opts: LoadOptions): Promise<LoadResult> {
  const timeoutS = opts.timeoutS ?? 10;
  const { concurrency } = opts;
  const warmupS = opts.warmupS ?? 0;
  if (warmupS > 0) {
    let responses = 0;
    const warm = cannon(target, concurrency, warmupS, timeoutS);
    warm.on("response", () => {
      responses++;
    });
    const stop = every250((elapsedS) =>
      opts.onProgress?.({ phase: "warmup", concurrency, elapsedS, totalS: warmupS, responses }),
    );
    try {
      await warm;
    } finally {
      stop();
    }
  }

  opts.onMeasureStart?.();
  const samples = new Samples();
  const errorMessages = new Set<string>();
  let responses = 0;
  const instance = cannon(target, concurrency, opts.durationS, timeoutS);
  instance.on("response", (_client: unknown, status: number, _bytes: number, ms: number) => {
    responses++;
    if (status >= 200 && status < 300) samples.add(ms);
  });
  instance.on("reqError", (err: Error) => {
    if (errorMessages.size < 5) errorMessages.add(err.message);
  });
  const stop = every250((elapsedS) =>
    opts.onProgress?.({ phase: "measure", concurrency, elapsedS, totalS: opts.durationS, responses }),
  );
  let r: autocannon.Result;
  try {
    r = await instance;
  } finally {
    stop();
  }

  const [p50, p90, p99, max] = samples.percentiles([50, 90, 99, 100]) as [number, number, number, number];
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(r.statusCodeStats)) statusCodes[code] = count;
  return {
    concurrency,
    durationS: r.duration,
    requests: r.requests.total,
    rps: r.duration > 0 ? round(r.requests.total / r.duration) : 0,
    latencyMs: {
      p50: finite(p50),
      p90: finite(p90),
      p99: finite(p99),
      max: finite(max),
      mean: finite(samples.mean()),
    },
    autocannonLatencyMs: { p50: r.latency.p50, p99: r.latency.p99 },
    errors: r.errors,
    timeouts: r.timeouts,
    non2xx: r.non2xx,
    statusCodes,
    errorMessages: [...errorMessages],
  };
}
