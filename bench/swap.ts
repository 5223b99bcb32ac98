// `npm run bench:swap`: what a model swap and a cold start cost. One `modelport serve -c FILE`
// with a repository: MODEL (default wide-mlp, inference-bound) as version 1, and every example
// model as a lazy model with idleUnloadMs 1000.
// 1. Swap under load: CONCURRENCY clients send MODEL's golden example (OIP infer) one after
//    another for DURATION seconds (after a 3 s warm-up with the same clients); a third of the way
//    in, version 2 (the same file) is written and `POST /v2/repository/models/NAME/load` loads,
//    checks and swaps it in. Per phase (before the load call, from the call to 1 s after its
//    answer, after): requests, failed answers, p50, p99; the bar: p99 during the swap ≤ 2× the
//    p99 before it, 0 failed.
// 2. Cold starts: each example model is called after it unloaded, ROUNDS times: the first call's
//    latency and its X-Modelport-Cold-Start-Ms, against a warm call.
// Not a test: numbers for docs/PERFORMANCE.md.
// Usage: node dist/bench/swap.js [--model NAME] [--concurrency N] [--duration S] [--rounds N]
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { buildModels } from "../examples/build-models.js";
import { machine } from "./report.js";
import { startModelportWithConfig } from "./servers.js";
import { round, Samples } from "./stats.js";

const KEY = "bench-admin-key-0123456789";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: "wide-mlp" },
    concurrency: { type: "string", default: "64" },
    duration: { type: "string", default: "12" },
    rounds: { type: "string", default: "3" },
  },
});
const modelName = values.model!;
const concurrency = Number(values.concurrency);
const durationMs = Number(values.duration) * 1000;
const rounds = Number(values.rounds);

/** p50 and p99 of some latencies, ms. */
function quantiles(ms: readonly number[]): [number, number] {
  const s = new Samples();
  for (const x of ms) s.add(x);
  const [p50, p99] = s.percentiles([50, 99]);
  return [round(p50!), round(p99!)];
}

interface Golden {
  inputs: Record<string, { datatype?: string; shape: number[]; data: unknown[] }>;
}

/** Each example model: its file (or folder) and how a call to it looks. */
const EXAMPLES = [
  { name: "churn-tree", file: "churn-tree.onnx" },
  { name: "wide-mlp", file: "wide-mlp.onnx" },
  { name: "segment-mlp", file: "segment-mlp.onnx" },
  { name: "multi-io", file: "multi-io.onnx" },
  { name: "tiny-embed", file: "tiny-embed" },
  { name: "tiny-llama", file: "tiny-llama.gguf" },
] as const;

const dir = mkdtempSync(path.join(tmpdir(), "modelport-bench-swap-"));
const models = path.join(dir, "models");
await buildModels(models);
const repo = path.join(dir, "repo");

/** Copies an example model into repo/NAME/VERSION (a folder model's golden file goes inside). */
function put(name: string, file: string, version: string): void {
  const folder = path.join(repo, name, version);
  mkdirSync(folder, { recursive: true });
  const stem = file.replace(/\.(onnx|gguf)$/, "");
  const ext = path.extname(file);
  if (ext === "") {
    cpSync(path.join(models, file), folder, { recursive: true });
    copyFileSync(path.join(models, `${stem}.golden.json`), path.join(folder, "golden.json"));
  } else {
    copyFileSync(path.join(models, file), path.join(folder, `model${ext}`));
    copyFileSync(path.join(models, `${stem}.golden.json`), path.join(folder, "model.golden.json"));
  }
}

const swapped = EXAMPLES.find((e) => e.name === modelName);
if (!swapped?.file.endsWith(".onnx")) throw new Error("--model must be an example ONNX model");
put("swap", swapped.file, "1");
for (const e of EXAMPLES) {
  put(`cold-${e.name}`, e.file, "1");
  writeFileSync(path.join(repo, `cold-${e.name}`, "model.yaml"), "load: lazy\nidleUnloadMs: 1000\n");
}
const configFile = path.join(dir, "modelport.yaml");
writeFileSync(configFile, `repository: { dir: repo }\nserver: { adminKeys: ["${KEY}"] }\n`);

const oipBody = (name: string) => {
  const golden = JSON.parse(readFileSync(path.join(models, `${name}.golden.json`), "utf8")) as Golden;
  return JSON.stringify({
    inputs: Object.entries(golden.inputs).map(([input, t]) => ({
      name: input,
      datatype: t.datatype ?? "FP32",
      shape: t.shape,
      data: t.data,
    })),
  });
};

/** The request that exercises `example` as model `as`. */
function requestFor(example: string, as: string): { path: string; body: string } {
  if (example === "tiny-embed")
    return { path: "/v1/embeddings", body: JSON.stringify({ model: as, input: "hello" }) };
  if (example === "tiny-llama")
    return { path: "/v1/completions", body: JSON.stringify({ model: as, prompt: "the", max_tokens: 1 }) };
  return { path: `/v2/models/${as}/infer`, body: oipBody(example) };
}

