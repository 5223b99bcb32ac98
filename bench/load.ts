// One load point against a running server: the shared load generator (src/loadgen/load.ts:
// autocannon at a given concurrency, pipelining 1, a warm-up run thrown away, then the measured
// run, latency percentiles from every response's own time), plus CPU use from /proc over the
// measured run.
import os from "node:os";
import { runLoad } from "../src/loadgen/load.js";
import { type CpuReport, type CpuSnapshot, cpuReport, cpuSnapshot } from "./cpu.js";
import type { RunningServer } from "./servers.js";
import { round } from "./stats.js";
import { JSON_HEADERS, REQUEST_BODY } from "./workload.js";

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
}

export async function measurePoint(
  server: RunningServer,
  concurrency: number,
  warmupS: number,
  durationS: number,
  roundNo: number,
): Promise<PointResult> {
  let logBefore = 0;
  let cpuBefore: CpuSnapshot | undefined;
  const r = await runLoad(
    { url: `${server.url}${server.predictPath}`, method: "POST", headers: JSON_HEADERS, body: REQUEST_BODY },
    {
      concurrency,
      durationS,
      warmupS,
      timeoutS: 10,
      onMeasureStart() {
        logBefore = server.child.stdoutStats().lines;
        cpuBefore = cpuSnapshot(server.child.pid);
      },
    },
  );
  const cpuAfter = cpuSnapshot(server.child.pid);

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
  };
}

/** Sends the benchmark request once and checks the answer has a label and two probabilities. */
export async function checkPrediction(
  server: RunningServer,
): Promise<{ label: number; probabilities: number[] }> {
  const res = await fetch(`${server.url}${server.predictPath}`, {
    method: "POST",
    headers: JSON_HEADERS,
    body: REQUEST_BODY,
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${server.name}: predict answered ${res.status}: ${text}`);
  const body = JSON.parse(text) as Record<string, unknown>;
  const outputs = (server.name === "modelport" ? body["outputs"] : body) as
    | { label?: unknown; probabilities?: unknown }
    | undefined;
  const label = (outputs?.label as unknown[] | undefined)?.[0];
  const probabilities = (outputs?.probabilities as unknown[] | undefined)?.[0];
  if (
    typeof label !== "number" ||
    !Array.isArray(probabilities) ||
    probabilities.length !== 2 ||
    !probabilities.every((p) => typeof p === "number")
  ) {
    throw new Error(`${server.name}: unexpected predict answer: ${text}`);
  }
  return { label, probabilities: probabilities as number[] };
}
