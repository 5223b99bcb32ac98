// `modelport jobs list|show|cancel|retry|purge`: operate on the job store directly, with the
// server running or not (SQLite in WAL mode takes concurrent readers and writers).
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { loadConfig } from "../config/load.js";
import { jobsSchema } from "../config/schema.js";
import type { JobStatus } from "../jobs/job.js";
import type { JobStore } from "../jobs/job-store.js";
import { jobView } from "../jobs/job-view.js";
import { purgeExpired } from "../jobs/open-job-store.js";
import { retryRefusal } from "../jobs/retry-refusal.js";
import { createBlobStore } from "../storage/create-blob-store.js";
import { parse, UsageError } from "./args.js";
import { createLogger } from "./logger.js";

export const JOBS_HELP = `Usage: modelport jobs <list|show|cancel|retry|purge> [ID] [options]

  list                 newest first: --status S --model M --limit N (default 20) --cursor C
  show ID              one job, with its last error and webhook attempts
  cancel ID            cancel a queued job; a running one is stopped by its server within a lease period
  retry ID             put a failed or canceled job back in the queue with fresh attempts
  purge                delete finished jobs older than --older-than (e.g. 12h, 7d; default: jobs.retentionMs)

Options:
  -c, --config FILE    take the job store (jobs.store, sqlitePath or redisUrl) and jobs.blobs from this config
      --db FILE        a SQLite job store (default .modelport/jobs.db)
      --json           print JSON
`;

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

function parseDuration(text: string): number {
  const m = DURATION.exec(text);
  if (!m) throw new UsageError(`--older-than must look like 30m, 12h or 7d, got '${text}'`);
  return Number(m[1]) * UNIT_MS[m[2]!]!;
}

const JOB_ACTIONS = ["list", "show", "cancel", "retry", "purge"];

export async function jobs(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    config: { type: "string", short: "c" },
    db: { type: "string" },
    status: { type: "string" },
    model: { type: "string" },
    limit: { type: "string" },
    cursor: { type: "string" },
    "older-than": { type: "string" },
    json: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  const [action, id] = positionals;
  if (values.help || !action) {
    process.stdout.write(JOBS_HELP);
    return values.help ? 0 : 2;
  }
  if (!JOB_ACTIONS.includes(action)) {
    throw new UsageError(`unknown jobs action '${action}'; use ${JOB_ACTIONS.join(", ")}`);
  }
  const jobsConfig = values.config ? loadConfig({ file: values.config }).jobs : jobsSchema.parse({});
  let store: JobStore;
  if (jobsConfig.store === "redis" && !values.db) {
    const { RedisJobStore } = await import("../jobs/stores/redis-job-store.js");
    const url = jobsConfig.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
    store = await RedisJobStore.open(url, { prefix: jobsConfig.redisPrefix });
  } else {
    const dbPath = resolve(values.db ?? jobsConfig.sqlitePath);
    if (!existsSync(dbPath)) {
      process.stderr.write(
        `modelport: no job store at ${dbPath} (it is created when the first job is submitted)\n`,
      );
      return 1;
    }
    const { SqliteJobStore } = await import("../jobs/stores/sqlite-job-store.js");
    store = await SqliteJobStore.open(dbPath);
  }
  const print = (value: unknown, text: string) =>
    process.stdout.write(values.json ? `${JSON.stringify(value, null, 2)}\n` : text);
  const needId = () => {
    if (!id) throw new UsageError(`jobs ${action} needs a job ID`);
    return id;
  };
  try {
    switch (action) {
      case "list": {
        const page = await store.list({
          limit: values.limit ? Number(values.limit) : 20,
          ...(values.status ? { status: values.status as JobStatus } : {}),
          ...(values.model ? { model: values.model } : {}),
          ...(values.cursor ? { cursor: values.cursor } : {}),
        });
        const lines = page.jobs.map(
          (j) =>
            `${j.id}  ${j.status.padEnd(9)} ${(j.version === undefined ? j.model : `${j.model}@${j.version}`).padEnd(16)} attempts ${j.attempts}/${j.maxAttempts}  ${new Date(j.createdAt).toISOString()}${j.lastError ? `  ${j.lastError.code}` : ""}\n`,
        );
        print(
          { jobs: page.jobs.map(jobView), next_cursor: page.nextCursor },
          `${lines.join("")}${page.nextCursor ? `more: --cursor ${page.nextCursor}\n` : ""}`,
        );
        return 0;
      }
      case "show": {
        const job = await store.get(needId());
        if (!job) return notFound(id!);
        print(jobView(job), `${JSON.stringify(jobView(job), null, 2)}\n`);
        return 0;
      }
      case "cancel": {
        const job = await store.cancel(needId(), Date.now());
        if (!job) return notFound(id!);
        print(
          jobView(job),
          job.status === "canceled"
            ? `canceled ${job.id}\n`
            : job.cancelRequested
              ? `cancel requested for running job ${job.id}\n`
              : `${job.id} is already ${job.status}\n`,
        );
        return 0;
      }
      case "retry": {
        const current = await store.get(needId());
        if (!current) return notFound(id!);
        const refused = retryRefusal(current);
        if (refused) throw refused;
        const job = await store.retry(current.id, Date.now());
        if (!job) return notFound(id!);
        print(jobView(job), `${job.id} is ${job.status}\n`);
        return 0;
      }
      case "purge": {
        const olderThan = values["older-than"] ? parseDuration(values["older-than"]) : jobsConfig.retentionMs;
        const blobs = createBlobStore(jobsConfig.blobs, process.cwd());
        const n = await purgeExpired(store, blobs, olderThan, createLogger("warn", "json", 2));
        await blobs.close();
        print({ purged: n }, `purged ${n} finished job(s) older than ${olderThan / 1000} s\n`);
        return 0;
      }
      default:
        throw new UsageError(`unknown jobs action '${action}'`);
    }
  } finally {
    await store.close();
  }
}

function notFound(id: string): number {
  process.stderr.write(`modelport: MP_ERR_JOB_NOT_FOUND: no job '${id}'\n`);
  return 1;
}
