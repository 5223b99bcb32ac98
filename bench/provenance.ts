// What exactly was measured: the git commit of the tree (and whether src/ had uncommitted changes,
// since `npm run bench` builds and measures the working tree), package versions, and modelport's
// own description of the served model (its batching and runner settings).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import type { RunningServer } from "./servers.js";

export interface Provenance {
  commit: string | null;
  /** Uncommitted changes under src/ (files), null when git is unavailable. */
  srcChanges: number | null;
  versions: Record<string, string>;
}

function git(repoRoot: string, args: string[]): string | null {
  try {
    return execFileSync("git", args, {
      cwd: repoRoot,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
  } catch {
    return null;
  }
}

function packageVersion(dir: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { version: string }).version;
  } catch {
    return "unknown";
  }
}

export function provenance(repoRoot: string): Provenance {
  const commit = git(repoRoot, ["rev-parse", "--short", "HEAD"])?.trim() || null;
  const status = git(repoRoot, ["status", "--porcelain", "--", "src"]);
  return {
    commit,
    srcChanges: status === null ? null : status.split("\n").filter((l) => l.trim() !== "").length,
    versions: {
      modelport: packageVersion(repoRoot),
      onnxruntimeNode: packageVersion(path.join(repoRoot, "node_modules/onnxruntime-node")),
      autocannon: packageVersion(path.join(repoRoot, "node_modules/autocannon")),
    },
  };
}

/** GET /v1/models/MODEL from a running modelport: how it serves the model (batching, runner). */
export async function describeModel(server: RunningServer): Promise<Record<string, unknown> | null> {
  try {
    const res = await fetch(`${server.url}/v1/models/${server.modelName}`);
    return res.ok ? ((await res.json()) as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** One line for the report, e.g. "batching on (64 rows, 2 ms), runner worker". */
export function servingLine(description: Record<string, unknown> | null): string | null {
  if (!description) return null;
  const parts: string[] = [];
  const b = description["batching"] as
    | { enabled?: boolean; maxBatchRows?: number; maxDelayMs?: number }
    | undefined;
  if (b)
    parts.push(b.enabled ? `batching on (up to ${b.maxBatchRows} rows, ${b.maxDelayMs} ms)` : "batching off");
  const runner = (description["status"] as { runner?: { placement?: string } } | undefined)?.runner;
  if (runner?.placement) parts.push(`runner placement ${runner.placement}`);
  if (typeof description["threads"] === "number") parts.push(`${description["threads"]} intra-op thread(s)`);
  return parts.length ? parts.join(", ") : null;
}
