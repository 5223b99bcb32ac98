// `npm run bench:swap`: what a model swap and a cold start cost the requests around them. One
// `modelport serve -c FILE` with a repository holding churn-tree as version 1; CONCURRENCY clients
// send single-row predicts one after another for DURATION seconds; a third of the way in, version 2
// (the same file) is written and `POST /v2/repository/models/churn/load` loads, checks and swaps it
// in. Reported per phase (before the load call, from the call to 1 s after its answer, after):
// requests, failed answers, p50 and p99. Then a lazy model with idleUnloadMs 1000 is called after
// it unloaded, ROUNDS times: the cold call's latency and X-Modelport-Cold-Start-Ms against warm
// calls. Not a test: numbers for docs/PERFORMANCE.md.
// Usage: node dist/bench/swap.js [--concurrency N] [--duration S] [--rounds N]
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { buildModels } from "../examples/build-models.js";
import { machine } from "./report.js";
import { startModelportWithConfig } from "./servers.js";
import { round, Samples } from "./stats.js";

/** p50 and p99 of some latencies, ms. */
function quantiles(ms: readonly number[]): [number, number] {
  const s = new Samples();
  for (const x of ms) s.add(x);
  const [p50, p99] = s.percentiles([50, 99]);
  return [round(p50!), round(p99!)];
}

const KEY = "bench-admin-key-0123456789";

const { values } = parseArgs({
  options: {
    concurrency: { type: "string", default: "16" },
    duration: { type: "string", default: "12" },
    rounds: { type: "string", default: "5" },
  },
});
const concurrency = Number(values.concurrency);
const durationMs = Number(values.duration) * 1000;
const rounds = Number(values.rounds);

const dir = mkdtempSync(path.join(tmpdir(), "modelport-bench-swap-"));
const models = path.join(dir, "models");
await buildModels(models);
const repo = path.join(dir, "repo");
const version = (name: string, v: string) => {
  const folder = path.join(repo, name, v);
  mkdirSync(folder, { recursive: true });
  copyFileSync(path.join(models, "churn-tree.onnx"), path.join(folder, "model.onnx"));
  copyFileSync(path.join(models, "churn-tree.golden.json"), path.join(folder, "model.golden.json"));
};
version("churn", "1");
version("lazy", "1");
writeFileSync(path.join(repo, "lazy", "model.yaml"), "load: lazy\nidleUnloadMs: 1000\n");
const configFile = path.join(dir, "modelport.yaml");
writeFileSync(configFile, `repository: { dir: repo }\nserver: { adminKeys: ["${KEY}"] }\n`);
const golden = JSON.parse(readFileSync(path.join(models, "churn-tree.golden.json"), "utf8"));
const row = (golden.inputs.features.data as number[]).slice(0, golden.inputs.features.shape[1]);
const body = JSON.stringify({ rows: [row] });

const server = await startModelportWithConfig({
  name: "modelport",
  configFile,
  shownConfigFile: "<tmp>/modelport.yaml",
  modelName: "churn",
  logLevel: "warn",
});

interface Sample {
  at: number;
  ms: number;
  ok: boolean;
}

async function call(model: string): Promise<{ ms: number; ok: boolean; cold: string | null }> {
  const started = performance.now();
  try {
    const res = await fetch(`${server.url}/v1/models/${model}/predict`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    await res.arrayBuffer();
    return {
      ms: performance.now() - started,
      ok: res.status === 200,
      cold: res.headers.get("x-modelport-cold-start-ms"),
    };
  } catch {
    return { ms: performance.now() - started, ok: false, cold: null };
  }
}

try {
  // Warm-up: the same clients for 3 s, so the phases compare a warm server with itself.
  const warmUntil = performance.now() + 3000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < warmUntil) await call("churn");
    }),
  );
  const samples: Sample[] = [];
  const t0 = performance.now();
  let swapStart = 0;
  let swapEnd = 0;
  let swapMs = 0;
  let swapStatus = 0;
  const clients = Array.from({ length: concurrency }, async () => {
    while (performance.now() - t0 < durationMs) {
      const at = performance.now();
      const r = await call("churn");
      samples.push({ at, ms: r.ms, ok: r.ok });
    }
  });
  const swap = (async () => {
    await new Promise((r) => setTimeout(r, durationMs / 3));
    version("churn", "2");
    swapStart = performance.now();
    const res = await fetch(`${server.url}/v2/repository/models/churn/load`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: "{}",
    });
    swapStatus = res.status;
    swapEnd = performance.now();
    swapMs = swapEnd - swapStart;
  })();
  await Promise.all([...clients, swap]);
  const phase = (name: string, pick: (s: Sample) => boolean) => {
    const chosen = samples.filter(pick);
    const [p50, p99] = quantiles(chosen.map((s) => s.ms));
    return { phase: name, requests: chosen.length, failed: chosen.filter((s) => !s.ok).length, p50, p99 };
  };
  const after = swapEnd + 1000;
  const phases = [
    phase("before the load call", (s) => s.at < swapStart),
    phase("load call until 1 s after its answer", (s) => s.at >= swapStart && s.at < after),
    phase("after", (s) => s.at >= after),
  ];
  const index = await (
    await fetch(`${server.url}/v2/repository/index`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}` },
    })
  ).json();

  // Cold starts of the lazy model: wait for its idle unload (1 s, swept every second) each round.
  const cold: { ms: number; header: number }[] = [];
  const warm: number[] = [];
  for (let r = 0; r < rounds; r++) {
    await new Promise((res) => setTimeout(res, 2600));
    const first = await call("lazy");
    if (!first.ok || first.cold === null)
      throw new Error(`round ${r}: the lazy model's first call was not a cold start`);
    cold.push({ ms: first.ms, header: Number(first.cold) });
    for (let i = 0; i < 20; i++) warm.push((await call("lazy")).ms);
  }

  console.log(
    `\n## Swap under load (concurrency ${concurrency}, ${durationMs / 1000} s, churn-tree 1 → 2)\n`,
  );
  console.log(`load call: ${swapStatus}, ${round(swapMs)} ms (load + sha256 + golden check + swap)`);
  console.log("\n| phase | requests | failed | p50 ms | p99 ms |\n|---|--:|--:|--:|--:|");
  for (const p of phases) console.log(`| ${p.phase} | ${p.requests} | ${p.failed} | ${p.p50} | ${p.p99} |`);
  console.log(`\nrepository index after: ${JSON.stringify(index)}`);
  console.log(`\n## Cold starts (lazy churn-tree, ${rounds} rounds)\n`);
  console.log(
    `cold call p50 ${quantiles(cold.map((c) => c.ms))[0]} ms (each: ${cold.map((c) => round(c.ms)).join(", ")}); X-Modelport-Cold-Start-Ms ${cold.map((c) => c.header).join(", ")}; warm call p50 ${quantiles(warm)[0]} ms`,
  );
  const m = machine();
  console.log(
    `\n${m.cpuModel}, ${m.cpus} cores, ${m.totalMemoryGiB} GiB, Node ${m.node}, ${new Date().toISOString()}`,
  );
  console.log("Command: `npm run bench:swap`");
} finally {
  await server.child.stop(5000);
}
