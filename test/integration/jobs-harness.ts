// Shared by the jobs hardening tests: a real listening server built from YAML with a job store
// (and blob store) passed in, and a JobStore wrapper around a real store whose methods can be
// made to reject (a store outage) or whose claims can be paused (work that stays queued).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Logger, pino } from "pino";
import { loadConfig } from "../../src/config/load.js";
import { ModelportError } from "../../src/errors.js";
import type { JobStore } from "../../src/jobs/job-store.js";
import { SqliteJobStore } from "../../src/jobs/stores/sqlite-job-store.js";
import { type BuildOptions, buildApp, type ModelportApp } from "../../src/server/app.js";
import type { BlobStore } from "../../src/storage/blob-store.js";
import { testModels } from "../helpers/models.js";

export interface JobsServer {
  url: string;
  server: ModelportApp;
  dir: string;
  close(): Promise<void>;
}

/**
 * Serves the tree and slow test models (or the `models` lines given, already indented) with `jobs`
 * (lines under `jobs:`) and `limits` (lines under `limits:`), in a fresh temporary folder; logs go
 * to `logger` when given, nowhere otherwise.
 */
export async function startJobsServer(
  options: {
    jobs?: string[];
    limits?: string[];
    apiKeys?: string[];
    models?: string[];
    logger?: Logger;
  } & Pick<BuildOptions, "jobStore" | "blobStore"> = {},
): Promise<JobsServer> {
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-jobs-hardening-"));
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      ...(options.apiKeys ? ["server:", `  apiKeys: [${options.apiKeys.join(", ")}]`] : []),
      ...(options.limits ? ["limits:", ...options.limits] : []),
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      ...(options.jobs ?? []),
      "models:",
      ...(options.models ?? [
        `  - {name: tree, path: ${join(models, "churn-tree.onnx")}}`,
        `  - {name: slow, path: ${join(models, "slow.onnx")}}`,
      ]),
    ].join("\n"),
  );
  const config = loadConfig({ file, flags: { port: 0 } });
  const server = buildApp(config, {
    logger: options.logger ?? pino({ level: "silent" }),
    ...(options.jobStore ? { jobStore: options.jobStore } : {}),
    ...(options.blobStore ? { blobStore: options.blobStore } : {}),
  });
  const url = await server.app.listen({ host: "127.0.0.1", port: 0 });
  await server.loadModels();
  return { url, server, dir, close: () => server.close() };
}

/** A JobStore wrapper: methods named in `failing` reject as an unreachable store would. */
export interface FaultyJobStore extends JobStore {
  readonly failing: Set<keyof JobStore>;
  /** While true, claim finds nothing: submitted jobs stay queued. */
  pausedClaims: boolean;
  /** While true, renew calls wait unsent (a stalled process's would): leases lapse. */
  heldRenewals: boolean;
  /** Calls that rejected so far, per method. */
  readonly rejected: Map<string, number>;
  /** Calls made so far, per method. */
  readonly calls: Map<string, number>;
  /**
   * Calls made so far of one method for one job (its first argument): a job running meanwhile
   * (its lease renewals read it) does not count toward another's.
   */
  callsFor(name: keyof JobStore, id: string): number;
}

export function faultyJobStore(real: JobStore): FaultyJobStore {
  const failing = new Set<keyof JobStore>();
  const rejected = new Map<string, number>();
  const calls = new Map<string, number>();
  const byJob = new Map<string, number>();
  const callsFor = (name: string, id: string) => byJob.get(`${name} ${id}`) ?? 0;
  const wrapper = {
    failing,
    rejected,
    calls,
    callsFor,
    pausedClaims: false,
    heldRenewals: false,
  } as FaultyJobStore;
  // A batch method counts as its single one (calls, failing, rejected), once per item, so a test
  // says "complete" whether the queue wrote one result or a group.
  const single: Partial<Record<keyof JobStore, keyof JobStore>> = {
    createMany: "create",
    claimMany: "claim",
    completeMany: "complete",
  };
  for (const name of [
    "createMany",
    "claimMany",
    "completeMany",
    "create",
    "get",
    "state",
    "states",
    "queuedCount",
    "list",
    "claim",
    "renew",
    "complete",
    "fail",
    "release",
    "cancel",
    "markCanceled",
    "retry",
    "recordWebhook",
    "purge",
    "counts",
    "close",
  ] as const) {
    (wrapper as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      const as = single[name] ?? name;
      const items = as === name ? 1 : as === "claim" ? 1 : (args[0] as unknown[]).length;
      calls.set(as, (calls.get(as) ?? 0) + items);
      if (as === "complete" && as !== name)
        for (const c of args[0] as { id: string }[]) byJob.set(`${as} ${c.id}`, callsFor(as, c.id) + 1);
      if (typeof args[0] === "string") byJob.set(`${name} ${args[0]}`, callsFor(name, args[0]) + 1);
      if (name === "states")
        for (const id of args[0] as string[]) byJob.set(`states ${id}`, callsFor("states", id) + 1);
      if (failing.has(as)) {
        rejected.set(as, (rejected.get(as) ?? 0) + items);
        return Promise.reject(
          new ModelportError("MP_ERR_JOB_STORE_UNAVAILABLE", `the job store is down (${as})`),
        );
      }
      if (name === "claim" && wrapper.pausedClaims) return Promise.resolve(undefined);
      if (name === "claimMany" && wrapper.pausedClaims) return Promise.resolve([]);
      const forward = () => (real[name] as (...a: unknown[]) => Promise<unknown>).apply(real, args);
      if (name === "renew" && wrapper.heldRenewals)
        return until(async () => !wrapper.heldRenewals, 120_000, 10).then(forward);
      return forward();
    };
  }
  return wrapper;
}

/** A BlobStore wrapper: methods named in `failing` reject. */
export function faultyBlobStore(real: BlobStore): BlobStore & { failing: Set<keyof BlobStore> } {
  const failing = new Set<keyof BlobStore>();
  const wrapper = { failing } as BlobStore & { failing: Set<keyof BlobStore> };
  for (const name of ["put", "get", "url", "check", "delete", "close"] as const) {
    (wrapper as unknown as Record<string, unknown>)[name] = (...args: unknown[]) =>
      failing.has(name)
        ? Promise.reject(new Error(`the blob store is down (${name})`))
        : (real[name] as (...a: unknown[]) => Promise<unknown>).apply(real, args);
  }
  return wrapper;
}

/** A real SQLite store in a fresh temporary folder. */
export async function tempSqliteStore(): Promise<SqliteJobStore> {
  return SqliteJobStore.open(join(mkdtempSync(join(tmpdir(), "modelport-jobs-store-")), "jobs.db"));
}

/**
 * Records unhandled rejections and uncaught exceptions while installed (node:test would
 * otherwise only report them after the fact): `check()` throws if any arrived.
 */
export function watchProcessFaults(): { faults: unknown[]; check(): void; remove(): void } {
  const faults: unknown[] = [];
  const onFault = (err: unknown) => faults.push(err);
  process.on("unhandledRejection", onFault);
  process.on("uncaughtException", onFault);
  return {
    faults,
    check() {
      if (faults.length) throw new Error(`process faults: ${faults.map(String).join("; ")}`);
    },
    remove() {
      process.off("unhandledRejection", onFault);
      process.off("uncaughtException", onFault);
    },
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `fn` until it returns a truthy value or `timeoutMs` passes (then returns the last value). */
export async function until<T>(fn: () => Promise<T>, timeoutMs = 15_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await fn();
  while (!value && Date.now() < deadline) {
    await sleep(everyMs);
    value = await fn();
  }
  return value;
}
