// The batching suite's bars, verdict and Markdown section. Tables, formatting, noise detection
// and the machine come from report.ts.
import type { Comparison, Summary } from "./aggregate.js";
import type { InProcessResult } from "./in-process.js";
import type { PointResult } from "./load.js";
import type { Provenance } from "./provenance.js";
import {
  find,
  fmt,
  type Machine,
  NOISY_OTHER_PCT,
  noisyRounds,
  opt,
  pct,
  table,
  type Verdict,
} from "./report.js";

export const BATCHING_BAR = {
  concurrency: 64,
  /** wide-mlp, modelport with batching (default settings) / naive server, requests/s. */
  vsNaiveRps: 4,
  /** wide-mlp, modelport with batching / modelport with --batching off, requests/s. */
  vsOffRps: 3,
  /** churn-tree, modelport (batching on, the default) / naive server, requests/s. */
  churnTreeRps: 0.9,
} as const;

const B = BATCHING_BAR;
export const BATCHING_RULE =
  `at concurrency ${B.concurrency}: on wide-mlp, modelport with batching (default settings) reaches at ` +
  `least ${B.vsNaiveRps}x the naive server's requests/s and at least ${B.vsOffRps}x modelport with ` +
  "batching off, with p99 below the naive server's (and no errors or non-2xx answers); on churn-tree, " +
  `modelport keeps at least ${B.churnTreeRps * 100}% of the naive server's requests/s`;

/** The wide-mlp bars for one modelport server (the default setting, or the tuned one for information). */
export interface WideMlpBar {
  server: string;
  measured: boolean;
  holds: boolean;
  rpsVsNaive: number | null;
  rpsVsOff: number | null;
  p99VsNaive: number | null;
  meanBatchRows: number | null;
  reasons: string[];
}

export interface ChurnTreeBar {
  measured: boolean;
  holds: boolean;
  rpsRatio: number | null;
  /** The foundation suite's full verdict (its bar also asks for p99 no worse). */
  foundationHolds: boolean | null;
  noisy: boolean;
  reasons: string[];
}

export interface BatchingVerdict {
  rule: string;
  measured: boolean;
  holds: boolean;
  wideMlp: WideMlpBar;
  /** The tuned setting judged by the same wide-mlp bars, for information; null when not run. */
  tuned: WideMlpBar | null;
  churnTree: ChurnTreeBar;
  /**
   * As in the foundation verdict: in most rounds at concurrency 64, a point ran while the rest of
   * the machine used more than NOISY_OTHER_PCT of a core (for either model).
   */
  noisy: boolean;
  /** Rounds at concurrency 64 with a noisy point, out of all rounds there, per model. */
  noise: { model: string; noisyRounds: number; rounds: number }[];
}

function at(comparisons: readonly Comparison[], server: string, baseline: string): Comparison | undefined {
  return comparisons.find(
    (c) => c.server === server && c.baseline === baseline && c.concurrency === B.concurrency,
  );
}

export function wideMlpBar(
  server: string,
  summaries: readonly Summary[],
  comparisons: readonly Comparison[],
): WideMlpBar {
  const vsNaive = at(comparisons, server, "naive");
  const vsOff = at(comparisons, server, "modelport-off");
  const s = find(summaries, server, B.concurrency);
  const reasons: string[] = [];
  if (!vsNaive || !vsOff || !s) {
    return {
      server,
      measured: false,
      holds: false,
      rpsVsNaive: vsNaive?.rpsRatio ?? null,
      rpsVsOff: vsOff?.rpsRatio ?? null,
      p99VsNaive: vsNaive?.p99Ratio ?? null,
      meanBatchRows: s?.meanBatchRows ?? null,
      reasons: [`concurrency ${B.concurrency} not measured for ${server}, modelport-off and naive`],
    };
  }
  if (vsNaive.rpsRatio < B.vsNaiveRps)
    reasons.push(
      `${server}'s requests/s are ${vsNaive.rpsRatio.toFixed(2)}x naive's (needs >= ${B.vsNaiveRps}x)`,
    );
  if (vsOff.rpsRatio < B.vsOffRps)
    reasons.push(`${vsOff.rpsRatio.toFixed(2)}x modelport with batching off (needs >= ${B.vsOffRps}x)`);
  if (vsNaive.p99Ratio >= 1) reasons.push(`p99 ${vsNaive.p99Ratio.toFixed(2)}x naive's (needs < 1)`);
  if (s.errors + s.timeouts + s.non2xx > 0)
    reasons.push(`${s.errors} errors, ${s.timeouts} timeouts and ${s.non2xx} non-2xx answers`);
  return {
    server,
    measured: true,
    holds: reasons.length === 0,
    rpsVsNaive: vsNaive.rpsRatio,
    rpsVsOff: vsOff.rpsRatio,
    p99VsNaive: vsNaive.p99Ratio,
    meanBatchRows: s.meanBatchRows,
    reasons,
  };
}

