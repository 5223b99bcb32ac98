// The benchmark's verdict and its outputs: whether the bar holds, the console tables, the Markdown
// section for docs/PERFORMANCE.md, and the machine it ran on.
import os from "node:os";
import type { Comparison, Summary } from "./aggregate.js";
import type { InProcessResult } from "./in-process.js";
import type { PointResult } from "./load.js";
import type { Provenance } from "./provenance.js";
import { round } from "./stats.js";

export const BAR_CONCURRENCY = 64;
export const BAR_RPS_RATIO = 0.9;
export const BAR_RULE =
  `at concurrency ${BAR_CONCURRENCY}, modelport reaches at least ${BAR_RPS_RATIO * 100}% of the naive ` +
  "server's requests/s with p99 latency no worse (and no errors or non-2xx answers)";
/** A point is flagged as noisy when the rest of the machine used more than this % of one core. */
export const NOISY_OTHER_PCT = 25;

export interface Machine {
  os: string;
  cpuModel: string;
  cpus: number;
  totalMemoryGiB: number;
  node: string;
}

export function machine(): Machine {
  const cpus = os.cpus();
  return {
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    cpuModel: cpus[0]?.model.trim() ?? "unknown",
    cpus: cpus.length,
    totalMemoryGiB: round(os.totalmem() / 2 ** 30),
    node: process.version,
  };
}

export interface Verdict {
  rule: string;
  measured: boolean;
  holds: boolean;
  rpsRatio: number | null;
  p99Ratio: number | null;
  reasons: string[];
  /**
   * True when, in most rounds, a point at the bar's concurrency ran while the rest of the machine
   * used more than NOISY_OTHER_PCT of a core: then the verdict says more about the neighbours.
   */
  noisy: boolean;
  /** Rounds at the bar's concurrency with a noisy point, out of `rounds`. */
  noisyRounds: number;
  rounds: number;
}

export function find(summaries: readonly Summary[], server: string, c: number): Summary | undefined {
  return summaries.find((s) => s.server === server && s.concurrency === c);
}

/** Rounds at concurrency `c` in which some point ran while other load exceeded NOISY_OTHER_PCT. */
export function noisyRounds(points: readonly PointResult[], c: number): { noisy: number; rounds: number } {
  const rounds = new Set(points.filter((p) => p.concurrency === c).map((p) => p.round));
  let noisy = 0;
  for (const r of rounds) {
    if (points.some((p) => p.concurrency === c && p.round === r && (p.cpu.otherPct ?? 0) > NOISY_OTHER_PCT))
      noisy++;
  }
  return { noisy, rounds: rounds.size };
}

export function verdict(
  summaries: readonly Summary[],
  comparisons: readonly Comparison[],
  points: readonly PointResult[],
): Verdict {
  const cmp = comparisons.find((c) => c.concurrency === BAR_CONCURRENCY);
  const m = find(summaries, "modelport", BAR_CONCURRENCY);
  if (!cmp || !m) {
    const reasons = ["not measured"];
    return {
      rule: BAR_RULE,
      measured: false,
      holds: false,
      rpsRatio: null,
      p99Ratio: null,
      reasons,
      noisy: false,
      noisyRounds: 0,
      rounds: 0,
    };
  }
  const reasons: string[] = [];
  if (cmp.rpsRatio < BAR_RPS_RATIO)
    reasons.push(
      `modelport's requests/s are ${pct(cmp.rpsRatio)} of naive's (needs >= ${pct(BAR_RPS_RATIO)})`,
    );
  if (cmp.p99Ratio > 1) reasons.push(`its p99 is ${cmp.p99Ratio.toFixed(2)}x naive's (needs <= 1)`);
  if (m.errors + m.timeouts + m.non2xx > 0)
    reasons.push(`${m.errors} errors, ${m.timeouts} timeouts and ${m.non2xx} non-2xx answers`);
  const noise = noisyRounds(points, BAR_CONCURRENCY);
  return {
    rule: BAR_RULE,
    measured: true,
    holds: reasons.length === 0,
    rpsRatio: cmp.rpsRatio,
    p99Ratio: cmp.p99Ratio,
    reasons,
    noisy: noise.noisy * 2 > noise.rounds,
    noisyRounds: noise.noisy,
    rounds: noise.rounds,
  };
}

