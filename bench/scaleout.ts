// The scale-out suite (`npm run bench:scaleout`): the API tier and the runner tier as separate
// `modelport serve --role ...` processes, in the same run:
//  1. Jobs per second with one runner vs two, for a latency-bound handler (examples/handlers/
//     latency-handler.ts: 20 ms of waiting per job, as a remote call would), jobs through Redis.
//     N jobs are submitted through the API at once; the rate is the jobs that succeeded between
//     two readings of the API's /metrics (modelport_jobs) taken while the queue was still long.
//     Bar: two runners complete at least 1.8x the jobs per second of one.
//  2. The API -> runner hop: sequential predicts (concurrency 1, keep-alive) on churn-tree through
//     `--role all` vs `--role api` + one `--role runner`, alternating in rounds.
//     Bar: p50 through the API tier at most 1 ms above --role all.
// Prints a table and Markdown for docs/PERFORMANCE.md; writes JSON to bench/results/.
import { writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { stringify } from "yaml";
import { type RunningServer, startModelportWithConfig } from "./servers.js";
import { round } from "./stats.js";
import { type SuiteContext, shownPath, writeResults } from "./suite.js";

const JOBS = 2000;
const JOB_CONCURRENCY = 4;
const WAIT_MS = 20;
const HOP_REQUESTS = 2000;
const HOP_ROUNDS = 3;

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function request(url: string, method: string, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method, agent, headers: body ? { "content-type": "application/json" } : {} },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function configFile(ctx: SuiteContext, label: string, config: Record<string, unknown>): string {
  const file = path.join(ctx.modelDir, `scaleout-${label}.yaml`);
  writeFileSync(file, `# bench/scaleout.ts\n${stringify(config)}`);
  return file;
}

async function start(name: string, file: string, modelName: string, flags: string[]): Promise<RunningServer> {
  return startModelportWithConfig({
    name,
    configFile: file,
    shownConfigFile: `<tmp>/${path.basename(file)}`,
    modelName,
    logLevel: "warn",
    flags,
  });
}

async function succeeded(api: string): Promise<number> {
  const text = (await request(`${api}/metrics`, "GET")).text;
  const m = /modelport_jobs\{status="succeeded"[^}]*\} (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
}

/** Jobs/s of `runners` runner processes behind one API process. */
async function jobsPerSecond(
  ctx: SuiteContext,
  runners: number,
): Promise<{ jobsPerS: number; window: string }> {
  const prefix = `modelport-bench-${process.pid}-${runners}-${Date.now()}:`;
  const file = configFile(ctx, `jobs-${runners}`, {
    server: { runnerPollMs: 500 },
    jobs: { store: "redis", redisPrefix: prefix, concurrency: JOB_CONCURRENCY },
    models: [
      {
        name: "latency",
        backend: "custom",
        path: path.join(ctx.repoRoot, "dist/examples/handlers/latency-handler.js"),
        options: { waitMs: WAIT_MS },
      },
    ],
  });
  const started: RunningServer[] = [];
  try {
    for (let i = 0; i < runners; i++)
      started.push(await start(`runner-${i + 1}`, file, "latency", ["--role", "runner"]));
    const api = await start("api", file, "latency", [
      "--role",
      "api",
      ...started.flatMap((r) => ["--runner", r.url]),
    ]);
    started.push(api);
    const body = JSON.stringify({ rows: [[1]] });
    // Submit everything first, 64 at a time: the queue is long before the window opens.
    for (let i = 0; i < JOBS; i += 64) {
      await Promise.all(
        Array.from({ length: Math.min(64, JOBS - i) }, () =>
          request(`${api.url}/v1/models/latency/jobs`, "POST", body).then((r) => {
            if (r.status !== 202) throw new Error(`submit answered ${r.status}: ${r.text}`);
          }),
        ),
      );
    }
    // The window: from the first reading after submission until 80% of the jobs are done.
    const t0 = performance.now();
    const n0 = await succeeded(api.url);
    let n1 = n0;
    let t1 = t0;
    while (n1 < JOBS * 0.8) {
      await new Promise((r) => setTimeout(r, 100));
      n1 = await succeeded(api.url);
      t1 = performance.now();
    }
    const jobsPerS = ((n1 - n0) / (t1 - t0)) * 1000;
    ctx.log(`  ${runners} runner(s): ${n1 - n0} jobs in ${round(t1 - t0)} ms = ${round(jobsPerS)} jobs/s`);
    return { jobsPerS: round(jobsPerS), window: `${n1 - n0} jobs in ${round((t1 - t0) / 1000)} s` };
  } finally {
    for (const s of started.reverse()) await s.child.stop(2000);
  }
}

/** p50 and p99 (ms) of HOP_REQUESTS sequential predicts after 200 warm-up ones. */
async function sequentialLatency(server: RunningServer): Promise<{ p50: number; p99: number }> {
  const url = `${server.url}/v1/models/tree/predict`;
  const body = JSON.stringify({ rows: [[3, 95, 4, 1, 0, 20]] });
  for (let i = 0; i < 200; i++) await request(url, "POST", body);
  const samples: number[] = [];
  for (let i = 0; i < HOP_REQUESTS; i++) {
    const t = performance.now();
    const r = await request(url, "POST", body);
    samples.push(performance.now() - t);
    if (r.status !== 200) throw new Error(`predict answered ${r.status}: ${r.text}`);
  }
  samples.sort((a, b) => a - b);
  const at = (p: number) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))]!;
  return { p50: round(at(0.5)), p99: round(at(0.99)) };
}

