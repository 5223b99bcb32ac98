// The jobs suite's bars, verdicts, console summary and Markdown section. Tables, formatting, noise
// detection and the machine come from report.ts.

import type { Summary } from "./aggregate.js";
import type { CpuReport } from "./cpu.js";
import type { ThroughputResults } from "./jobs-throughput.js";
import type { PointResult, Prediction } from "./load.js";
import type { Provenance } from "./provenance.js";
import {
  fmt,
  type Machine,
  NOISY_OTHER_PCT,
  noiseLine,
  noisyRounds,
  opt,
  table,
  threadLines,
} from "./report.js";

export const JOBS_BARS = {
  /** Part 1: jobs accepted (202) per second at this concurrency. */
  submitConcurrency: 32,
  submitJobsPerS: 2000,
  /** Part 2: median submit -> succeeded latency, below this. */
  latencyP50Ms: 10,
} as const;

const B = JOBS_BARS;
export const SUBMIT_RULE =
  `at concurrency ${B.submitConcurrency}, at least ${fmt(B.submitJobsPerS)} jobs accepted (202) per second, ` +
  "with no errors, non-2xx answers or failed jobs";
export const LATENCY_RULE =
  `sequential jobs on an idle server, submit -> succeeded p50 under ${B.latencyP50Ms} ms, ` +
  "every job succeeded, with the predict route's result";

type Counts = Record<"queued" | "running" | "succeeded" | "failed" | "canceled", number>;

/** Part 1, one round at one concurrency. */
export interface SubmitPoint {
  round: number;
  concurrency: number;
  /** 202 answers in the measured run, and per second. */
  accepted: number;
  acceptedPerS: number;
  /** Jobs that reached succeeded during the measured run (modelport_jobs before/after); null: no /metrics. */
  completed: number | null;
  completedPerS: number | null;
  /** Jobs that ended failed or canceled during the measured run. */
  failedJobs: number | null;
  /** queued + running right after the measured run. */
  backlogAfter: number | null;
  countsBefore: Counts | null;
  countsAfter: Counts | null;
  /** The store's files right after the measured run. */
  storeBytes: { db: number | null; wal: number | null };
  /** The load generator's view (its "rps" counts every answer; acceptedPerS only the 202s). */
  point: PointResult;
}

