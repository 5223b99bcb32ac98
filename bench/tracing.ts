// The cost of tracing (`npm run bench:tracing`): single-row requests at concurrency 64 on the
// overhead suite's small MLP (`modelport serve <models>/overhead-mlp.onnx`, default settings),
// with tracing off and with tracing on at 100% sampling (OTEL_TRACES_SAMPLER=always_on) exporting
// over OTLP/HTTP protobuf to a receiver in this process (test/helpers/otlp-receiver.ts) that only
// acknowledges, as a collector on another machine would (--decode makes it decode every span, so
// the collector's work lands on these cores too and is measured with the server). Rounds alternate which goes
// first; each point is a fresh server, warmed up, then measured with the shared autocannon load
// generator. The bar (docs/PERFORMANCE.md): on >= 85% of off (median of the per-round ratios).
//
//   node dist/bench/tracing.js [--rounds N] [--duration S] [--warmup S] [--decode]
import { mkdtempSync } from "node:fs";
import { availableParallelism, cpus, tmpdir } from "node:os";
import path from "node:path";
import { runLoad } from "../src/loadgen/load.js";
import { startOtlpReceiver } from "../test/helpers/otlp-receiver.js";
import { writeOverheadModel } from "./overhead-models.js";
import { startModelport } from "./servers.js";
import { median, round } from "./stats.js";
import type { Workload } from "./workload.js";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const rounds = arg("rounds", 3);
// (--decode is read in main.)
const durationS = arg("duration", 10);
const warmupS = arg("warmup", 3);
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

  const point = async (on: boolean): Promise<{ rps: number; p50: number }> => {
    // The child inherits this process's environment.
    if (on) {
      process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
      process.env.OTEL_TRACES_SAMPLER = "always_on";
      process.env.OTEL_SERVICE_NAME = "bench";
    } else for (const k of TRACING_ENV) delete process.env[k];
    const server = await startModelport(dir, "warn", workload, { name: on ? "tracing-on" : "tracing-off" });
    const before = receiver.requests.length;
    let result: { rps: number; p50: number };
    try {
      const r = await runLoad(
        {
          url: `${server.url}/v1/models/overhead-mlp/predict`,
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        },
        { concurrency: CONCURRENCY, durationS, warmupS, timeoutS: 30 },
      );
      if (r.non2xx + r.errors + r.timeouts > 0)
        throw new Error(`${server.name}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
      result = { rps: r.rps, p50: round(r.latencyMs.p50 ?? Number.NaN) };
    } finally {
      await server.child.stop(5000);
    }
    // The exports the server made (its last batch is flushed on shutdown).
    await new Promise((r) => setTimeout(r, 200));
    const exports = receiver.requests.length - before;
    receiver.spans.length = 0;
    if (on && exports === 0) throw new Error("tracing on exported no spans");
    if (!on && exports > 0) throw new Error(`tracing off made ${exports} exports`);
    return result;
  };

  const ratios: number[] = [];
  const offs: number[] = [];
  const ons: number[] = [];
  console.log(
    `bench:tracing: overhead-mlp, 1 row, concurrency ${CONCURRENCY}, ${durationS} s (+${warmupS} s warm-up), ${rounds} rounds, ${availableParallelism()} cores (${cpus()[0]?.model ?? "?"}), node ${process.version}, receiver ${decode ? "decoding every span" : "not decoding"}`,
  );
  for (let i = 0; i < rounds; i++) {
    const order = i % 2 === 0 ? [false, true] : [true, false];
    const got = new Map<boolean, { rps: number; p50: number }>();
    for (const on of order) got.set(on, await point(on));
    const off = got.get(false)!;
    const on = got.get(true)!;
    offs.push(off.rps);
    ons.push(on.rps);
    ratios.push(on.rps / off.rps);
    console.log(
      `round ${i + 1}: off ${Math.round(off.rps)} req/s (p50 ${off.p50} ms), on ${Math.round(on.rps)} req/s (p50 ${on.p50} ms), on/off ${(on.rps / off.rps).toFixed(3)}`,
    );
  }
  await receiver.close();
  const ratio = median(ratios);
  console.log(
    `median: off ${Math.round(median(offs))} req/s, on ${Math.round(median(ons))} req/s, on/off ${ratio.toFixed(3)} (bar: >= 0.85) ${ratio >= 0.85 ? "PASS" : "FAIL"}`,
  );
  if (ratio < 0.85) process.exitCode = 1;
}

await main();