/** Bar 2 from the foundation suite's churn-tree measurement, or "not measured" without one. */
export function churnTreeBar(
  foundation: { comparisons: Comparison[]; verdict: Verdict } | null,
): ChurnTreeBar {
  const cmp = foundation ? at(foundation.comparisons, "modelport", "naive") : undefined;
  if (!foundation || !cmp) {
    return {
      measured: false,
      holds: false,
      rpsRatio: null,
      foundationHolds: foundation ? foundation.verdict.holds : null,
      noisy: false,
      reasons: [
        foundation
          ? `the foundation suite did not run concurrency ${B.concurrency}`
          : "the foundation suite did not run; use --suite all",
      ],
    };
  }
  const reasons =
    cmp.rpsRatio < B.churnTreeRps
      ? [`modelport's requests/s are ${pct(cmp.rpsRatio)} of naive's (needs >= ${pct(B.churnTreeRps)})`]
      : [];
  return {
    measured: true,
    holds: reasons.length === 0,
    rpsRatio: cmp.rpsRatio,
    foundationHolds: foundation.verdict.holds,
    noisy: foundation.verdict.noisy,
    reasons,
  };
}

export function batchingVerdict(
  summaries: readonly Summary[],
  comparisons: readonly Comparison[],
  points: readonly PointResult[],
  tuned: string | null,
  churnTree: ChurnTreeBar,
  churnNoise: { noisyRounds: number; rounds: number } | null,
): BatchingVerdict {
  const wideMlp = wideMlpBar("modelport", summaries, comparisons);
  const wide = noisyRounds(points, B.concurrency);
  const noise = [{ model: "wide-mlp", noisyRounds: wide.noisy, rounds: wide.rounds }];
  if (churnNoise) noise.push({ model: "churn-tree", ...churnNoise });
  return {
    rule: BATCHING_RULE,
    measured: wideMlp.measured && churnTree.measured,
    holds: wideMlp.holds && churnTree.holds,
    wideMlp,
    tuned: tuned ? wideMlpBar(tuned, summaries, comparisons) : null,
    churnTree,
    noisy: wide.noisy * 2 > wide.rounds || churnTree.noisy,
    noise,
  };
}

const x = (r: number | null) => (r === null ? "-" : `${r.toFixed(2)}x`);

function wideLine(b: WideMlpBar): string {
  const figures =
    `requests/s ${x(b.rpsVsNaive)} naive's and ${x(b.rpsVsOff)} batching off's, ` +
    `p99 ${x(b.p99VsNaive)} naive's, mean batch ${opt(b.meanBatchRows)} rows`;
  if (!b.measured) return `not measured (${b.reasons.join("; ")})`;
  return b.holds ? `HOLDS: ${figures}` : `MISSED: ${figures}: ${b.reasons.join("; ")}`;
}

/** The verdict, one line per bar, then the overall line. */
export function batchingVerdictLines(v: BatchingVerdict): string[] {
  const ct = v.churnTree;
  const churn = ct.measured
    ? `${ct.holds ? "HOLDS" : "MISSED"}: requests/s ${pct(ct.rpsRatio!)} of naive's` +
      `${ct.holds ? "" : `: ${ct.reasons.join("; ")}`}`
    : `not measured (${ct.reasons.join("; ")})`;
  const lines = [
    `Bar 1, wide-mlp at concurrency ${B.concurrency}, modelport with batching (default settings): ${wideLine(v.wideMlp)}.`,
  ];
  if (v.tuned) lines.push(`  (for information, ${v.tuned.server}: ${wideLine(v.tuned)}.)`);
  lines.push(`Bar 2, churn-tree at concurrency ${B.concurrency}, modelport/naive: ${churn}.`);
  const missing = [v.wideMlp.measured ? "" : "bar 1", v.churnTree.measured ? "" : "bar 2"].filter((m) => m);
  const missed = (v.wideMlp.measured && !v.wideMlp.holds) || (v.churnTree.measured && !v.churnTree.holds);
  const state = missed
    ? "MISSED"
    : missing.length > 0
      ? `INCOMPLETE (${missing.join(" and ")} not measured)`
      : "HOLDS";
  const overall = `Batching benchmark (${v.rule}): ${state}.`;
  const counts = v.noise.map((n) => `${n.noisyRounds} of ${n.rounds} round(s) on ${n.model}`).join(", ");
  const noise = v.noisy
    ? ` UNRELIABLE: other processes used more than ${NOISY_OTHER_PCT}% of a core while concurrency ` +
      `${B.concurrency} was measured, in ${counts}; rerun on a quieter machine` +
      `${v.noise.every((n) => n.rounds < 3) ? " or with --rounds 3" : ""}.`
    : "";
  lines.push(overall + noise);
  return lines;
}

/** server/baseline ratio lines for the console. */
export function batchingRatioLines(comparisons: readonly Comparison[]): string {
  return comparisons
    .map(
      (c) =>
        `c=${String(c.concurrency).padEnd(3)} ${`${c.server}/${c.baseline}`.padEnd(31)} requests/s ${c.rpsRatio.toFixed(3)}` +
        `  p50 ${c.p50Ratio.toFixed(3)}  p99 ${c.p99Ratio.toFixed(3)}` +
        `  server CPU per request ${c.cpuPerRequestRatio?.toFixed(3) ?? "-"}`,
    )
    .join("\n");
}

