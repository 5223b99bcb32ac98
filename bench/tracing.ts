// The cost of tracing (`npm run bench:tracing`): single-row requests at concurrency 64 on the
// overhead suite's small MLP (`modelport serve <models>/overhead-mlp.onnx`, default settings),
// with tracing off and with tracing on at 100% sampling (OTEL_TRACES_SAMPLER=always_on) exporting
// over OTLP/HTTP protobuf to a receiver in this process (test/helpers/otlp-receiver.ts) that only
// acknowledges, as a collector on another machine would (--decode makes it decode every span, so
// the collector's work lands on these cores too and is measured with the server). Each round
// starts a tracing-off and a tracing-on server (a fresh pair, so that one process's luck, such as
// where the scheduler puts its threads, stays in one round), warms both up, then loads them for
// short slices in the order ABBA (off-on-on-off, or on-off-off-on in the next round): the
// machine's speed drifts over seconds on a shared machine, and a drift that is linear within the
// round weighs on both servers alike. The idle server waits meanwhile (the on server may send its
// last partial batch in the next slice: one export).
// Load comes from the shared autocannon load generator. The bar (docs/PERFORMANCE.md): on >= 85%
// of off (median of the per-round ratios).
//
//   node dist/bench/tracing.js [--rounds N] [--duration S] [--warmup S] [--decode]
import { mkdtempSync } from "node:fs";
import { availableParallelism, cpus, tmpdir } from "node:os";
import path from "node:path";
import { runLoad } from "../src/loadgen/load.js";
import { startOtlpReceiver } from "../test/helpers/otlp-receiver.js";
import { writeOverheadModel } from "./overhead-models.js";
import { type RunningServer, startModelport } from "./servers.js";
import { median, round } from "./stats.js";
import type { Workload } from "./workload.js";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const rounds = arg("rounds", 6);
// (--decode is read in main.)
const durationS = arg("duration", 3);
const warmupS = arg("warmup", 2);
/** Load before each measured slice, unmeasured: the connections are new and the server was idle. */
const SLICE_WARMUP_S = 1;
const CONCURRENCY = 64;

const TRACING_ENV = [
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_TRACES_SAMPLER",
  "OTEL_SERVICE_NAME",
  "OTEL_TRACES_EXPORTER",
];

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "modelport-bench-tracing-"));
  writeOverheadModel(dir, "overhead-mlp");
  const workload = { modelName: "overhead-mlp", modelFile: "overhead-mlp.onnx" } as Workload;
  // One row of the MLP's 30 features.
  const body = JSON.stringify({ rows: [Array.from({ length: 30 }, (_, i) => (i % 7) / 7)] });
  // --decode: the receiver decodes every span (a collector sharing the server's cores).
  const decode = process.argv.includes("--decode");
  const receiver = await startOtlpReceiver({ decode });
  for (const k of TRACING_ENV) delete process.env[k];

  const request = {
    method: "POST" as const,
    headers: { "content-type": "application/json" },
    body,
  };
  const start = async (on: boolean): Promise<RunningServer> => {
    // The child inherits this process's environment, which holds no tracing variables between starts.
    if (on) {
      process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
      process.env.OTEL_TRACES_SAMPLER = "always_on";
      process.env.OTEL_SERVICE_NAME = "bench";
    }
    try {
      return await startModelport(dir, "warn", workload, { name: on ? "tracing-on" : "tracing-off" });
    } finally {
      for (const k of TRACING_ENV) delete process.env[k];
    }
  };
  const load = async (server: RunningServer, seconds: number, warmup: number) => {
    const r = await runLoad(
      { ...request, url: `${server.url}/v1/models/overhead-mlp/predict` },
      { concurrency: CONCURRENCY, durationS: seconds, warmupS: warmup, timeoutS: 30 },
    );
    if (r.non2xx + r.errors + r.timeouts > 0)
      throw new Error(`${server.name}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
    return { rps: r.rps, p50: round(r.latencyMs.p50 ?? Number.NaN) };
  };

  const ratios: number[] = [];
  const offs: number[] = [];
  const ons: number[] = [];
  console.log(
    `bench:tracing: overhead-mlp, 1 row, concurrency ${CONCURRENCY}, ${rounds} rounds, each two fresh servers warmed up ${warmupS} s, then measured ${durationS} s at a time (+${SLICE_WARMUP_S} s unmeasured) in the order ABBA, ${availableParallelism()} cores (${cpus()[0]?.model ?? "?"}), node ${process.version}, receiver ${decode ? "decoding every span" : "not decoding"}`,
  );
  for (let i = 0; i < rounds; i++) {
    // Fresh servers each round (a process's own luck, such as where its threads land, stays in
    // one round), warmed up, then measured off-on-on-off or on-off-off-on: a drift of the
    // machine's speed within the round weighs on both alike.
    const first = i % 2 === 1;
    const servers = new Map<boolean, RunningServer>();
    const sums = new Map<boolean, { rps: number; p50: number[] }>([
      [false, { rps: 0, p50: [] }],
      [true, { rps: 0, p50: [] }],
    ]);
    try {
      for (const on of [first, !first]) servers.set(on, await start(on));
      for (const on of [first, !first]) await load(servers.get(on)!, warmupS, 0);
      for (const on of [first, !first, !first, first]) {
        const r = await load(servers.get(on)!, durationS, SLICE_WARMUP_S);
        sums.get(on)!.rps += r.rps / 2;
        sums.get(on)!.p50.push(r.p50);
      }
    } finally {
      for (const server of servers.values()) await server.child.stop(5000);
    }
    const off = sums.get(false)!;
    const on = sums.get(true)!;
    offs.push(off.rps);
    ons.push(on.rps);
    ratios.push(on.rps / off.rps);
    // --decode keeps what it decoded: only the count is used here.
    receiver.spans.length = 0;
    console.log(
      `round ${i + 1}: off ${Math.round(off.rps)} req/s (p50 ${off.p50.join(", ")} ms), on ${Math.round(on.rps)} req/s (p50 ${on.p50.join(", ")} ms), on/off ${(on.rps / off.rps).toFixed(3)}`,
    );
  }
  // The on servers' last batches are flushed when they stop.
  await new Promise((r) => setTimeout(r, 200));
  if (receiver.requests.length === 0) throw new Error("tracing on exported no spans");
  await receiver.close();
  const ratio = median(ratios);
  console.log(
    `median: off ${Math.round(median(offs))} req/s, on ${Math.round(median(ons))} req/s, on/off ${ratio.toFixed(3)} (bar: >= 0.85) ${ratio >= 0.85 ? "PASS" : "FAIL"}`,
  );
  if (ratio < 0.85) process.exitCode = 1;
}

await main();
