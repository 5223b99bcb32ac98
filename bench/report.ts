// The benchmark's verdict and its outputs: modelport/naive ratios per concurrency, whether the bar
// holds, the console table, the Markdown table for docs/PERFORMANCE.md, and the machine it ran on.
import os from "node:os";
import type { InProcessResult } from "./in-process.js";
import type { PointResult } from "./load.js";
import { round } from "./stats.js";

export const BAR_CONCURRENCY = 64;
export const BAR_RPS_RATIO = 0.9;
export const BAR_RULE =
  `at concurrency ${BAR_CONCURRENCY}, modelport reaches at least ${BAR_RPS_RATIO * 100}% of the naive ` +
  "server's requests/s with p99 latency no worse (and no errors or non-2xx answers)";

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

export interface Comparison {
  concurrency: number;
  rpsRatio: number; // modelport / naive
  p99Ratio: number; // modelport / naive; above 1 is worse
  p50Ratio: number;
}

export interface Verdict {
  rule: string;
  measured: boolean;
  holds: boolean;
  rpsRatio: number | null;
  p99Ratio: number | null;
  reasons: string[];
}

function point(points: readonly PointResult[], server: string, c: number): PointResult | undefined {
  return points.find((p) => p.server === server && p.concurrency === c);
}

export function compare(points: readonly PointResult[], concurrency: readonly number[]): Comparison[] {
  const out: Comparison[] = [];
  for (const c of concurrency) {
    const m = point(points, "modelport", c);
    const n = point(points, "naive", c);
    if (!m || !n) continue;
    out.push({
      concurrency: c,
      rpsRatio: round(m.rps / n.rps),
      p99Ratio: round(m.latencyMs.p99 / n.latencyMs.p99),
      p50Ratio: round(m.latencyMs.p50 / n.latencyMs.p50),
    });
  }
  return out;
}

export function verdict(points: readonly PointResult[]): Verdict {
  const m = point(points, "modelport", BAR_CONCURRENCY);
  const n = point(points, "naive", BAR_CONCURRENCY);
  if (!m || !n) {
    return {
      rule: BAR_RULE,
      measured: false,
      holds: false,
      rpsRatio: null,
      p99Ratio: null,
      reasons: ["not measured"],
    };
  }
  const reasons: string[] = [];
  const rpsRatio = m.rps / n.rps;
  if (rpsRatio < BAR_RPS_RATIO)
    reasons.push(`requests/s ${fmt(m.rps)} is ${pct(rpsRatio)} of naive's ${fmt(n.rps)} (needs >= 90%)`);
  if (m.latencyMs.p99 > n.latencyMs.p99)
    reasons.push(`p99 ${m.latencyMs.p99} ms is worse than naive's ${n.latencyMs.p99} ms`);
  if (m.errors > 0 || m.non2xx > 0) reasons.push(`${m.errors} errors and ${m.non2xx} non-2xx answers`);
  return {
    rule: BAR_RULE,
    measured: true,
    holds: reasons.length === 0,
    rpsRatio: round(rpsRatio),
    p99Ratio: round(m.latencyMs.p99 / n.latencyMs.p99),
    reasons,
  };
}

const fmt = (x: number) => (x >= 100 ? Math.round(x).toLocaleString("en-US") : String(round(x)));
const pct = (r: number) => `${(r * 100).toFixed(1)}%`;