export const fmt = (x: number) => (x >= 100 ? Math.round(x).toLocaleString("en-US") : String(round(x)));
export const pct = (r: number) => `${(r * 100).toFixed(1)}%`;
export const opt = (x: number | null) => (x === null ? "-" : String(x));

/**
 * A plain-text or Markdown table: the first `left` columns left-aligned (default: 2 in plain text,
 * 1 in Markdown), the others right-aligned.
 */
export function table(head: string[], rows: string[][], markdown: boolean, left = markdown ? 1 : 2): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    markdown
      ? `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
      : cells.map((c, i) => (i < left ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  const rule = markdown
    ? `|${widths.map((w, i) => (i < left ? "-".repeat(w + 2) : `${"-".repeat(w + 1)}:`)).join("|")}|`
    : widths.map((w) => "-".repeat(w)).join("  ");
  return [line(head), rule, ...rows.map(line)].join("\n");
}

/**
 * The console table: one row per (server, concurrency), medians over rounds, with CPU use and the
 * mean batch size modelport formed ("-" for the naive server).
 */
export function consoleTable(summaries: readonly Summary[]): string {
  const head = [
    "server",
    "conc",
    "req/s",
    "p50 ms",
    "p99 ms",
    "non-2xx",
    "errors",
    "server CPU%",
    "CPU us/req",
    "mean batch",
    "bench CPU%",
    "other CPU%",
  ];
  const rows = summaries.map((s) => [
    s.server,
    String(s.concurrency),
    fmt(s.rps),
    String(s.p50),
    String(s.p99),
    String(s.non2xx),
    String(s.errors + s.timeouts),
    opt(s.serverCpuPct),
    opt(s.serverCpuUsPerRequest),
    opt(s.meanBatchRows),
    String(s.benchCpuPct),
    opt(s.otherCpuPct),
  ]);
  return table(head, rows, false);
}

/** Per-thread CPU of the server processes, one line per point. */
export function threadLines(points: readonly PointResult[]): string {
  const width = Math.max(9, ...points.map((p) => p.server.length));
  return points
    .map((p) => {
      const threads = p.cpu.serverThreads?.map((t) => `${t.name} ${t.pct}%`).join(", ") ?? "n/a";
      return `round ${p.round} ${p.server.padEnd(width)} c=${String(p.concurrency).padEnd(3)} ${threads}`;
    })
    .join("\n");
}

/** Points measured while the rest of the machine was busy, or "" when none. */
export function noiseLine(points: readonly PointResult[]): string {
  const noisy = points.filter((p) => (p.cpu.otherPct ?? 0) > NOISY_OTHER_PCT);
  if (noisy.length === 0) return "";
  const list = noisy.map((p) => `${p.server} c=${p.concurrency} round ${p.round} (${p.cpu.otherPct}%)`);
  return `NOISE: other load above ${NOISY_OTHER_PCT}% of a core during: ${list.join(", ")}`;
}

export function ratioLines(comparisons: readonly Comparison[]): string {
  return comparisons
    .map(
      (c) =>
        `concurrency ${String(c.concurrency).padStart(2)}: requests/s ${c.server}/${c.baseline} = ` +
        `${c.rpsRatio.toFixed(3)}  p99 ${c.server}/${c.baseline} = ${c.p99Ratio.toFixed(3)}  (p50 ${c.p50Ratio.toFixed(3)}` +
        `, server CPU per request ${c.cpuPerRequestRatio?.toFixed(3) ?? "-"})`,
    )
    .join("\n");
}

export function verdictLine(v: Verdict): string {
  if (!v.measured) return `Bar (${v.rule}): not measured (concurrency ${BAR_CONCURRENCY} was not run).`;
  const ratios = `requests/s ratio ${v.rpsRatio?.toFixed(2)}, p99 ratio ${v.p99Ratio?.toFixed(2)}`;
  const line = v.holds
    ? `Bar (${v.rule}): HOLDS, ${ratios}.`
    : `Bar (${v.rule}): MISSED, ${ratios}: ${v.reasons.join("; ")}.`;
  const noise =
    ` UNRELIABLE: in ${v.noisyRounds} of ${v.rounds} round(s), other processes used more than ` +
    `${NOISY_OTHER_PCT}% of a core while concurrency ${BAR_CONCURRENCY} was measured; rerun on a quieter ` +
    `machine${v.rounds < 3 ? " or with --rounds 3" : ""}.`;
  return v.noisy ? line + noise : line;
}

export interface MarkdownInput {
  date: string;
  machine: Machine;
  durationS: number;
  warmupS: number;
  rounds: number;
  logLevel: string;
  summaries: readonly Summary[];
  comparisons: readonly Comparison[];
  verdict: Verdict;
  inProcess: InProcessResult | null;
  commands: string[];
  source: Provenance;
  /** How modelport served the model (servingLine), or null. */
  serving: string | null;
}

/** A section ready to paste into docs/PERFORMANCE.md. */
export function markdown(r: MarkdownInput): string {
  const m = r.machine;
  const rows = r.comparisons.map((c) => {
    const mp = find(r.summaries, "modelport", c.concurrency)!;
    const nv = find(r.summaries, "naive", c.concurrency)!;
    const failed = mp.errors + mp.timeouts + mp.non2xx + nv.errors + nv.timeouts + nv.non2xx;
    return [
      String(c.concurrency),
      fmt(mp.rps),
      fmt(nv.rps),
      c.rpsRatio.toFixed(2),
      String(mp.p50),
      String(nv.p50),
      String(mp.p99),
      String(nv.p99),
      c.p99Ratio.toFixed(2),
      `${opt(mp.serverCpuUsPerRequest)} / ${opt(nv.serverCpuUsPerRequest)}`,
      String(failed),
    ];
  });
  const head = [
    "Concurrency",
    "modelport req/s",
    "naive req/s",
    "req/s ratio",
    "modelport p50 ms",
    "naive p50 ms",
    "modelport p99 ms",
    "naive p99 ms",
    "p99 ratio",
    "server CPU µs/req (modelport / naive)",
    "failed",
  ];
  const rounds =
    r.rounds > 1
      ? ` ${r.rounds} rounds: figures are medians, ratios medians of per-round ratios of back-to-back points.`
      : "";
  const lines = [
    `### Foundation benchmark, ${r.date.slice(0, 10)}`,
    "",
    `Machine: ${m.cpuModel}, ${m.cpus} CPUs, ${m.totalMemoryGiB} GiB RAM, ${m.os}, Node ${m.node}. ` +
      "The load generator (autocannon), the server and its model share those CPUs.",
    "",
    `Workload: churn-tree (30 trees, depth 3), one row per request \`{"rows":[[3,95,4,1,0,20]]}\`, ` +
      `pipelining 1, ${r.warmupS} s warm-up then ${r.durationS} s measured per point; one server running ` +
      `at a time, the two alternating point by point.${rounds} modelport logs at \`${r.logLevel}\` ` +
      "(JSON lines on stdout, read by the bench).",
    "",
    table(head, rows, true),
    "",
    "Ratios are modelport/naive: requests/s above 1 is better, p99 below 1 is better. " +
      "Server CPU µs/req: the server process's CPU time (all threads) per request. " +
      "`failed` = errors + timeouts + non-2xx, both servers.",
    "",
  ];
  const ip = r.inProcess;
  if (ip) {
    lines.push(
      `In-process ceiling (\`session.run\` in a loop, batch 1, no HTTP): ${fmt(ip.callsPerS)} calls/s, ` +
        `p50 ${ip.latencyMs.p50} ms, p99 ${ip.latencyMs.p99} ms.`,
      "",
    );
  }
  const src = r.source;
  const tree =
    src.commit === null
      ? "an unknown commit"
      : `commit ${src.commit}${src.srcChanges ? ` plus ${src.srcChanges} uncommitted file(s) in src/` : ""}`;
  lines.push(
    `**${verdictLine(r.verdict)}**`,
    "",
    `modelport ${src.versions["modelport"]} at ${tree}${r.serving ? `; ${r.serving}` : ""}. ` +
      `onnxruntime-node ${src.versions["onnxruntimeNode"]}, autocannon ${src.versions["autocannon"]}.`,
    "",
    "Servers:",
    "",
    ...r.commands.map((c) => `- \`${c}\``),
  );
  return lines.join("\n");
}
