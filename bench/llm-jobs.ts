// `npm run bench:llm-jobs`: what language-model jobs cost interactive clients. One `modelport
// serve` with tiny-llama (2 sequences, so llm.jobConcurrency defaults to 1). An interactive client
// streams chat requests one after another and times the first streamed chunk (TTFT): first alone,
// then for as long as JOBS chat jobs (submitted at once) run on the same model. A job asks for its sequence
// as background work, so a waiting interactive request is served first and, with at most
// sequences − 1 jobs generating, always finds a sequence as soon as one ends. Medians over the
// interactive requests of each phase. The bar: p50 TTFT with jobs ≤ 1.5× without.
// Not a test: numbers for docs/PERFORMANCE.md.
// Usage: node dist/bench/llm-jobs.js [--jobs N] [--rounds N] [--job-tokens N] [--job-concurrency N]
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { buildTinyLlama, writeLlamaArtifact } from "../examples/build/models/tiny-llama.js";
import { machine } from "./report.js";
import { startModelportWithConfig } from "./servers.js";
import { round, Samples } from "./stats.js";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "200" },
    rounds: { type: "string", default: "40" },
    "job-tokens": { type: "string", default: "128" },
    // Default: the model's own (max(1, sequences − 1) = 1); 2 shows what an uncapped model does.
    "job-concurrency": { type: "string" },
  },
});
const jobConcurrency = values["job-concurrency"];
const jobs = Number(values.jobs);
const rounds = Number(values.rounds);
const jobTokens = Number(values["job-tokens"]);
const MODEL = "tiny-llama";

/** Milliseconds to the first streamed chunk with text, of one interactive chat. */
async function ttft(url: string, i: number): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: `the cat ${i % 7} and the dog` }],
      max_tokens: 16,
      stream: true,
    }),
  });
  if (res.status !== 200) throw new Error(`interactive request: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  let first = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!first && Buffer.from(value).toString("utf8").includes('"content":"')) first = performance.now();
  }
  return first - started;
}

async function counts(url: string): Promise<{ succeeded: number; queued: number }> {
  const res = await fetch(`${url}/v1/jobs?model=${MODEL}&status=succeeded&limit=1000`);
  const body = (await res.json()) as { jobs: unknown[] };
  const queued = (await (await fetch(`${url}/v1/jobs?model=${MODEL}&status=queued&limit=1000`)).json()) as {
    jobs: unknown[];
  };
  return { succeeded: body.jobs.length, queued: queued.jobs.length };
}

async function main(): Promise<void> {
  const dir = path.join(tmpdir(), "modelport-bench-llm-jobs");
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, "tiny-llama.gguf");
  if (!existsSync(file)) await writeLlamaArtifact(dir, buildTinyLlama());
  const configFile = path.join(dir, "llm-jobs.yaml");
  writeFileSync(
    configFile,
    [
      "server: {allowOversubscription: true}",
      "jobs:",
      `  sqlitePath: ${path.join(dir, `jobs-${process.pid}.db`)}`,
      `  maxQueuedPerModel: ${Math.max(1000, jobs)}`,
      "models:",
      `  - {name: ${MODEL}, path: ${file}, llm: {sequences: 2, contextSize: 2048, maxWaiting: 64${jobConcurrency ? `, jobConcurrency: ${jobConcurrency}` : ""}}}`,
      "",
    ].join("\n"),
  );
  const server = await startModelportWithConfig({
    name: "modelport",
    configFile,
    shownConfigFile: "<tmp>/llm-jobs.yaml",
    modelName: MODEL,
    logLevel: "warn",
  });
  try {
    const url = server.url;
    for (let i = 0; i < 3; i++) await ttft(url, i); // warm-up
    const alone = new Samples();
    for (let i = 0; i < rounds; i++) alone.add(await ttft(url, i));

    const submitted = performance.now();
    await Promise.all(
      Array.from({ length: jobs }, async (_, i) => {
        const res = await fetch(`${url}/v1/models/${MODEL}/jobs`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            endpoint: "/v1/chat/completions",
            body: {
              messages: [{ role: "user", content: `job ${i}: the model will serve a request` }],
              max_tokens: jobTokens,
            },
          }),
        });
        if (res.status !== 202) throw new Error(`job submit: ${res.status} ${await res.text()}`);
      }),
    );
    // Interactive requests, one after another, for as long as jobs are still waiting or running.
    const withJobs = new Samples();
    let during = await counts(url);
    for (let i = 0; during.succeeded < jobs && i < 10 * rounds; i++) {
      withJobs.add(await ttft(url, i));
      during = await counts(url);
    }
    const busy = withJobs.count;
    // Then the rest of the jobs finish.
    while ((await counts(url)).succeeded < jobs) await new Promise((r) => setTimeout(r, 200));
    const jobsSeconds = (performance.now() - submitted) / 1000;
    const p50Alone = alone.percentiles([50])[0]!;
    const p50Jobs = withJobs.percentiles([50])[0]!;
    for (const [phase, s] of [
      ["alone", alone],
      ["with jobs", withJobs],
    ] as const) {
      const [p50, p90] = s.percentiles([50, 90]);
      console.log(
        JSON.stringify({ phase, requests: s.count, ttftP50Ms: round(p50!), ttftP90Ms: round(p90!) }),
      );
    }
    console.log(
      JSON.stringify({
        jobs,
        jobTokens,
        interactiveWhileJobsRan: busy,
        jobConcurrency: jobConcurrency ? Number(jobConcurrency) : "default (1)",
        jobsSeconds: round(jobsSeconds),
        withJobsOverAlone: round(p50Jobs / p50Alone),
        bar: 1.5,
        date: new Date().toISOString(),
        machine: machine(),
        command: server.command,
      }),
    );
  } finally {
    await server.child.stop(2000);
  }
}

await main();