function table(head: string[], rows: string[][], markdown: boolean): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    markdown
      ? `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
      : cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  const rule = markdown
    ? `|${widths.map((w, i) => (i === 0 ? `${"-".repeat(w + 2)}` : `${"-".repeat(w + 1)}:`)).join("|")}|`
    : widths.map((w) => "-".repeat(w)).join("  ");
  return [line(head), rule, ...rows.map(line)].join("\n");
}

/** The console table: every point, with CPU use. */
export function consoleTable(points: readonly PointResult[]): string {
  const head = [
    "server",
    "conc",
    "req/s",
    "p50 ms",
    "p99 ms",
    "non-2xx",
    "errors",
    "server CPU%",
    "bench CPU%",
    "machine busy%",
  ];
  const rows = points.map((p) => [
    p.server,
    String(p.concurrency),
    fmt(p.rps),
    String(p.latencyMs.p50),
    String(p.latencyMs.p99),
    String(p.non2xx),
    String(p.errors + p.timeouts),
    String(p.cpu.serverPct ?? "-"),
    String(p.cpu.benchPct),
    String(p.cpu.machineBusyPct ?? "-"),
  ]);
  return table(head, rows, false);
}

/** Per-thread CPU of the server processes, one line per point. */
export function threadLines(points: readonly PointResult[]): string {
  return points
    .map((p) => {
      const threads = p.cpu.serverThreads?.map((t) => `${t.name} ${t.pct}%`).join(", ") ?? "n/a";
      return `${p.server.padEnd(9)} c=${String(p.concurrency).padEnd(3)} ${threads}`;
    })
    .join("\n");
}

export function ratioLines(comparisons: readonly Comparison[]): string {
  return comparisons
    .map(
      (c) =>
        `concurrency ${String(c.concurrency).padStart(2)}: requests/s modelport/naive = ${c.rpsRatio.toFixed(3)}` +
        `  p99 modelport/naive = ${c.p99Ratio.toFixed(3)}  (p50 ${c.p50Ratio.toFixed(3)})`,
    )
    .join("\n");
}

export function verdictLine(v: Verdict): string {
  if (!v.measured) return `Bar (${v.rule}): not measured (concurrency ${BAR_CONCURRENCY} was not run).`;
  return v.holds
    ? `Bar HOLDS: ${v.rule}. (requests/s ratio ${v.rpsRatio}, p99 ratio ${v.p99Ratio})`
    : `Bar MISSED: ${v.rule}. ${v.reasons.join("; ")}.`;
}

export interface MarkdownInput {
  date: string;
  machine: Machine;
  durationS: number;
  warmupS: number;
  logLevel: string;
  points: readonly PointResult[];
  comparisons: readonly Comparison[];
  verdict: Verdict;
  inProcess: InProcessResult | null;
  commands: string[];
}

/** A section ready to paste into docs/PERFORMANCE.md. */
export function markdown(r: MarkdownInput): string {
  const m = r.machine;
  const rows = r.comparisons.map((c) => {
    const mp = point(r.points, "modelport", c.concurrency)!;
    const nv = point(r.points, "naive", c.concurrency)!;
    const failed = mp.errors + mp.timeouts + mp.non2xx + nv.errors + nv.timeouts + nv.non2xx;
    return [
      String(c.concurrency),
      fmt(mp.rps),
      fmt(nv.rps),
      c.rpsRatio.toFixed(2),
      String(mp.latencyMs.p50),
      String(nv.latencyMs.p50),
      String(mp.latencyMs.p99),
      String(nv.latencyMs.p99),
      c.p99Ratio.toFixed(2),
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
    "failed",
  ];
  const ip = r.inProcess;
  const lines = [
    `### Foundation benchmark, ${r.date.slice(0, 10)}`,
    "",
    `Machine: ${m.cpuModel}, ${m.cpus} CPUs, ${m.totalMemoryGiB} GiB RAM, ${m.os}, Node ${m.node}. ` +
      "Load generator (autocannon, same machine), server and model share those CPUs.",
    "",
    `Workload: churn-tree (30 trees, depth 3), one row per request \`{"rows":[[3,95,4,1,0,20]]}\`, ` +
      `pipelining 1, ${r.warmupS} s warm-up then ${r.durationS} s measured per point; one server under load ` +
      `at a time. modelport logs at \`${r.logLevel}\` (JSON, one line per request at info).`,
    "",
    table(head, rows, true),
    "",
    "Ratios are modelport/naive: requests/s above 1 is better, p99 below 1 is better. " +
      "`failed` = errors + timeouts + non-2xx, both servers.",
    "",
  ];
  if (ip) {
    lines.push(
      `In-process ceiling (\`session.run\` in a loop, batch 1, no HTTP): ${fmt(ip.callsPerS)} calls/s, ` +
        `p50 ${ip.latencyMs.p50} ms, p99 ${ip.latencyMs.p99} ms.`,
      "",
    );
  }
  lines.push(`**${verdictLine(r.verdict)}**`, "", "Servers:", "", ...r.commands.map((c) => `- \`${c}\``));
  return lines.join("\n");
}
