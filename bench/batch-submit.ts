// `npm run bench:batch-submit`: what submitting a 1,000-line batch costs the event loop. One
// in-process server (SQLite job store) whose model never becomes ready (its checksum does not
// match), so its jobs stay queued and only the submission is measured. For each
// jobs.batches.submitChunk, a fresh server takes a 1,000-line chat batch; from POST /v1/batches
// until every line is a job: the time, the event loop's delay (monitorEventLoopDelay: max, p99),
// and the round trip of GET /livez sent every 10 ms meanwhile (max, p99): what an interactive
// request waits while a batch is submitted. Not a test: numbers for docs/PERFORMANCE.md.
// Usage: node dist/bench/batch-submit.js [--lines N]
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { pino } from "pino";
import { buildModels } from "../examples/build-models.js";
import { SqliteBatchStore } from "../src/batches/sqlite-batch-store.js";
import { loadConfig } from "../src/config/load.js";
import { buildApp } from "../src/server/app.js";
import { machine } from "./report.js";

const { values } = parseArgs({ options: { lines: { type: "string", default: "1000" } } });
const LINES = Number(values.lines);

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
};
const r1 = (x: number) => Math.round(x * 10) / 10;

async function once(models: string, chunk: number) {
  const dir = mkdtempSync(path.join(tmpdir(), "modelport-bench-batches-"));
  const file = path.join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "jobs:",
      `  sqlitePath: ${path.join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${path.join(dir, "blobs")}}`,
      `  batches: {submitChunk: ${chunk}, checkMs: 60000}`,
      "models:",
      `  - {name: stuck-llama, backend: llama-cpp, path: ${path.join(models, "tiny-llama.gguf")}, sha256: "${"0".repeat(64)}"}`,
      "",
    ].join("\n"),
  );
  const app = buildApp(loadConfig({ file, env: {}, flags: { port: 0 } }), {
    logger: pino({ level: "silent" }),
  });
  const url = await app.app.listen({ host: "127.0.0.1", port: 0 });
  await app.loadModels();
  const jsonl = Array.from({ length: LINES }, (_, i) =>
    JSON.stringify({
      custom_id: `r-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "stuck-llama", messages: [{ role: "user", content: `question ${i}` }], max_tokens: 8 },
    }),
  ).join("\n");
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([jsonl]), "bench.jsonl");
  const uploaded = (await (await fetch(`${url}/v1/files`, { method: "POST", body: form })).json()) as {
    id: string;
  };
  const store = new SqliteBatchStore(path.join(dir, "jobs.db"));
  const delay = monitorEventLoopDelay({ resolution: 1 });
  const probes: number[] = [];
  let probing = true;
  const probe = (async () => {
    while (probing) {
      const t = performance.now();
      await (await fetch(`${url}/livez`)).arrayBuffer();
      probes.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  delay.enable();
  const started = performance.now();
  const batch = (await (
    await fetch(`${url}/v1/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        input_file_id: uploaded.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
      }),
    })
  ).json()) as { id: string };
  const createMs = performance.now() - started;
  while ((await store.requests(batch.id)).length < LINES) await new Promise((r) => setTimeout(r, 5));
  const submitMs = performance.now() - started;
  delay.disable();
  probing = false;
  await probe;
  await store.close();
  await app.close();
  return {
    submitChunk: chunk,
    createMs: r1(createMs),
    allSubmittedMs: r1(submitMs),
    loopDelayMaxMs: r1(delay.max / 1e6),
    loopDelayP99Ms: r1(delay.percentile(99) / 1e6),
    livezMaxMs: r1(Math.max(...probes)),
    livezP99Ms: r1(quantile(probes, 0.99)),
    livezProbes: probes.length,
  };
}

const models = mkdtempSync(path.join(tmpdir(), "modelport-bench-models-"));
await buildModels(models);
const rows = [];
for (const chunk of [10, 20, 100, LINES]) rows.push(await once(models, chunk));
console.log(JSON.stringify({ machine: machine(), lines: LINES, rows }, null, 2));
