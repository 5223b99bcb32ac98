// Plain-text tables and the machine description shared by `modelport bench` and `modelport tune`.
import os from "node:os";
import type { LoadResult } from "./load.js";

export interface Machine {
  os: string;
  arch: string;
  cpus: number;
  cpuModel: string;
  memoryBytes: number;
  node: string;
}

export function machine(): Machine {
  const cpus = os.cpus();
  return {
    os: `${os.type()} ${os.release()}`,
    arch: os.arch(),
    cpus: os.availableParallelism(),
    cpuModel: cpus[0]?.model.trim() ?? "unknown",
    memoryBytes: os.totalmem(),
    node: process.version,
  };
}

/** 1234.5 → "1,235"; 12.345 → "12.3"; null → "-". */
export function fmtNumber(x: number | null): string {
  if (x === null || !Number.isFinite(x)) return "-";
  if (Math.abs(x) >= 100) return Math.round(x).toLocaleString("en-US");
  if (Math.abs(x) >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

/**
 * A table with a header rule. `align` has one letter per column, "l" (labels) or "r" (numbers);
 * columns beyond it are right-aligned.
 */
export function table(head: readonly string[], rows: readonly (readonly string[])[], align = ""): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (align[i] === "l" ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join("  ")
      .trimEnd();
  // A free-text last column (notes) gets a short rule instead of one as long as its longest note.
  const last = head.length - 1;
  const rule = widths
    .map((w, i) =>
      "-".repeat(i === last && align[i] === "l" ? Math.max(head[i]!.length, Math.min(w, 16)) : w),
    )
    .join("  ");
  return [line(head), rule, ...rows.map(line)].join("\n");
}

/** One line summing up a run, for progress output. */
export function resultLine(r: LoadResult): string {
  const problems = r.errors + r.non2xx;
  return (
    `${fmtNumber(r.rps)} req/s, p50 ${fmtNumber(r.latencyMs.p50)} ms, p99 ${fmtNumber(r.latencyMs.p99)} ms` +
    (problems ? `, ${r.errors} errors, ${r.non2xx} non-2xx` : "")
  );
}

/** Status codes outside 2xx and error messages of a run, or "" when there were none. */
export function problemLine(r: LoadResult): string {
  const codes = Object.entries(r.statusCodes)
    .filter(([code]) => !code.startsWith("2"))
    .map(([code, n]) => `${n}× ${code}`);
  const parts = [...codes, ...r.errorMessages.map((m) => `error: ${m}`)];
  return parts.join("; ");
}
