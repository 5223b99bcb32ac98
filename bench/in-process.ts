// The ceiling: onnxruntime-node called directly in this process in a tight loop, the workload's
// row repeated `batchRows` times (default 1), the same input every time, no HTTP. Session options
// as the naive server's.
import { InferenceSession, Tensor } from "onnxruntime-node";
import { round, Samples } from "./stats.js";
import type { Workload } from "./workload.js";

export interface InProcessResult {
  batchRows: number;
  durationS: number;
  calls: number;
  callsPerS: number;
  /** callsPerS × batchRows. */
  rowsPerS: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
}

/** Calls `session.run(feeds)` back to back for `ms`; each call's time goes to `samples` when given. */
export async function loop(
  session: InferenceSession,
  feeds: Record<string, Tensor>,
  ms: number,
  samples?: Samples,
) {
  const start = performance.now();
  const end = start + ms;
  let calls = 0;
  let now = start;
  while (now < end) {
    const t0 = performance.now();
    await session.run(feeds);
    now = performance.now();
    samples?.add(now - t0);
    calls++;
  }
  return { calls, seconds: (now - start) / 1000 };
}

export async function measureInProcess(
  modelPath: string,
  workload: Workload,
  warmupS: number,
  durationS: number,
  batchRows = 1,
) {
  const session = await InferenceSession.create(modelPath, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
  });
  try {
    const { row, inputName } = workload;
    const data = new Float32Array(batchRows * row.length);
    for (let r = 0; r < batchRows; r++) data.set(row, r * row.length);
    const feeds = { [inputName]: new Tensor("float32", data, [batchRows, row.length]) };
    await loop(session, feeds, warmupS * 1000);
    const samples = new Samples();
    const { calls, seconds } = await loop(session, feeds, durationS * 1000, samples);
    const [p50, p90, p99, max] = samples.percentiles([50, 90, 99, 100]) as [number, number, number, number];
    const result: InProcessResult = {
      batchRows,
      durationS: round(seconds),
      calls,
      callsPerS: round(calls / seconds),
      rowsPerS: round((calls * batchRows) / seconds),
      latencyMs: {
        p50: round(p50),
        p90: round(p90),
        p99: round(p99),
        max: round(max),
        mean: round(samples.mean()),
      },
    };
    return result;
  } finally {
    await session.release();
  }
}