const server = await startModelportWithConfig({
  name: "modelport",
  configFile,
  shownConfigFile: "<tmp>/modelport.yaml",
  modelName: "swap",
  logLevel: "warn",
});

async function call(req: {
  path: string;
  body: string;
}): Promise<{ ms: number; ok: boolean; cold: string | null }> {
  const started = performance.now();
  try {
    const res = await fetch(`${server.url}${req.path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: req.body,
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
  const req = requestFor(modelName, "swap");
  const warmUntil = performance.now() + 3000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < warmUntil) await call(req);
    }),
  );
  const samples: { at: number; ms: number; ok: boolean }[] = [];
  const t0 = performance.now();
  let swapStart = Number.POSITIVE_INFINITY;
  let swapEnd = Number.POSITIVE_INFINITY;
  let swapStatus = 0;
  const clients = Array.from({ length: concurrency }, async () => {
    while (performance.now() - t0 < durationMs) {
      const at = performance.now();
      const r = await call(req);
      samples.push({ at, ms: r.ms, ok: r.ok });
    }
  });
  const swap = (async () => {
    await new Promise((r) => setTimeout(r, durationMs / 3));
    put("swap", swapped.file, "2");
    swapStart = performance.now();
    const res = await fetch(`${server.url}/v2/repository/models/swap/load`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}` },
    });
    swapStatus = res.status;
    swapEnd = performance.now();
  })();
  await Promise.all([...clients, swap]);
  const phase = (name: string, pick: (s: { at: number }) => boolean) => {
    const chosen = samples.filter(pick);
    const [p50, p99] = quantiles(chosen.map((s) => s.ms));
    return { phase: name, requests: chosen.length, failed: chosen.filter((s) => !s.ok).length, p50, p99 };
  };
  const after = swapEnd + 1000;
  const before = phase("before the load call", (s) => s.at < swapStart);
  const during = phase("load call until 1 s after its answer", (s) => s.at >= swapStart && s.at < after);
  const later = phase("after", (s) => s.at >= after);
  const failed = before.failed + during.failed + later.failed;
  const holds = failed === 0 && swapStatus === 200 && during.p99 <= 2 * before.p99;

  const cold: { name: string; cold: number[]; total: number[]; warm: number }[] = [];
  for (const e of EXAMPLES) {
    const r = requestFor(e.name, `cold-${e.name}`);
    const row = { name: e.name, cold: [] as number[], total: [] as number[], warm: 0 };
    const warm: number[] = [];
    for (let i = 0; i < rounds; i++) {
      // Idle for 1 s, swept every second: unloaded by then.
      await new Promise((res) => setTimeout(res, 2600));
      const first = await call(r);
      if (!first.ok || first.cold === null) throw new Error(`${e.name}: the first call was not a cold start`);
      row.cold.push(Number(first.cold));
      row.total.push(round(first.ms));
      for (let j = 0; j < 5; j++) warm.push((await call(r)).ms);
    }
    row.warm = quantiles(warm)[0];
    cold.push(row);
  }

  const m = machine();
  console.log(
    `\n## Swap under load (${modelName}, concurrency ${concurrency}, ${durationMs / 1000} s, version 1 → 2)\n`,
  );
  console.log(
    `load call: ${swapStatus}, ${round(swapEnd - swapStart)} ms (load + sha256 + golden check + swap)\n`,
  );
  console.log("| phase | requests | failed | p50 ms | p99 ms |\n|---|--:|--:|--:|--:|");
  for (const p of [before, during, later])
    console.log(`| ${p.phase} | ${p.requests} | ${p.failed} | ${p.p50} | ${p.p99} |`);
  console.log(
    `\n**Bar (p99 during the swap ≤ 2× before it, 0 failed): ${holds ? "HOLDS" : "MISSED"}** (${round(during.p99 / before.p99)}×, ${failed} failed)`,
  );
  console.log(`\n## Cold starts from the repository (${rounds} rounds each, after idleUnloadMs)\n`);
  console.log("| model | X-Modelport-Cold-Start-Ms | first call ms | warm call p50 ms |\n|---|---|---|--:|");
  for (const c of cold)
    console.log(`| ${c.name} | ${c.cold.join(", ")} | ${c.total.join(", ")} | ${c.warm} |`);
  console.log(
    `\n${m.cpuModel}, ${m.cpus} cores, ${m.totalMemoryGiB} GiB, Node ${m.node}, ${new Date().toISOString()}`,
  );
  console.log(
    `Command: \`node dist/bench/swap.js --model ${modelName} --concurrency ${concurrency} --duration ${durationMs / 1000} --rounds ${rounds}\``,
  );
} finally {
  await server.child.stop(5000);
}