export interface SubmitSummary extends Summary {
  /** Medians over rounds, except accepted and failedJobs (sums). */
  acceptedPerS: number;
  accepted: number;
  completedPerS: number | null;
  backlogAfter: number | null;
  failedJobs: number | null;
  /** Server CPU time per accepted job, µs (including the jobs run meanwhile). */
  serverCpuUsPerJob: number | null;
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Part 2, one round. */
export interface LatencyRun {
  round: number;
  jobs: number;
  warmupJobs: number;
  succeeded: number;
  failed: number;
  /** The first few failures, in words. */
  failures: string[];
  /** From sending the POST to the long-poll's answer with status succeeded. */
  totalMs: Percentiles & { mean: number };
  /** The POST alone (until its 202), and the GET ?wait=N after it. */
  submitMs: Percentiles & { mean: number };
  waitMs: Percentiles & { mean: number };
  /** The job's own finished_at - created_at (millisecond resolution). */
  inServerMs: (Percentiles & { mean: number }) | null;
  /** Whether the last job's result equals the predict route's answer. */
  resultAgrees: boolean | null;
  cpu: CpuReport;
}

/** Medians over rounds (max: the largest). */
export interface LatencySummary {
  rounds: number;
  jobs: number;
  succeeded: number;
  failed: number;
  totalMs: Percentiles;
  submitMs: Percentiles;
  waitMs: Percentiles;
  inServerMs: Percentiles | null;
  resultAgrees: boolean;
  otherCpuPct: number | null;
  serverCpuPct: number | null;
}

export interface Bar {
  rule: string;
  measured: boolean;
  holds: boolean;
  /** jobs/s (part 1) or p50 ms (part 2). */
  value: number | null;
  reasons: string[];
  /** In most rounds, the rest of the machine used more than NOISY_OTHER_PCT of a core. */
  noisy: boolean;
  noisyRounds: number;
  rounds: number;
}

export interface JobsVerdict {
  holds: boolean;
  submit: Bar;
  latency: Bar;
}

export interface JobsResults {
  benchmark: "jobs";
  date: string;
  machine: Machine;
  source: Provenance;
  commandLine: string;
  modelportModel: Record<string, unknown> | null;
  options: {
    durationS: number;
    warmupS: number;
    concurrency: number[];
    rounds: number;
    latencyJobs: number;
    latencyWarmupJobs: number;
    waitS: number;
    modelportLogLevel: string;
    pipelining: number;
    quick: boolean;
  };
  workload: { model: string; served: string; path: string; body: string };
  /** The YAML each server ran with, its folder shown as <run> and the models' as <models>. */
  config: string;
  command: string;
  prediction: Prediction | null;
  predictionsAgree: boolean;
  submitSummaries: SubmitSummary[];
  latency: LatencySummary;
  verdict: JobsVerdict;
  /** Part 0: end-to-end throughput, bulk and single, SQLite and Redis, and BullMQ. */
  throughput?: ThroughputResults;
  submitPoints: SubmitPoint[];
  latencyRuns: LatencyRun[];
}

function submitBar(summaries: readonly SubmitSummary[], points: readonly SubmitPoint[]): Bar {
  const s = summaries.find((x) => x.concurrency === B.submitConcurrency);
  const noise = noisyRounds(
    points.map((p) => p.point),
    B.submitConcurrency,
  );
  const base = { rule: SUBMIT_RULE, noisy: noise.noisy * 2 > noise.rounds, noisyRounds: noise.noisy };
  if (!s)
    return { ...base, measured: false, holds: false, value: null, reasons: ["not measured"], rounds: 0 };
  const reasons: string[] = [];
  if (s.acceptedPerS < B.submitJobsPerS)
    reasons.push(`${fmt(s.acceptedPerS)} jobs/s accepted (needs >= ${fmt(B.submitJobsPerS)})`);
  if (s.errors + s.timeouts + s.non2xx > 0)
    reasons.push(`${s.errors} errors, ${s.timeouts} timeouts and ${s.non2xx} non-2xx answers`);
  if (s.failedJobs) reasons.push(`${s.failedJobs} jobs failed or were canceled`);
  return {
    ...base,
    measured: true,
    holds: reasons.length === 0,
    value: s.acceptedPerS,
    reasons,
    rounds: noise.rounds,
  };
}

function latencyBar(l: LatencySummary, runs: readonly LatencyRun[]): Bar {
  const noisy = runs.filter((r) => (r.cpu.otherPct ?? 0) > NOISY_OTHER_PCT).length;
  const reasons: string[] = [];
  if (l.succeeded === 0) reasons.push("no job succeeded");
  else if (l.totalMs.p50 >= B.latencyP50Ms)
    reasons.push(`p50 ${l.totalMs.p50} ms (needs < ${B.latencyP50Ms} ms)`);
  if (l.failed > 0) reasons.push(`${l.failed} of ${l.jobs} jobs did not succeed`);
  if (!l.resultAgrees) reasons.push("a job's result differs from the predict route's answer");
  return {
    rule: LATENCY_RULE,
    measured: runs.length > 0,
    holds: runs.length > 0 && reasons.length === 0,
    value: l.succeeded > 0 ? l.totalMs.p50 : null,
    reasons,
    noisy: noisy * 2 > runs.length,
    noisyRounds: noisy,
    rounds: runs.length,
  };
}

export function jobsVerdict(
  summaries: readonly SubmitSummary[],
  points: readonly SubmitPoint[],
  latency: LatencySummary,
  runs: readonly LatencyRun[],
): JobsVerdict {
  const submit = submitBar(summaries, points);
  const lat = latencyBar(latency, runs);
  return { holds: submit.holds && lat.holds, submit, latency: lat };
}

function barLine(label: string, bar: Bar, value: string): string {
  if (!bar.measured) return `${label} (${bar.rule}): not measured.`;
  const line = bar.holds
    ? `${label} (${bar.rule}): HOLDS, ${value}.`
    : `${label} (${bar.rule}): MISSED, ${value}: ${bar.reasons.join("; ")}.`;
  const noise =
    ` UNRELIABLE: in ${bar.noisyRounds} of ${bar.rounds} round(s), other processes used more than ` +
    `${NOISY_OTHER_PCT}% of a core while it was measured; rerun on a quieter machine` +
    `${bar.rounds < 3 ? " or with --rounds 3" : ""}.`;
  return bar.noisy ? line + noise : line;
}

export function verdictLines(v: JobsVerdict): string[] {
  return [
    barLine("Bar 1, submission", v.submit, v.submit.value === null ? "-" : `${fmt(v.submit.value)} jobs/s`),
    barLine("Bar 2, latency", v.latency, v.latency.value === null ? "-" : `p50 ${v.latency.value} ms`),
  ];
}

const mib = (bytes: number | null) => (bytes === null ? "-" : `${(bytes / 2 ** 20).toFixed(1)} MiB`);

function latencyRows(l: LatencySummary, waitS: number): string[][] {
  const row = (label: string, p: Percentiles) => [
    label,
    String(p.p50),
    String(p.p90),
    String(p.p99),
    String(p.max),
  ];
  return [
    row("submit -> succeeded", l.totalMs),
    row("  POST until 202", l.submitMs),
    row(`  GET ?wait=${waitS} after it`, l.waitMs),
    ...(l.inServerMs ? [row("  in server: created_at -> finished_at (1 ms steps)", l.inServerMs)] : []),
  ];
}

/** The console summary (without the Markdown). */
export function jobsConsole(r: JobsResults, serving: string | null): string {
  const o = r.options;
  const m = r.machine;
  const head = [
    "conc",
    "jobs/s",
    "p50 ms",
    "p99 ms",
    "non-2xx",
    "errors",
    "completed/s",
    "backlog",
    "failed jobs",
    "mean batch",
    "server CPU%",
    "CPU us/job",
    "bench CPU%",
    "other CPU%",
  ];
  const rows = r.submitSummaries.map((s) => [
    String(s.concurrency),
    fmt(s.acceptedPerS),
    String(s.p50),
    String(s.p99),
    String(s.non2xx),
    String(s.errors + s.timeouts),
    s.completedPerS === null ? "-" : fmt(s.completedPerS),
    s.backlogAfter === null ? "-" : fmt(s.backlogAfter),
    opt(s.failedJobs),
    opt(s.meanBatchRows),
    opt(s.serverCpuPct),
    opt(s.serverCpuUsPerJob),
    String(s.benchCpuPct),
    opt(s.otherCpuPct),
  ]);
  const points = r.submitPoints.map((p) => p.point);
  const submitNoise = noiseLine(points);
  const latencyNoise = r.latencyRuns.filter((x) => (x.cpu.otherPct ?? 0) > NOISY_OTHER_PCT);
  const l = r.latency;
  const failures = r.latencyRuns.flatMap((x) => x.failures.map((f) => `round ${x.round}: ${f}`));
  const src = r.source;
  return [
    "",
    `Jobs suite: churn-tree served as "${r.workload.served}" by modelport serve -c (a fresh SQLite job store ` +
      "per server)",
    "",
    `1. Submission: POST ${r.workload.path} ${r.workload.body}, ${o.warmupS} s warm-up + ${o.durationS} s ` +
      `measured, ${o.rounds} round(s), jobs running in the background meanwhile`,
    table(head, rows, false, 1),
    "jobs/s: 202 answers per second; completed/s: jobs that reached succeeded during the measured run " +
      "(GET /metrics modelport_jobs before and after); backlog: queued + running at its end; mean batch: " +
      "rows per inference the job workers' batches formed; CPU us/job: server CPU time per accepted job; " +
      `CPU% columns: % of one core (${m.cpus} cores = ${m.cpus * 100}%); bench = autocannon; other = rest ` +
      "of the machine (other processes, irq, steal).",
    ...(submitNoise ? [submitNoise] : []),
    "server threads, % of one core (busiest first):",
    threadLines(points),
    ...r.submitPoints.map(
      (p) =>
        `job store after round ${p.round} c=${p.concurrency}: jobs.db ${mib(p.storeBytes.db)}, ` +
        `WAL ${mib(p.storeBytes.wal)}; by status ${JSON.stringify(p.countsAfter)}`,
    ),
    "",
    `2. Submit -> succeeded: ${o.latencyJobs} sequential jobs (after ${o.latencyWarmupJobs} warm-up jobs) ` +
      `on a fresh idle server, one keep-alive connection, GET /v1/jobs/{id}?wait=${o.waitS} sent right ` +
      `after each 202; ${o.rounds} round(s)${o.rounds > 1 ? ", medians (max: the largest)" : ""}`,
    table(["", "p50 ms", "p90 ms", "p99 ms", "max ms"], latencyRows(l, o.waitS), false, 1),
    `succeeded ${l.succeeded}/${l.jobs}; result matches predict: ${l.resultAgrees ? "yes" : "NO"}; ` +
      `CPU % of a core: server ${opt(l.serverCpuPct)}, other ${opt(l.otherCpuPct)}`,
    ...failures.map((f) => `  failure: ${f}`),
    ...(latencyNoise.length
      ? [
          `NOISE: other load above ${NOISY_OTHER_PCT}% of a core during latency round(s) ` +
            latencyNoise.map((x) => `${x.round} (${x.cpu.otherPct}%)`).join(", "),
        ]
      : []),
    "",
    ...verdictLines(r.verdict),
    `modelport: ${serving ?? "(no model description)"}; tree: commit ${src.commit}, ` +
      `${src.srcChanges ?? "?"} uncommitted file(s) in src/`,
    ...(r.predictionsAgree ? [] : ["WARNING: the servers disagreed on the predict route's answer."]),
  ].join("\n");
}

/** A section ready to paste into docs/PERFORMANCE.md; `resultsFile` as shownPath gives it. */
export function jobsMarkdown(r: JobsResults, serving: string | null, resultsFile: string): string {
  const o = r.options;
  const m = r.machine;
  const src = r.source;
  const submitRows = r.submitSummaries.map((s) => [
    String(s.concurrency),
    fmt(s.acceptedPerS),
    String(s.p50),
    String(s.p99),
    String(s.errors + s.timeouts + s.non2xx),
    s.completedPerS === null ? "-" : fmt(s.completedPerS),
    s.backlogAfter === null ? "-" : fmt(s.backlogAfter),
    opt(s.serverCpuUsPerJob),
    opt(s.otherCpuPct),
  ]);
  const rounds = o.rounds > 1 ? ` ${o.rounds} rounds, medians.` : "";
  const tree =
    src.commit === null
      ? "an unknown commit"
      : `commit ${src.commit}${src.srcChanges ? ` plus ${src.srcChanges} uncommitted file(s) in src/` : ""}`;
  const noiseNote = (x: number | null) =>
    x !== null && x > NOISY_OTHER_PCT ? ` Other load: ${x}% of a core (flagged as noisy).` : "";
  const mdRows = latencyRows(r.latency, o.waitS).map(([label, ...rest]) => [
    label!.trim().replace("->", "→"),
    ...rest,
  ]);
  return [
    `### Jobs benchmark, ${r.date.slice(0, 10)}`,
    "",
    `Machine: ${m.cpuModel}, ${m.cpus} CPUs, ${m.totalMemoryGiB} GiB RAM, ${m.os}, Node ${m.node}. ` +
      "The load generator, the server and its SQLite job store share those CPUs.",
    "",
    `Workload: churn-tree served as \`${r.workload.served}\` (\`modelport serve -c\`, default jobs settings, ` +
      `a fresh SQLite job store for each server), one row per job \`${r.workload.body}\`, modelport ` +
      `logging at \`${o.modelportLogLevel}\`.${rounds}`,
    "",
    `**Submission throughput**: \`POST ${r.workload.path}\` at pipelining 1, ${o.warmupS} s warm-up then ` +
      `${o.durationS} s measured; the jobs run in the background meanwhile. Completed/s: jobs that reached ` +
      "`succeeded` during the measured run (`modelport_jobs` on `GET /metrics` before and after); backlog: " +
      "queued + running at its end.",
    "",
    table(
      [
        "Concurrency",
        "jobs accepted/s",
        "p50 ms",
        "p99 ms",
        "failed",
        "completed/s",
        "backlog",
        "server CPU µs/job",
        "other CPU %",
      ],
      submitRows,
      true,
    ),
    "",
    `**Submit → succeeded latency**: ${o.latencyJobs} sequential jobs after ${o.latencyWarmupJobs} warm-up ` +
      "jobs on an idle server, one keep-alive connection; each timed from sending the POST to the answer " +
      `of \`GET /v1/jobs/{id}?wait=${o.waitS}\` sent right after the 202. ` +
      `${r.latency.succeeded}/${r.latency.jobs} succeeded.${noiseNote(r.latency.otherCpuPct)}`,
    "",
    table(["", "p50 ms", "p90 ms", "p99 ms", "max ms"], mdRows, true),
    "",
    ...verdictLines(r.verdict).map((line) => `**${line}**\n`),
    `modelport ${src.versions["modelport"]} at ${tree}${serving ? `; ${serving}` : ""}. ` +
      `onnxruntime-node ${src.versions["onnxruntimeNode"]}, autocannon ${src.versions["autocannon"]}.`,
    "",
    `Command: \`npm run bench:jobs\` (\`${r.commandLine}\`); results in \`${resultsFile}\`.`,
    "",
    `Server: \`${r.command}\`, a fresh \`<run>\` folder each time, with`,
    "",
    "```yaml",
    r.config.trimEnd(),
    "```",
  ].join("\n");
}
