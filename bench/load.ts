// One load point against a running server: the shared load generator (src/loadgen/load.ts:
// autocannon at a given concurrency, pipelining 1, a warm-up run thrown away, then the measured
// run, latency percentiles from every response's own time), plus CPU use from /proc over the
// measured run and, for modelport, the batches it formed (GET /metrics just before and just after
// the measured run), plus whatever else a suite reads at those two moments (MeasureHooks).
import os from "node:os";
import { runLoad, type Target } from "../src/loadgen/load.js";
import { type CpuReport, type CpuSnapshot, cpuReport, cpuSnapshot } from "./cpu.js";
import type { RunningServer } from "./servers.js";
import { round } from "./stats.js";
import { JSON_HEADERS, type Workload } from "./workload.js";

export interface BatchStats {
  /** Batches sent to the model's runner during the measured run, and the rows in them. */
  batches: number;
  rows: number;
  /** rows / batches: the mean batch size modelport formed. */
  meanRows: number | null;
}

export interface PointResult {
  server: RunningServer["name"];
  concurrency: number;
  round: number;
  durationS: number;
  requests: number;
  rps: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  /** autocannon's own (integer-millisecond) histogram, for reference. */
  autocannonLatencyMs: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  serverLogLines: number;
  cpu: CpuReport;
  /** Server CPU time per request, microseconds (all its threads): less sensitive to noise than req/s. */
  serverCpuUsPerRequest: number | null;
  /** modelport's modelport_batch_rows histogram over the measured run; null for the naive server. */
  batch: BatchStats | null;
}

interface BatchCounters {
  sum: number;
  count: number;
}

const BATCH_ROWS = /^modelport_batch_rows_(sum|count)\{([^}]*)\}\s+(\S+)/;

/** modelport_batch_rows_sum and _count for the server's model, or null when /metrics is unavailable. */
async function scrapeBatchRows(server: RunningServer): Promise<BatchCounters | null> {
  try {
    const res = await fetch(`${server.url}/metrics`);
    if (!res.ok) return null;
    const counters: BatchCounters = { sum: 0, count: 0 };
    const label = `model="${server.modelName}"`;
    for (const line of (await res.text()).split("\n")) {
      const m = BATCH_ROWS.exec(line);
      if (!m || !m[2]!.split(",").includes(label)) continue;
      counters[m[1] as "sum" | "count"] += Number(m[3]);
    }
    return counters;
  } catch {
    return null;
  }
}

/** Extra readings a suite takes around the measured run (after the warm-up), e.g. from /metrics. */
export interface MeasureHooks {
  /** Just before the measured run starts. */
  before?(): Promise<void>;
  /** Just after it ends. */
  after?(): Promise<void>;
}

export async function measurePoint(
  server: RunningServer,
  workload: Workload,
  concurrency: number,
  warmupS: number,
  durationS: number,
  roundNo: number,
  hooks: MeasureHooks = {},
): Promise<PointResult> {
  const target: Target = {
    url: `${server.url}${server.predictPath}`,
    method: "POST",
    headers: JSON_HEADERS,
    body: workload.body,
  };
  const scrape = server.kind === "modelport";
  // The warm-up as its own run (as runLoad does it), so /metrics can be read between the two.
  if (warmupS > 0) await runLoad(target, { concurrency, durationS: warmupS, timeoutS: 10 });
  const batchBefore = scrape ? await scrapeBatchRows(server) : null;
  await hooks.before?.();
  let logBefore = 0;
  let cpuBefore: CpuSnapshot | undefined;
  const r = await runLoad(target, {
    concurrency,
    durationS,
    timeoutS: 10,
    onMeasureStart() {
      logBefore = server.child.stdoutStats().lines;
      cpuBefore = cpuSnapshot(server.child.pid);
    },
  });
  const cpuAfter = cpuSnapshot(server.child.pid);
  const batchAfter = scrape ? await scrapeBatchRows(server) : null;
  await hooks.after?.();

  let batch: BatchStats | null = null;
  if (batchBefore && batchAfter) {
    const batches = batchAfter.count - batchBefore.count;
    const rows = batchAfter.sum - batchBefore.sum;
    batch = { batches, rows, meanRows: batches > 0 ? round(rows / batches) : null };
  }
  const cpu = cpuReport(cpuBefore!, cpuAfter, os.cpus().length);
  const rps = r.durationS > 0 ? r.requests / r.durationS : 0;
  const ms = (x: number | null) => x ?? Number.NaN;
  return {
    server: server.name,
    concurrency,
    round: roundNo,
    durationS: r.durationS,
    requests: r.requests,
    rps: r.rps,
    latencyMs: {
      p50: ms(r.latencyMs.p50),
      p90: ms(r.latencyMs.p90),
      p99: ms(r.latencyMs.p99),
      max: ms(r.latencyMs.max),
      mean: ms(r.latencyMs.mean),
    },
    autocannonLatencyMs: r.autocannonLatencyMs,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes: r.statusCodes,
    serverLogLines: server.child.stdoutStats().lines - logBefore,
    cpu,
    serverCpuUsPerRequest: cpu.serverPct === null || rps === 0 ? null : round((cpu.serverPct * 1e4) / rps),
    batch,
  };
}

/** Each output's value for the one row sent: a number, or an array of numbers. */
export type Prediction = Record<string, number | number[]>;

const isNumber = (x: unknown): x is number => typeof x === "number";

/**
 * Sends the workload's request once and checks the answer: every output has exactly one row, a
 * number or an array of numbers (modelport's answer under "outputs", the naive server's at the top).
 */
export async function checkPrediction(server: RunningServer, workload: Workload): Promise<Prediction> {
  const res = await fetch(`${server.url}${server.predictPath}`, {
    method: "POST",
    headers: JSON_HEADERS,
    body: workload.body,
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${server.name}: predict answered ${res.status}: ${text}`);
  const body = JSON.parse(text) as Record<string, unknown>;
  const outputs = (server.kind === "modelport" ? body["outputs"] : body) as
    | Record<string, unknown>
    | undefined;
  const prediction: Prediction = {};
  for (const [name, value] of Object.entries(outputs ?? {})) {
    const row = Array.isArray(value) && value.length === 1 ? (value[0] as unknown) : undefined;
    if (isNumber(row) || (Array.isArray(row) && row.length > 0 && row.every(isNumber)))
      prediction[name] = row;
    else throw new Error(`${server.name}: output '${name}' is not one row of numbers: ${text}`);
  }
  if (Object.keys(prediction).length === 0) throw new Error(`${server.name}: no outputs in ${text}`);
  return prediction;
}

/** Whether two predictions have the same outputs and agree within `tolerance`. */
export function predictionsAgree(a: Prediction, b: Prediction, tolerance = 1e-6): boolean {
  const flat = (p: Prediction) =>
    Object.keys(p)
      .sort()
      .flatMap((k) => [k, ...[p[k]!].flat()]);
  const x = flat(a);
  const y = flat(b);
  return (
    x.length === y.length &&
    x.every((v, i) => {
      const w = y[i]!;
      return typeof v === "number" && typeof w === "number" ? Math.abs(v - w) <= tolerance : v === w;
    })
  );
}
