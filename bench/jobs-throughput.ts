// Part 0 of the jobs suite (`npm run bench:jobs`): end-to-end job throughput. For each job store
// (SQLite, Redis) and each way of submitting (bulk: {"jobs": [...]} of BULK_ITEMS jobs, BULK_IN_FLIGHT
// requests at once; single: one POST per job at SINGLE_CONCURRENCY), a fresh `modelport serve`
// child runs churn-tree as "tree": N one-row jobs are submitted and the clock stops when the
// store counts all N final (GET /metrics, modelport_jobs). Beside it, BullMQ on the same Redis:
// N no-op jobs pushed with addBulk and processed by a Worker in this process (push -> process ->
// complete), the usual comparison for a job queue's own overhead.
import { randomUUID } from "node:crypto";
import http from "node:http";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { type Prediction, predictionsAgree } from "./load.js";
import { round } from "./stats.js";
import type { SuiteContext } from "./suite.js";
import { JSON_HEADERS } from "./workload.js";

/** One job body: one row of churn-tree. */
const ROW = [3, 95, 4, 1, 0, 20];
const BULK_ITEMS = 1000;
const BULK_IN_FLIGHT = 2;
const SINGLE_CONCURRENCY = 32;
const BULLMQ_CONCURRENCY = 32;
const REDIS_URL = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";

export interface ThroughputRun {
  store: "sqlite" | "redis";
  submission: "bulk" | "single";
  jobs: number;
  /** From the first request sent to the last one answered. */
  submitS: number;
  submitPerS: number;
  /** From the first request sent until the store counted every job final. */
  endToEndS: number;
  endToEndPerS: number;
  succeeded: number;
  failed: number;
  /** The last job's result equals what the synchronous predict route answers. */
  resultAgrees: boolean;
}

export interface BullmqRun {
  jobs: number;
  workerConcurrency: number;
  addS: number;
  addPerS: number;
  endToEndS: number;
  endToEndPerS: number;
}

export interface ThroughputResults {
  runs: ThroughputRun[];
  bullmq: BullmqRun;
  bars: { endToEndPerS: number; ofBullmq: number; bulkSubmitPerS: number };
}

export const BARS = { endToEndPerS: 4000, ofBullmq: 0.5, bulkSubmitPerS: 15_000 };

interface Deps {
  /** Starts a modelport child with this YAML (under `jobs:` the store and limits are set here). */
  start(
    label: string,
    jobs: Record<string, unknown>,
  ): Promise<{ url: string; stop(): Promise<void>; reference(): Promise<Prediction> }>;
  /** The job result's outputs as a Prediction. */
  resultPrediction(text: string): Prediction;
}

function post(agent: http.Agent, url: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: "POST", agent, headers: { ...JSON_HEADERS, "content-length": Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const FINAL = /^modelport_jobs\{status="(succeeded|failed|canceled)"\}\s+(\S+)/gm;

/** Jobs the store counts final, by status. */
async function finalCounts(url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const counts: Record<string, number> = { succeeded: 0, failed: 0, canceled: 0 };
  for (const m of text.matchAll(FINAL)) counts[m[1]!] = Number(m[2]);
  return counts;
}

/** Runs `n` tasks, `width` at a time. */
async function inParallel(n: number, width: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, n) }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

async function modelportRun(
  ctx: SuiteContext,
  deps: Deps,
  store: "sqlite" | "redis",
  submission: "bulk" | "single",
  jobs: number,
): Promise<ThroughputRun> {
  const prefix = `modelport-bench:${randomUUID()}:`;
  const server = await deps.start(`throughput-${store}-${submission}`, {
    ...(store === "redis" ? { store: "redis", redisUrl: REDIS_URL, redisPrefix: prefix } : {}),
    maxQueuedPerModel: jobs + 1000,
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  try {
    // What the synchronous predict route answers for ROW: the jobs' results must match it.
    const reference = await server.reference();
    const path = `${server.url}/v1/models/tree/jobs`;
    const one = JSON.stringify({ rows: [ROW] });
    let lastId = "";
    const t0 = performance.now();
    if (submission === "bulk") {
      const body = JSON.stringify({ jobs: Array.from({ length: BULK_ITEMS }, () => ({ rows: [ROW] })) });
      await inParallel(Math.ceil(jobs / BULK_ITEMS), BULK_IN_FLIGHT, async () => {
        const res = await post(agent, path, body);
        if (res.status !== 202)
          throw new Error(`bulk submission answered ${res.status}: ${res.text.slice(0, 300)}`);
        const answered = JSON.parse(res.text) as { jobs: { id: string }[] };
        lastId = answered.jobs[answered.jobs.length - 1]!.id;
      });
    } else {
      await inParallel(jobs, SINGLE_CONCURRENCY, async () => {
        const res = await post(agent, path, one);
        if (res.status !== 202)
          throw new Error(`submission answered ${res.status}: ${res.text.slice(0, 300)}`);
        lastId = (JSON.parse(res.text) as { id: string }).id;
      });
    }
    const t1 = performance.now();
    let counts = await finalCounts(server.url);
    const total = () => counts.succeeded! + counts.failed! + counts.canceled!;
    while (total() < jobs) {
      await new Promise((r) => setTimeout(r, 20));
      counts = await finalCounts(server.url);
    }
    const t2 = performance.now();
    const result = await fetch(`${server.url}/v1/jobs/${lastId}/result`);
    const resultAgrees =
      result.status === 200 && predictionsAgree(deps.resultPrediction(await result.text()), reference);
    const run: ThroughputRun = {
      store,
      submission,
      jobs,
      submitS: round((t1 - t0) / 1000),
      submitPerS: Math.round((jobs * 1000) / (t1 - t0)),
      endToEndS: round((t2 - t0) / 1000),
      endToEndPerS: Math.round((jobs * 1000) / (t2 - t0)),
      succeeded: counts.succeeded!,
      failed: counts.failed! + counts.canceled!,
      resultAgrees,
    };
    ctx.log(
      `  ${store} ${submission}: ${jobs} jobs submitted in ${run.submitS} s (${run.submitPerS}/s), all final after ` +
        `${run.endToEndS} s: ${run.endToEndPerS} jobs/s end to end; ${run.failed} failed; result agrees: ${resultAgrees}`,
    );
    return run;
  } finally {
    agent.destroy();
    await server.stop();
    if (store === "redis") await deletePrefix(prefix);
  }
}

async function deletePrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== "0");
  } finally {
    await redis.quit();
  }
}

