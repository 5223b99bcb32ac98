// One load point against a running server: autocannon at a given concurrency (connections,
// pipelining 1), a warm-up run that is thrown away, then the measured run. Latency percentiles come
// from every response's own time (sub-millisecond), CPU use from /proc over the measured run.
import os from "node:os";
import autocannon from "autocannon";
import { type CpuReport, cpuReport, cpuSnapshot } from "./cpu.js";
import type { RunningServer } from "./servers.js";
import { round, Samples } from "./stats.js";
import { JSON_HEADERS, REQUEST_BODY } from "./workload.js";

export interface PointResult {
  server: RunningServer["name"];
  concurrency: number;
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
}

function cannon(server: RunningServer, connections: number, duration: number): autocannon.Instance {
  return autocannon({
    url: `${server.url}${server.predictPath}`,
    method: "POST",
    headers: JSON_HEADERS,
    body: REQUEST_BODY,
    connections,
    pipelining: 1,
    duration,
    timeout: 10,
  });
}

export async function measurePoint(
  server: RunningServer,
  concurrency: number,
  warmupS: number,
  durationS: number,
): Promise<PointResult> {
  if (warmupS > 0) await cannon(server, concurrency, warmupS);

  const samples = new Samples();
  const logBefore = server.child.stdoutStats().lines;
  const cpuBefore = cpuSnapshot(server.child.pid);
  const instance = cannon(server, concurrency, durationS);
  instance.on("response", (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status >= 200 && status < 300) samples.add(ms);
  });
  const r = await instance;
  const cpuAfter = cpuSnapshot(server.child.pid);

  const [p50, p90, p99, max] = samples.percentiles([50, 90, 99, 100]) as [number, number, number, number];
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(r.statusCodeStats)) statusCodes[code] = count;
  return {
    server: server.name,
    concurrency,
    durationS: r.duration,
    requests: r.requests.total,
    rps: round(r.requests.total / r.duration),
    latencyMs: {
      p50: round(p50),
      p90: round(p90),
      p99: round(p99),
      max: round(max),
      mean: round(samples.mean()),
    },
    autocannonLatencyMs: { p50: r.latency.p50, p99: r.latency.p99 },
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes,
    serverLogLines: server.child.stdoutStats().lines - logBefore,
    cpu: cpuReport(cpuBefore, cpuAfter, os.cpus().length),
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
