// The jobs suite (`npm run bench:jobs`): the jobs API of a real `modelport serve -c FILE` child
// process serving churn-tree as "tree", each server with a fresh SQLite job store.
//  1. Submission throughput: POST /v1/models/tree/jobs with one row, at concurrency 32 (--concurrency)
//     for 10 s after a 2 s warm-up, with the shared load generator (bench/load.ts); the jobs run in
//     the background meanwhile. Jobs completed in the window come from GET /metrics
//     (modelport_jobs{status=...}) just before and just after it.
//  2. Submit -> succeeded latency: on a fresh idle server, N sequential jobs (default 500, --jobs),
//     each timed from sending the POST to the answer of GET /v1/jobs/{id}?wait=10 sent right after
//     the 202, on one keep-alive connection.
//  0. First, end-to-end throughput with bulk and single submission on SQLite and Redis, and BullMQ
//     on the same Redis (bench/jobs-throughput.ts).
// Prints the tables, the verdicts and Markdown for docs/PERFORMANCE.md; writes JSON to bench/results/.
import { mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { summarize } from "./aggregate.js";
import { type CpuReport, cpuReport, cpuSnapshot } from "./cpu.js";
import {
  type JobsResults,
  type JobsVerdict,
  jobsConsole,
  jobsMarkdown,
  jobsVerdict,
  type LatencyRun,
  type LatencySummary,
  type SubmitPoint,
  type SubmitSummary,
} from "./jobs-report.js";
import { runThroughput, throughputMarkdown } from "./jobs-throughput.js";
import { checkPrediction, measurePoint, type Prediction, predictionsAgree } from "./load.js";
import { describeModel, servingLine } from "./provenance.js";
import { type RunningServer, startModelportWithConfig } from "./servers.js";
import { round, Samples } from "./stats.js";
import { type Description, type SuiteContext, shownPath, writeResults } from "./suite.js";
import { CHURN_TREE, JSON_HEADERS, type Workload } from "./workload.js";

/** The model's name in the config, as the task's routes use it. */
export const JOBS_MODEL = "tree";
/** churn-tree served as "tree": the same body, {"rows":[[3,95,4,1,0,20]]}. */
const WORKLOAD: Workload = { ...CHURN_TREE, modelName: JOBS_MODEL };
export const JOBS_PATH = `/v1/models/${JOBS_MODEL}/jobs`;
/** The long-poll of part 2: GET /v1/jobs/{id}?wait=WAIT_S. */
export const WAIT_S = 10;
/** Part 2: jobs sent first and thrown away (the first one creates the SQLite file). */
export const LATENCY_WARMUP_JOBS = 20;
const STATUSES = ["queued", "running", "succeeded", "failed", "canceled"] as const;
export type JobCounts = Record<(typeof STATUSES)[number], number>;

/** One server run's folder: its YAML config, SQLite store and (unused, results are inline) blobs. */
interface RunDir {
  dir: string;
  configFile: string;
  dbFile: string;
}

/** The YAML each server runs with; `dir` is the run's folder, `modelDir` where the models are. */
export function jobsConfig(
  dir: string,
  modelDir: string,
  jobs: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    jobs: {
      sqlitePath: path.join(dir, "jobs.db"),
      blobs: { backend: "fs", dir: path.join(dir, "blobs") },
      ...jobs,
    },
    models: [{ name: JOBS_MODEL, path: path.join(modelDir, WORKLOAD.modelFile) }],
  };
}

function makeRunDir(ctx: SuiteContext, label: string, jobs: Record<string, unknown> = {}): RunDir {
  // Inside the models' temporary folder, which run.ts removes on exit whatever happens.
  const dir = path.join(ctx.modelDir, `jobs-${label}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const configFile = path.join(dir, "modelport.yaml");
  writeFileSync(
    configFile,
    `# bench/jobs.ts: one server run, a fresh job store\n${stringify(jobsConfig(dir, ctx.modelDir, jobs))}`,
  );
  return { dir, configFile, dbFile: path.join(dir, "jobs.db") };
}

