// Shared pieces of the chaos tests: a config around the latency handler (each job doubles its
// input and logs each execution with the pid that ran it), job submission that records which
// submissions were accepted (202), waiting for every accepted job to be final, and the one
// property every chaos test asserts: nothing accepted is lost (each accepted job ends succeeded
// with its own result).
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/server.js";

export const HANDLER = join(REPO_ROOT, "dist", "examples", "handlers", "latency-handler.js");

/** A modelport YAML with the `latency` model (waitMs per job, executions logged) and these jobs: lines. */
export function writeConfig(
  file: string,
  opts: { jobs: string[]; executionsLog: string; waitMs?: number; server?: string[] },
): string {
  writeFileSync(
    file,
    [
      ...(opts.server ? ["server:", ...opts.server.map((l) => `  ${l}`)] : []),
      "jobs:",
      ...opts.jobs.map((l) => `  ${l}`),
      "models:",
      "  - name: latency",
      "    backend: custom",
      `    path: ${HANDLER}`,
      "    options:",
      `      waitMs: ${opts.waitMs ?? 20}`,
      `      executionsLog: ${opts.executionsLog}`,
      "",
    ].join("\n"),
  );
  return file;
}

export interface Submission {
  input: number;
  status: number;
  id?: string;
  code?: string;
  /** A network error instead of an answer. */
  error?: string;
}

/** Submits one job whose input is `input`; a network error is recorded as status 0. */
export async function submit(
  base: string,
  input: number,
  extra: Record<string, unknown> = {},
): Promise<Submission> {
  try {
    // A hang is a failure too: no answer within 30 s is recorded as one.
    const res = await fetch(`${base}/v1/models/latency/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rows: [[input]], ...extra }),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    let body: { id?: string; error?: { code?: string } } | undefined;
    try {
      body = JSON.parse(text);
    } catch {}
    return {
      input,
      status: res.status,
      ...(res.status === 202 && body?.id ? { id: body.id } : {}),
      ...(body?.error?.code ? { code: body.error.code } : {}),
    };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    return { input, status: 0, error: `${e.message} ${e.cause?.code ?? e.cause?.message ?? ""}` };
  }
}

export interface FinalJob {
  status: string;
  attempts: number;
  last_error?: { code: string; message: string } | null;
  webhook?: { attempts: number; last_error?: string; delivered_at?: string };
}

/** Polls until every job is final (or the deadline); returns what was seen last for each. */
export async function waitFinal(
  base: string,
  ids: string[],
  timeoutMs = 60_000,
  isDone: (j: FinalJob) => boolean = (j) => ["succeeded", "failed", "canceled"].includes(j.status),
): Promise<Map<string, FinalJob>> {
  const last = new Map<string, FinalJob>();
  const done = new Set<string>();
  const deadline = Date.now() + timeoutMs;
  while (done.size < ids.length && Date.now() < deadline) {
    for (const id of ids) {
      if (done.has(id)) continue;
      try {
        const res = await fetch(`${base}/v1/jobs/${id}`);
        if (res.status !== 200) continue;
        const job = (await res.json()) as FinalJob;
        last.set(id, job);
        if (isDone(job)) done.add(id);
      } catch {
        // the server may be momentarily unable to answer during the fault: ask again
      }
    }
    if (done.size < ids.length) await sleep(200);
  }
  return last;
}

/**
 * Nothing accepted is lost: every 202-accepted submission is a job that ended `succeeded`, and its
 * one result is its own input doubled.
 */
export async function assertNothingLost(
  base: string,
  accepted: Submission[],
  timeoutMs = 60_000,
): Promise<void> {
  const ids = accepted.map((s) => s.id!);
  const final = await waitFinal(base, ids, timeoutMs);
  const notSucceeded = accepted
    .filter((s) => final.get(s.id!)?.status !== "succeeded")
    .map((s) => ({ input: s.input, id: s.id, job: final.get(s.id!) ?? "never seen" }));
  assert.deepEqual(notSucceeded, [], "every accepted job ends succeeded");
  for (const s of accepted) {
    const res = await fetch(`${base}/v1/jobs/${s.id}/result`);
    assert.equal(res.status, 200, `result of job ${s.input}`);
    const body = (await res.json()) as { outputs: { y: number[][] } };
    assert.equal(body.outputs.y[0]![0], 2 * s.input, `job ${s.input} has its own result`);
  }
}

/** Executions per input (from the handler's log): input → pids, in order. */
export function executions(log: string): Map<number, number[]> {
  const runs = new Map<number, number[]>();
  if (!existsSync(log)) return runs;
  for (const line of readFileSync(log, "utf8").split("\n")) {
    if (!line) continue;
    const [input, pid] = line.split(" ").map(Number) as [number, number];
    runs.set(input, [...(runs.get(input) ?? []), pid]);
  }
  return runs;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `cond()` is true, polling every 50 ms; fails with `what` after timeoutMs. */
export async function until(
  cond: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for: ${what}`);
    await sleep(50);
  }
}

/** True when something accepts TCP connections on 127.0.0.1:port. */
export function reachable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1", () => {
      s.destroy();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });
}

/** True when `redis-server` can be run here (the Redis chaos tests skip visibly otherwise). */
export function haveRedisServer(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

/** A redis-server of our own on `port` (AOF on, in `dir`), so restarting it keeps the data. */
export async function startRedis(port: number, dir: string): Promise<ChildProcess> {
  const proc = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--dir", dir],
    { stdio: "ignore" },
  );
  await until(() => reachable(port), `redis-server on port ${port}`, 15_000);
  return proc;
}

/** SIGTERM (Redis's graceful SHUTDOWN: the AOF is flushed) and wait for the exit. */
export async function stopProcess(proc: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill(signal);
  await once(proc, "exit");
}