export interface BatchingMarkdownInput {
  date: string;
  machine: Machine;
  workload: string;
  durationS: number;
  warmupS: number;
  rounds: number;
  logLevel: string;
  /** Servers in table order, each with what it is and how it was started. */
  servers: { name: string; what: string; command: string }[];
  summaries: readonly Summary[];
  comparisons: readonly Comparison[];
  inProcess: InProcessResult[];
  verdict: BatchingVerdict;
  source: Provenance;
  /** The churn-tree results file when the foundation suite ran too. */
  foundationResults: string | null;
  commandLine: string;
}

/** A section ready to paste into docs/PERFORMANCE.md. */
export function batchingMarkdown(r: BatchingMarkdownInput): string {
  const m = r.machine;
  const concurrency = [...new Set(r.summaries.map((s) => s.concurrency))].sort((a, b) => a - b);
  const ratio = (server: string, baseline: string, c: number) =>
    r.comparisons.find((k) => k.server === server && k.baseline === baseline && k.concurrency === c);
  const rows: string[][] = [];
  for (const c of concurrency) {
    for (const { name } of r.servers) {
      const s = find(r.summaries, name, c);
      if (!s) continue;
      const vsNaive = name === "naive" ? null : (ratio(name, "naive", c)?.rpsRatio ?? null);
      const vsOff =
        name.startsWith("modelport") && name !== "modelport-off" ? ratio(name, "modelport-off", c) : null;
      rows.push([
        String(c),
        `\`${name}\``,
        fmt(s.rps),
        vsNaive === null ? "-" : `${vsNaive.toFixed(2)}x`,
        vsOff ? `${vsOff.rpsRatio.toFixed(2)}x` : "-",
        String(s.p50),
        String(s.p99),
        opt(s.serverCpuUsPerRequest),
        opt(s.meanBatchRows),
        String(s.errors + s.timeouts + s.non2xx),
      ]);
    }
  }
  const head = [
    "Concurrency",
    "Server",
    "req/s",
    "req/s vs naive",
    "req/s vs batching off",
    "p50 ms",
    "p99 ms",
    "server CPU µs/req",
    "mean batch rows",
    "failed",
  ];
  const rounds =
    r.rounds > 1
      ? ` ${r.rounds} rounds: figures are medians, ratios medians of per-round ratios of back-to-back points.`
      : "";
  const src = r.source;
  const tree =
    src.commit === null
      ? "an unknown commit"
      : `commit ${src.commit}${src.srcChanges ? ` plus ${src.srcChanges} uncommitted file(s) in src/` : ""}`;
  const lines = [
    `### Batching benchmark, ${r.date.slice(0, 10)}`,
    "",
    `Command: \`${r.commandLine}\`. Machine: ${m.cpuModel}, ${m.cpus} CPUs, ${m.totalMemoryGiB} GiB RAM, ` +
      `${m.os}, Node ${m.node}. The load generator (autocannon), the server and its model share those CPUs.`,
    "",
    `Workload: ${r.workload}, pipelining 1, ${r.warmupS} s warm-up then ${r.durationS} s measured per ` +
      `point; one server running at a time, the servers taking turns point by point.${rounds} Every server ` +
      `uses 1 intra-op thread; modelport logs at \`${r.logLevel}\` (JSON lines on stdout, read by the bench).`,
    "",
    table(head, rows, true, 2),
    "",
    "Ratios are paired (same round, back-to-back points): requests/s above 1 is better. " +
      "Server CPU µs/req: the server process's CPU time (all threads) per request. Mean batch rows: " +
      "`modelport_batch_rows_sum / _count` for the model over the measured run (from `GET /metrics` " +
      "before and after). `failed` = errors + timeouts + non-2xx.",
    "",
  ];
  if (r.inProcess.length > 0) {
    const ip = r.inProcess
      .map((p) => `batch ${p.batchRows}: ${fmt(p.rowsPerS)} rows/s (p50 ${p.latencyMs.p50} ms per call)`)
      .join("; ");
    lines.push(`In-process ceiling (\`session.run\` in a loop, 1 thread, no HTTP): ${ip}.`, "");
  }
  for (const line of batchingVerdictLines(r.verdict)) lines.push(`**${line.trim()}**`, "");
  if (r.foundationResults)
    lines.push(`Bar 2 comes from the foundation suite of the same run (${r.foundationResults}).`, "");
  lines.push(
    `modelport ${src.versions["modelport"]} at ${tree}. onnxruntime-node ${src.versions["onnxruntimeNode"]}, ` +
      `autocannon ${src.versions["autocannon"]}.`,
    "",
    "Servers:",
    "",
    ...r.servers.map((s) => `- \`${s.name}\`: ${s.what}: \`${s.command}\``),
  );
  return lines.join("\n");
}