function startServer(ctx: SuiteContext, run: RunDir): Promise<RunningServer> {
  return startModelportWithConfig({
    name: "modelport",
    configFile: run.configFile,
    shownConfigFile: "<run>/modelport.yaml",
    modelName: JOBS_MODEL,
    logLevel: ctx.opts.logLevel,
  });
}

const fileBytes = (file: string): number | null => {
  try {
    return statSync(file).size;
  } catch {
    return null;
  }
};

const JOBS_GAUGE = /^modelport_jobs\{status="([a-z]+)"\}\s+(\S+)/;

/** The job store's counts by status from GET /metrics (modelport_jobs), or null when unavailable. */
async function scrapeJobCounts(server: RunningServer): Promise<JobCounts | null> {
  try {
    const res = await fetch(`${server.url}/metrics`);
    if (!res.ok) return null;
    const counts: JobCounts = { queued: 0, running: 0, succeeded: 0, failed: 0, canceled: 0 };
    for (const line of (await res.text()).split("\n")) {
      const m = JOBS_GAUGE.exec(line);
      if (m && m[1]! in counts) counts[m[1] as keyof JobCounts] = Number(m[2]);
    }
    return counts;
  } catch {
    return null;
  }
}

/** Sends the row through the synchronous predict route: the reference the job results must match. */
async function checkServer(
  server: RunningServer,
): Promise<{ prediction: Prediction; description: Description | null }> {
  const prediction = await checkPrediction(server, WORKLOAD);
  return { prediction, description: await describeModel(server) };
}

/** Part 1 at one concurrency, on a fresh server. */
async function submitPoint(ctx: SuiteContext, concurrency: number, roundNo: number) {
  const { opts, log } = ctx;
  const run = makeRunDir(ctx, `submit-c${concurrency}-r${roundNo}`);
  const server = await startServer(ctx, run);
  try {
    const checked = await checkServer(server);
    let before: JobCounts | null = null;
    let after: JobCounts | null = null;
    const point = await measurePoint(
      { ...server, predictPath: JOBS_PATH },
      WORKLOAD,
      concurrency,
      opts.warmupS,
      opts.durationS,
      roundNo,
      {
        before: async () => {
          before = await scrapeJobCounts(server);
        },
        after: async () => {
          after = await scrapeJobCounts(server);
        },
      },
    );
    const b = before as JobCounts | null;
    const a = after as JobCounts | null;
    const accepted = point.statusCodes["202"] ?? 0;
    const completed = a && b ? a.succeeded - b.succeeded : null;
    const sp: SubmitPoint = {
      round: roundNo,
      concurrency,
      accepted,
      acceptedPerS: point.durationS > 0 ? round(accepted / point.durationS) : 0,
      completed,
      completedPerS: completed !== null && point.durationS > 0 ? round(completed / point.durationS) : null,
      failedJobs: a && b ? a.failed + a.canceled - (b.failed + b.canceled) : null,
      backlogAfter: a ? a.queued + a.running : null,
      countsBefore: b,
      countsAfter: a,
      storeBytes: { db: fileBytes(run.dbFile), wal: fileBytes(`${run.dbFile}-wal`) },
      point,
    };
    const p = point;
    log(
      `  round ${roundNo} submit c=${concurrency}: ${sp.acceptedPerS} jobs/s accepted, p50 ${p.latencyMs.p50} ms, ` +
        `p99 ${p.latencyMs.p99} ms, non-2xx ${p.non2xx}, errors ${p.errors + p.timeouts}; completed ` +
        `${sp.completed ?? "?"} (${sp.completedPerS ?? "?"}/s), backlog ${sp.backlogAfter ?? "?"}; CPU % of a core: ` +
        `server ${p.cpu.serverPct}, bench ${p.cpu.benchPct}, other ${p.cpu.otherPct}`,
    );
    return { sp, server, ...checked };
  } finally {
    await server.child.stop();
    rmSync(run.dir, { recursive: true, force: true });
  }
}