/** BullMQ: `jobs` no-op jobs pushed with addBulk, processed by one Worker; push -> process -> complete. */
async function bullmqRun(ctx: SuiteContext, jobs: number): Promise<BullmqRun> {
  const u = new URL(REDIS_URL);
  const connection = { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null };
  const name = `bench-${randomUUID()}`;
  const prefix = "modelport-bench-bullmq";
  const queue = new Queue(name, { connection, prefix });
  let done = 0;
  let allDone: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    allDone = resolve;
  });
  const worker = new Worker(name, async () => undefined, {
    connection,
    prefix,
    concurrency: BULLMQ_CONCURRENCY,
    autorun: true,
  });
  worker.on("completed", () => {
    if (++done === jobs) allDone();
  });
  try {
    await worker.waitUntilReady();
    const t0 = performance.now();
    for (let i = 0; i < jobs; i += BULK_ITEMS) {
      const n = Math.min(BULK_ITEMS, jobs - i);
      await queue.addBulk(Array.from({ length: n }, (_, k) => ({ name: "noop", data: { i: i + k } })));
    }
    const t1 = performance.now();
    await finished;
    const t2 = performance.now();
    const run: BullmqRun = {
      jobs,
      workerConcurrency: BULLMQ_CONCURRENCY,
      addS: round((t1 - t0) / 1000),
      addPerS: Math.round((jobs * 1000) / (t1 - t0)),
      endToEndS: round((t2 - t0) / 1000),
      endToEndPerS: Math.round((jobs * 1000) / (t2 - t0)),
    };
    ctx.log(
      `  BullMQ: ${jobs} no-op jobs added in ${run.addS} s (${run.addPerS}/s), all completed after ${run.endToEndS} s: ` +
        `${run.endToEndPerS} jobs/s`,
    );
    return run;
  } finally {
    await worker.close();
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
  }
}

/** Every run of part 0; `jobs` per bulk run (single runs: a quarter). */
export async function runThroughput(ctx: SuiteContext, deps: Deps, jobs: number): Promise<ThroughputResults> {
  ctx.log(
    `part 0, end-to-end throughput: ${jobs} jobs per bulk run (${BULK_ITEMS} a request, ${BULK_IN_FLIGHT} at once), ` +
      `${Math.ceil(jobs / 4)} per single run (concurrency ${SINGLE_CONCURRENCY}); SQLite and Redis (${REDIS_URL}); ` +
      `BullMQ ${jobs} no-op jobs, worker concurrency ${BULLMQ_CONCURRENCY}`,
  );
  const runs: ThroughputRun[] = [];
  for (const store of ["sqlite", "redis"] as const) {
    runs.push(await modelportRun(ctx, deps, store, "bulk", jobs));
    runs.push(await modelportRun(ctx, deps, store, "single", Math.ceil(jobs / 4)));
  }
  const bullmq = await bullmqRun(ctx, jobs);
  return { runs, bullmq, bars: BARS };
}

/** The part's Markdown table and verdict lines. */
export function throughputMarkdown(r: ThroughputResults): string {
  const lines = [
    "| store | submission | jobs | submitted/s | end to end, jobs/s | × BullMQ | failed | result agrees |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...r.runs.map(
      (x) =>
        `| ${x.store} | ${x.submission} | ${x.jobs} | ${x.submitPerS} | ${x.endToEndPerS} | ${round(x.endToEndPerS / r.bullmq.endToEndPerS)} | ${x.failed} | ${x.resultAgrees ? "yes" : "no"} |`,
    ),
    `| BullMQ 6.7.0 (no-op, same Redis) | addBulk | ${r.bullmq.jobs} | ${r.bullmq.addPerS} | ${r.bullmq.endToEndPerS} | 1 | 0 | – |`,
  ];
  const bulk = r.runs.filter((x) => x.submission === "bulk");
  const verdict = (ok: boolean) => (ok ? "met" : "not met");
  lines.push(
    "",
    `- End to end ≥ ${r.bars.endToEndPerS} jobs/s with SQLite and with Redis (bulk): ${verdict(bulk.every((x) => x.endToEndPerS >= r.bars.endToEndPerS))} (${bulk.map((x) => `${x.store} ${x.endToEndPerS}`).join(", ")}).`,
    `- ≥ ${r.bars.ofBullmq}× BullMQ end to end: ${verdict(bulk.every((x) => x.endToEndPerS >= r.bars.ofBullmq * r.bullmq.endToEndPerS))} (${bulk.map((x) => `${x.store} ${round(x.endToEndPerS / r.bullmq.endToEndPerS)}×`).join(", ")}).`,
    `- Bulk submission ≥ ${r.bars.bulkSubmitPerS} jobs/s: ${verdict(bulk.every((x) => x.submitPerS >= r.bars.bulkSubmitPerS))} (${bulk.map((x) => `${x.store} ${x.submitPerS}`).join(", ")}).`,
  );
  return lines.join("\n");
}
