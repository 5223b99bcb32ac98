// `npm run bench:batch-interactive`: what a running batch costs interactive chat requests. One
// in-process server with tiny-llama (2 sequences, so batch jobs generate on at most one). First
// 30 sequential streamed chat requests on the idle server; then a batch of N chat lines (the same
// shape) is created and 30 more are timed while it runs. Reported: each phase's time to first
// token (the first chunk with text; the bar: p50 beside the batch ≤ 1.5× idle) and whole latency
// (p50, max), the batch's status and counts when the interactive phase ended (it
// must still have been running for the comparison to mean anything), how long the batch took,
// and the event loop's delay over the batch. Not a test: numbers for docs/Batch.md.
// Usage: node dist/bench/batch-interactive.js [--lines N]
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { testModels } from "../test/helpers/models.js";
import { startInProcess } from "../test/helpers/server.js";
import { machine } from "./report.js";

const { values } = parseArgs({ options: { lines: { type: "string", default: "200" } } });
const LINES = Number(values.lines);
const ROUNDS = 30;
const FINAL = ["completed", "failed", "cancelled", "expired"];

const body = (i: number) => ({
  model: "tiny-llama",
  messages: [{ role: "user", content: `question ${i}` }],
  max_tokens: 32,
  temperature: 0,
});

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return {
    n: s.length,
    p50Ms: Math.round(s[Math.floor(s.length / 2)]! * 10) / 10,
    maxMs: Math.round(s.at(-1)! * 10) / 10,
  };
};

const models = await testModels();
const dir = mkdtempSync(path.join(tmpdir(), "modelport-bench-batch-interactive-"));
const file = path.join(dir, "modelport.yaml");
writeFileSync(
  file,
  [
    "jobs:",
    `  sqlitePath: ${path.join(dir, "jobs.db")}`,
    `  blobs: {backend: fs, dir: ${path.join(dir, "blobs")}}`,
    "models:",
    `  - {name: tiny-llama, backend: llama-cpp, path: ${path.join(models, "tiny-llama.gguf")}, llm: {sequences: 2, contextSize: 512}}`,
    "",
  ].join("\n"),
);
const server = await startInProcess({ file, env: {} });
const url = server.url;

/** One streamed chat request: ms to the first chunk with text, and to the end. */
async function chat(i: number): Promise<{ ttft: number; total: number }> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body(i), stream: true }),
  });
  const decoder = new TextDecoder();
  let ttft = Number.NaN;
  for await (const chunk of res.body!) {
    if (Number.isNaN(ttft) && /"content":"[^"]/.test(decoder.decode(chunk as Uint8Array, { stream: true })))
      ttft = performance.now() - started;
  }
  return { ttft, total: performance.now() - started };
}

interface BatchView {
  status: string;
  request_counts: { total: number; completed: number; failed: number };
}
const getBatch = async (id: string) => (await (await fetch(`${url}/v1/batches/${id}`)).json()) as BatchView;

for (let i = 0; i < 5; i++) await chat(10_000 + i);
const idle: { ttft: number; total: number }[] = [];
for (let i = 0; i < ROUNDS; i++) idle.push(await chat(i));

const jsonl = Array.from({ length: LINES }, (_, i) =>
  JSON.stringify({ custom_id: `c${i}`, method: "POST", url: "/v1/chat/completions", body: body(5000 + i) }),
).join("\n");
const form = new FormData();
form.append("purpose", "batch");
form.append("file", new Blob([jsonl]), "bench.jsonl");
const uploaded = (await (await fetch(`${url}/v1/files`, { method: "POST", body: form })).json()) as {
  id: string;
};
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
const started = performance.now();
const created = (await (
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
const during: { ttft: number; total: number }[] = [];
for (let i = 0; i < ROUNDS; i++) during.push(await chat(100 + i));
const then = await getBatch(created.id);
let ended = then;
while (!FINAL.includes(ended.status)) {
  await new Promise((r) => setTimeout(r, 100));
  ended = await getBatch(created.id);
}
const batchSeconds = (performance.now() - started) / 1000;
delay.disable();
await server.close();
console.log(
  JSON.stringify(
    {
      machine: machine(),
      ttftIdle: stats(idle.map((x) => x.ttft)),
      ttftDuringBatch: stats(during.map((x) => x.ttft)),
      ttftP50Ratio:
        Math.round((stats(during.map((x) => x.ttft)).p50Ms / stats(idle.map((x) => x.ttft)).p50Ms) * 100) /
        100,
      latencyIdle: stats(idle.map((x) => x.total)),
      latencyDuringBatch: stats(during.map((x) => x.total)),
      batchWhenInteractiveEnded: { status: then.status, counts: then.request_counts },
      batch: {
        lines: LINES,
        status: ended.status,
        counts: ended.request_counts,
        seconds: Math.round(batchSeconds * 100) / 100,
      },
      eventLoopDelayMs: {
        p50: Math.round(delay.percentile(50) / 1e5) / 10,
        p99: Math.round(delay.percentile(99) / 1e5) / 10,
        max: Math.round(delay.max / 1e5) / 10,
      },
    },
    null,
    2,
  ),
);