interface Answer {
  status: number;
  text: string;
}

/** One request on `agent` (node:http: less client overhead than fetch, so the times are the server's). */
function request(agent: http.Agent, method: string, url: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> =
      body === undefined ? {} : { ...JSON_HEADERS, "content-length": Buffer.byteLength(body) };
    const req = http.request(url, { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }),
      );
    });
    req.setTimeout((WAIT_S + 5) * 1000, () => req.destroy(new Error(`no answer within ${WAIT_S + 5} s`)));
    req.on("error", reject);
    req.end(body);
  });
}

interface JobAnswer {
  id?: string;
  status?: string;
  created_at?: string;
  finished_at?: string;
  last_error?: { message?: string };
}

/** The job result's outputs as a Prediction (one row each), for predictionsAgree. */
export function resultPrediction(text: string): Prediction {
  const outputs = (JSON.parse(text) as { outputs?: Record<string, unknown> }).outputs ?? {};
  const prediction: Prediction = {};
  for (const [name, value] of Object.entries(outputs)) {
    if (Array.isArray(value) && value.length === 1) prediction[name] = value[0] as number | number[];
  }
  return prediction;
}

/** Part 2 on a fresh idle server. */
async function latencyRun(ctx: SuiteContext, roundNo: number) {
  const { opts, log } = ctx;
  const run = makeRunDir(ctx, `latency-r${roundNo}`);
  const server = await startServer(ctx, run);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const checked = await checkServer(server);
    const total = new Samples();
    const submit = new Samples();
    const wait = new Samples();
    const inServer = new Samples();
    const failures: string[] = [];
    let failed = 0;
    let lastSucceeded: string | null = null;
    let cpuBefore = cpuSnapshot(server.child.pid);
    const n = LATENCY_WARMUP_JOBS + opts.latencyJobs;
    for (let i = 0; i < n; i++) {
      const measured = i >= LATENCY_WARMUP_JOBS;
      if (i === LATENCY_WARMUP_JOBS) cpuBefore = cpuSnapshot(server.child.pid);
      const note = (why: string) => {
        if (!measured) throw new Error(why); // a warm-up job must not fail: stop here
        failed++;
        if (failures.length < 5) failures.push(why);
      };
      try {
        const t0 = performance.now();
        const posted = await request(agent, "POST", `${server.url}${JOBS_PATH}`, WORKLOAD.body);
        const t1 = performance.now();
        if (posted.status !== 202) {
          note(`POST answered ${posted.status}: ${posted.text.slice(0, 200)}`);
          continue;
        }
        const id = (JSON.parse(posted.text) as JobAnswer).id!;
        const got = await request(agent, "GET", `${server.url}/v1/jobs/${id}?wait=${WAIT_S}`);
        const t2 = performance.now();
        const job = JSON.parse(got.text) as JobAnswer;
        if (got.status !== 200 || job.status !== "succeeded") {
          note(
            `job ${id}: GET answered ${got.status}, status ${job.status} ${job.last_error?.message ?? ""}`,
          );
          continue;
        }
        if (!measured) continue;
        total.add(t2 - t0);
        submit.add(t1 - t0);
        wait.add(t2 - t1);
        if (job.created_at && job.finished_at)
          inServer.add(Date.parse(job.finished_at) - Date.parse(job.created_at));
        lastSucceeded = id;
      } catch (err) {
        if (!measured) throw new Error(`warm-up job ${i + 1}: ${(err as Error).message}`);
        note((err as Error).message);
      }
    }
    const cpu: CpuReport = cpuReport(cpuBefore, cpuSnapshot(server.child.pid), os.cpus().length);

    // The last job's result must be what the synchronous predict route answers.
    let resultAgrees: boolean | null = null;
    if (lastSucceeded) {
      const res = await request(agent, "GET", `${server.url}/v1/jobs/${lastSucceeded}/result`);
      resultAgrees = res.status === 200 && predictionsAgree(resultPrediction(res.text), checked.prediction);
    }
    const pcts = (s: Samples) => {
      const [p50, p90, p99, max] = s.percentiles([50, 90, 99, 100]).map(round) as [
        number,
        number,
        number,
        number,
      ];
      return { p50, p90, p99, max, mean: round(s.mean()) };
    };
    const lr: LatencyRun = {
      round: roundNo,
      jobs: opts.latencyJobs,
      warmupJobs: LATENCY_WARMUP_JOBS,
      succeeded: total.count,
      failed,
      failures,
      totalMs: pcts(total),
      submitMs: pcts(submit),
      waitMs: pcts(wait),
      inServerMs: inServer.count ? pcts(inServer) : null,
      resultAgrees,
      cpu,
    };
    const t = lr.totalMs;
    log(
      `  round ${roundNo} latency: ${lr.succeeded}/${lr.jobs} succeeded, submit -> succeeded p50 ${t.p50} ms, ` +
        `p90 ${t.p90} ms, p99 ${t.p99} ms, max ${t.max} ms; CPU % of a core: server ${cpu.serverPct}, ` +
        `bench ${cpu.benchPct}, other ${cpu.otherPct}`,
    );
    return { lr, server, ...checked };
  } finally {
    agent.destroy();
    await server.child.stop();
    rmSync(run.dir, { recursive: true, force: true });
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

const medianOrNull = (xs: readonly (number | null)[]): number | null =>
  xs.length === 0 || xs.some((x) => x === null) ? null : round(median(xs as number[]));

function summarizeSubmits(points: readonly SubmitPoint[], concurrency: readonly number[]): SubmitSummary[] {
  const base = summarize(
    points.map((p) => p.point),
    concurrency,
    ["modelport"],
  );
  return base.map((s) => {
    const ps = points.filter((p) => p.concurrency === s.concurrency);
    return {
      ...s,
      acceptedPerS: round(median(ps.map((p) => p.acceptedPerS))),
      accepted: ps.reduce((a, p) => a + p.accepted, 0),
      completedPerS: medianOrNull(ps.map((p) => p.completedPerS)),
      backlogAfter: medianOrNull(ps.map((p) => p.backlogAfter)),
      failedJobs: ps.some((p) => p.failedJobs === null) ? null : ps.reduce((a, p) => a + p.failedJobs!, 0),
      serverCpuUsPerJob: medianOrNull(
        ps.map((p) =>
          p.point.cpu.serverPct === null || p.acceptedPerS === 0
            ? null
            : round((p.point.cpu.serverPct * 1e4) / p.acceptedPerS),
        ),
      ),
    };
  });
}

function summarizeLatency(runs: readonly LatencyRun[]): LatencySummary {
  const med = (f: (r: LatencyRun) => number) => round(median(runs.map(f)));
  const of = (pick: (r: LatencyRun) => LatencyRun["totalMs"]) => ({
    p50: med((r) => pick(r).p50),
    p90: med((r) => pick(r).p90),
    p99: med((r) => pick(r).p99),
    max: Math.max(...runs.map((r) => pick(r).max)),
  });
  return {
    rounds: runs.length,
    jobs: runs.reduce((a, r) => a + r.jobs, 0),
    succeeded: runs.reduce((a, r) => a + r.succeeded, 0),
    failed: runs.reduce((a, r) => a + r.failed, 0),
    totalMs: of((r) => r.totalMs),
    submitMs: of((r) => r.submitMs),
    waitMs: of((r) => r.waitMs),
    inServerMs: runs.every((r) => r.inServerMs) ? of((r) => r.inServerMs!) : null,
    resultAgrees: runs.every((r) => r.resultAgrees === true),
    otherCpuPct: medianOrNull(runs.map((r) => r.cpu.otherPct)),
    serverCpuPct: medianOrNull(runs.map((r) => r.cpu.serverPct)),
  };
}

export interface JobsOutcome {
  text: string;
  verdict: JobsVerdict;
  resultsFile: string;
}

export async function runJobs(ctx: SuiteContext, commandLine: string): Promise<JobsOutcome> {
  const { opts, date, source, log } = ctx;
  log(
    `jobs suite (churn-tree as "${JOBS_MODEL}", SQLite job store): submission at concurrency ` +
      `${opts.concurrency.join(", ")}, ${opts.warmupS} s warm-up + ${opts.durationS} s; then ` +
      `${opts.latencyJobs} sequential jobs (+${LATENCY_WARMUP_JOBS} warm-up); ${opts.rounds} round(s), ` +
      `modelport log level ${opts.logLevel}; a fresh server and job store for each`,
  );
  const throughput = await runThroughput(
    ctx,
    {
      start: async (label, jobs) => {
        const run = makeRunDir(ctx, label, jobs);
        const server = await startServer(ctx, run);
        return {
          url: server.url,
          reference: () => checkPrediction(server, WORKLOAD),
          stop: async () => {
            await server.child.stop();
            rmSync(run.dir, { recursive: true, force: true });
          },
        };
      },
      resultPrediction,
    },
    opts.quick ? 4000 : 20_000,
  );
  const submits: SubmitPoint[] = [];
  const latency: LatencyRun[] = [];
  let command = "";
  let description: Description | null = null;
  const predictions: Prediction[] = [];
  for (let roundNo = 1; roundNo <= opts.rounds; roundNo++) {
    for (const c of opts.concurrency) {
      const r = await submitPoint(ctx, c, roundNo);
      submits.push(r.sp);
      command = r.server.command;
      description ??= r.description;
      predictions.push(r.prediction);
    }
    const r = await latencyRun(ctx, roundNo);
    latency.push(r.lr);
    description ??= r.description;
    predictions.push(r.prediction);
  }

  const submitSummaries = summarizeSubmits(submits, opts.concurrency);
  const latencySummary = summarizeLatency(latency);
  const verdict = jobsVerdict(submitSummaries, submits, latencySummary, latency);
  const serving = servingLine(description);
  const shownConfig = stringify(jobsConfig("<run>", "<models>"));
  const predictionsAgreeAll = predictions.every((p) => predictionsAgree(p, predictions[0]!));

  const results: JobsResults = {
    benchmark: "jobs",
    date,
    machine: ctx.machine,
    source,
    commandLine,
    modelportModel: description,
    options: {
      durationS: opts.durationS,
      warmupS: opts.warmupS,
      concurrency: opts.concurrency,
      rounds: opts.rounds,
      latencyJobs: opts.latencyJobs,
      latencyWarmupJobs: LATENCY_WARMUP_JOBS,
      waitS: WAIT_S,
      modelportLogLevel: opts.logLevel,
      pipelining: 1,
      quick: opts.quick,
    },
    workload: { model: WORKLOAD.modelFile, served: JOBS_MODEL, path: JOBS_PATH, body: WORKLOAD.body },
    config: shownConfig,
    command,
    prediction: predictions[0] ?? null,
    predictionsAgree: predictionsAgreeAll,
    submitSummaries,
    latency: latencySummary,
    verdict,
    throughput,
    submitPoints: submits,
    latencyRuns: latency,
  };
  const outFile = writeResults(ctx, "jobs", results);
  const text = [
    jobsConsole(results, serving),
    "",
    "--- Markdown for docs/PERFORMANCE.md ---",
    "",
    throughputMarkdown(throughput),
    "",
    jobsMarkdown(results, serving, shownPath(outFile)),
    "",
    `results: ${shownPath(outFile)}`,
    "",
  ].join("\n");
  return { text, verdict, resultsFile: outFile };
}
