// Folds the measured points into one figure per (server, concurrency) and the ratios between two
// servers (modelport/naive by default). With several rounds, each ratio is the median of
// per-round ratios, pairing the two servers' points measured back to back, so slow drift in
// machine load cancels out.
import type { PointResult } from "./load.js";
import { round } from "./stats.js";

export interface Summary {
  server: PointResult["server"];
  concurrency: number;
  rounds: number;
  /** Medians over rounds. */
  rps: number;
  p50: number;
  p99: number;
  serverCpuPct: number | null;
  benchCpuPct: number;
  otherCpuPct: number | null;
  serverCpuUsPerRequest: number | null;
  /** Mean rows per batch modelport formed (median over rounds); null for the naive server. */
  meanBatchRows: number | null;
  /** Sums over rounds. */
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

export interface Comparison {
  /** The ratios are server / baseline. */
  server: string;
  baseline: string;
  concurrency: number;
  rounds: number;
  rpsRatio: number; // server / baseline; below 1 is worse
  p50Ratio: number;
  p99Ratio: number; // server / baseline; above 1 is worse
  cpuPerRequestRatio: number | null; // server / baseline server CPU per request
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function medianOrNull(xs: readonly (number | null)[]): number | null {
  return xs.some((x) => x === null) ? null : round(median(xs as number[]));
}

/** One summary per (server, concurrency); servers in the given order (default: as first measured). */
export function summarize(
  points: readonly PointResult[],
  concurrency: readonly number[],
  servers: readonly string[] = [...new Set(points.map((p) => p.server))],
): Summary[] {
  const out: Summary[] = [];
  for (const server of servers) {
    for (const c of concurrency) {
      const ps = points.filter((p) => p.server === server && p.concurrency === c);
      if (ps.length === 0) continue;
      const sum = (f: (p: PointResult) => number) => ps.reduce((a, p) => a + f(p), 0);
      out.push({
        server,
        concurrency: c,
        rounds: ps.length,
        rps: round(median(ps.map((p) => p.rps))),
        p50: round(median(ps.map((p) => p.latencyMs.p50))),
        p99: round(median(ps.map((p) => p.latencyMs.p99))),
        serverCpuPct: medianOrNull(ps.map((p) => p.cpu.serverPct)),
        benchCpuPct: round(median(ps.map((p) => p.cpu.benchPct))),
        otherCpuPct: medianOrNull(ps.map((p) => p.cpu.otherPct)),
        serverCpuUsPerRequest: medianOrNull(ps.map((p) => p.serverCpuUsPerRequest)),
        meanBatchRows: medianOrNull(ps.map((p) => p.batch?.meanRows ?? null)),
        requests: sum((p) => p.requests),
        non2xx: sum((p) => p.non2xx),
        errors: sum((p) => p.errors),
        timeouts: sum((p) => p.timeouts),
      });
    }
  }
  return out;
}

/** server/baseline ratios per concurrency, from the pairs of points measured in the same round. */
export function compare(
  points: readonly PointResult[],
  concurrency: readonly number[],
  server = "modelport",
  baseline = "naive",
): Comparison[] {
  const out: Comparison[] = [];
  for (const c of concurrency) {
    const pairs: [PointResult, PointResult][] = [];
    for (const m of points.filter((p) => p.server === server && p.concurrency === c)) {
      const n = points.find((p) => p.server === baseline && p.concurrency === c && p.round === m.round);
      if (n) pairs.push([m, n]);
    }
    if (pairs.length === 0) continue;
    const ratio = (f: (p: PointResult) => number) => round(median(pairs.map(([m, n]) => f(m) / f(n))));
    const cpu = pairs.every(([m, n]) => m.serverCpuUsPerRequest !== null && n.serverCpuUsPerRequest !== null);
    out.push({
      server,
      baseline,
      concurrency: c,
      rounds: pairs.length,
      rpsRatio: ratio((p) => p.rps),
      p50Ratio: ratio((p) => p.latencyMs.p50),
      p99Ratio: ratio((p) => p.latencyMs.p99),
      cpuPerRequestRatio: cpu ? ratio((p) => p.serverCpuUsPerRequest!) : null,
    });
  }
  return out;
}