async function hop(
  ctx: SuiteContext,
): Promise<{ all: number[]; api: number[]; allP99: number[]; apiP99: number[] }> {
  const file = configFile(ctx, "hop", {
    server: { requestLogging: false },
    models: [{ name: "tree", path: path.join(ctx.modelDir, "churn-tree.onnx") }],
  });
  const out = { all: [] as number[], api: [] as number[], allP99: [] as number[], apiP99: [] as number[] };
  for (let roundNo = 1; roundNo <= HOP_ROUNDS; roundNo++) {
    const order = roundNo % 2 === 1 ? ["all", "api"] : ["api", "all"];
    for (const mode of order) {
      const started: RunningServer[] = [];
      try {
        let target: RunningServer;
        if (mode === "all") {
          target = await start("all", file, "tree", []);
          started.push(target);
        } else {
          const runner = await start("runner", file, "tree", ["--role", "runner"]);
          started.push(runner);
          target = await start("api", file, "tree", ["--role", "api", "--runner", runner.url]);
          started.push(target);
        }
        const l = await sequentialLatency(target);
        ctx.log(`  round ${roundNo} --role ${mode}: p50 ${l.p50} ms, p99 ${l.p99} ms`);
        (mode === "all" ? out.all : out.api).push(l.p50);
        (mode === "all" ? out.allP99 : out.apiP99).push(l.p99);
      } finally {
        for (const s of started.reverse()) await s.child.stop(2000);
      }
    }
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function runScaleout(ctx: SuiteContext, commandLine: string): Promise<string> {
  ctx.log("scale-out: jobs per second, one runner vs two");
  const one = await jobsPerSecond(ctx, 1);
  const two = await jobsPerSecond(ctx, 2);
  const ratio = round(two.jobsPerS / one.jobsPerS);
  ctx.log("scale-out: the API -> runner hop at concurrency 1");
  const h = await hop(ctx);
  const allP50 = median(h.all);
  const apiP50 = median(h.api);
  const added = round(apiP50 - allP50);
  const jobsPass = ratio >= 1.8;
  const hopPass = added <= 1;
  const results = {
    suite: "scaleout",
    date: ctx.date,
    machine: ctx.machine,
    source: ctx.source,
    command: commandLine,
    jobs: {
      handlerWaitMs: WAIT_MS,
      concurrencyPerRunner: JOB_CONCURRENCY,
      submitted: JOBS,
      one,
      two,
      ratio,
      pass: jobsPass,
    },
    hop: {
      requests: HOP_REQUESTS,
      rounds: HOP_ROUNDS,
      ...h,
      allP50,
      apiP50,
      addedP50Ms: added,
      pass: hopPass,
    },
  };
  const file = writeResults(ctx, "scaleout", results);
  const m = ctx.machine;
  return `
## Scale-out: API tier and runner tier (${ctx.date.slice(0, 10)})

Machine: ${m.cpus} × ${m.cpuModel}, ${m.totalMemoryGiB} GiB, Node ${m.node}. Command: \`${commandLine}\` (results: ${shownPath(file)}).

| measure | value | bar | verdict |
| --- | --- | --- | --- |
| jobs/s, 1 runner (latency handler, ${WAIT_MS} ms/job, ${JOB_CONCURRENCY} workers/runner) | ${one.jobsPerS} (${one.window}) | | |
| jobs/s, 2 runners | ${two.jobsPerS} (${two.window}) | | |
| 2 runners / 1 runner | ${ratio}× | ≥ 1.8× | ${jobsPass ? "pass" : "FAIL"} |
| predict p50 at c=1, \`--role all\` (median of ${HOP_ROUNDS} rounds × ${HOP_REQUESTS}) | ${allP50} ms (rounds: ${h.all.join(", ")}) | | |
| predict p50 at c=1, \`--role api\` → \`--role runner\` | ${apiP50} ms (rounds: ${h.api.join(", ")}) | | |
| added by the hop (p50) | ${added} ms | ≤ 1 ms | ${hopPass ? "pass" : "FAIL"} |
`;
}
