// The SQLite JobStore: one embedded file, shared safely by every process that opens it.
//
// - WAL journal with synchronous=NORMAL: a committed transaction survives a crash of the process;
//   an OS crash or power loss may lose the last transactions (never corrupts the file).
// - Every operation that reads then writes runs in one BEGIN IMMEDIATE transaction, so it holds
//   the write lock from its first read: two workers (threads of this process or other processes)
//   can never be handed the same job, and an idempotency key can never create two jobs.
// - The clock is never read here: every time comes in as an argument.
// - better-sqlite3 is synchronous, so a statement waiting for another process's write lock would
//   stall the whole event loop: the busy timeout is a few ms, and a store call that finds the
//   database locked retries asynchronously with backoff (up to busyRetryMs), then fails with
//   MP_ERR_JOB_STORE_UNAVAILABLE.
import type Database from "better-sqlite3";
import { isModelportError, ModelportError } from "../../errors.js";
import { ensurePrivateFile } from "../../private-files.js";
import { openSqlite } from "../../sqlite.js";
import {
  FINAL_STATUSES,
  type FinishedJob,
  type Job,
  type JobError,
  type JobStatus,
  type NewJob,
} from "../job.js";
import type { CompleteResult, CreateResult, JobState, JobStore, ListPage, ListQuery } from "../job-store.js";
import {
  DEFAULT_IDEMPOTENCY_TTL_MS,
  decodeCursor,
  encodeCursor,
  jobFromFields,
  listLimit,
  PURGE_BATCH,
  summaryOf,
} from "./stored-job.js";

/** A row's column for a Job field: createdAt → created_at. */
const column = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const toJob = (row: JobRow) => jobFromFields((k) => row[column(k) as keyof JobRow]);

const SCHEMA_VERSION = 1;

export interface SqliteJobStoreOptions {
  /**
   * How long one statement waits, blocking, for another process's write lock (ms); default 5.
   * Keep it a few ms: the wait blocks the event loop.
   */
  busyTimeoutMs?: number;
  /** How long a store call keeps retrying, without blocking, while the database is locked (ms); default 5000. */
  busyRetryMs?: number;
}

const DEFAULT_BUSY_TIMEOUT_MS = 5;
const DEFAULT_BUSY_RETRY_MS = 5000;
/** Backoff between retries on a locked database: doubles from the first to the last. */
const BUSY_BACKOFF_FIRST_MS = 2;
const BUSY_BACKOFF_MAX_MS = 50;

/** The columns a list reads: everything but input and result. */
const SUMMARY_COLUMNS = `id, model, status, priority, metadata, created_at, updated_at, started_at, finished_at,
  attempts, max_attempts, run_at, timeout_ms, last_error, lease_owner, lease_expires_at, cancel_requested,
  result_key, result_bytes, idempotency_key, request_hash, idempotency_expires_at, webhook, owner, version`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** SQLITE_BUSY and SQLITE_LOCKED (and their extended codes): another connection holds a lock. */
function isLocked(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"));
}

interface JobRow {
  id: string;
  model: string;
  status: JobStatus;
  priority: number;
  input: string;
  metadata: string | null;
  created_at: number;
  updated_at: number;
  started_at: number | null;
  finished_at: number | null;
  attempts: number;
  max_attempts: number;
  run_at: number;
  timeout_ms: number;
  last_error: string | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  cancel_requested: number;
  result: string | null;
  result_key: string | null;
  result_bytes: number | null;
  idempotency_key: string | null;
  request_hash: string | null;
  idempotency_expires_at: number | null;
  webhook: string | null;
  owner: string | null;
  trace: string | null;
  version: string | null;
}

interface KeyRow {
  job_id: string;
  request_hash: string | null;
  expires_at: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  model TEXT NOT NULL,
  status TEXT NOT NULL,
  priority INTEGER NOT NULL,
  input TEXT NOT NULL,
  metadata TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER,
  attempts INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  run_at INTEGER NOT NULL,
  timeout_ms INTEGER NOT NULL,
  last_error TEXT,
  lease_owner TEXT,
  lease_expires_at INTEGER,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  result TEXT,
  result_key TEXT,
  result_bytes INTEGER,
  idempotency_key TEXT,
  request_hash TEXT,
  idempotency_expires_at INTEGER,
  webhook TEXT,
  owner TEXT,
  trace TEXT,
  version TEXT
);
-- claim: per model and status in claim order; run_at rides along so the backoff filter needs no
-- table lookup (it sits after the order columns so the order comes straight from the index).
CREATE INDEX IF NOT EXISTS jobs_claim ON jobs (model, status, priority DESC, created_at, id, run_at);
-- list: newest first, id breaking ties (the cursor is (created_at, id)).
CREATE INDEX IF NOT EXISTS jobs_list ON jobs (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_list_status ON jobs (status, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_list_model ON jobs (model, created_at DESC, id DESC);
-- a key's own jobs: its list (optionally by status) and its count of queued and running ones.
CREATE INDEX IF NOT EXISTS jobs_list_owner ON jobs (owner, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_owner_status ON jobs (owner, status, created_at DESC, id DESC);
-- purge: only final jobs have finished_at.
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
-- Idempotency keys: at most one row per key, pointing at the job it protects. A key past
-- expires_at no longer matches; reusing it replaces the row.
CREATE TABLE IF NOT EXISTS idempotency_keys (
  key TEXT PRIMARY KEY,
  job_id TEXT NOT NULL,
  request_hash TEXT,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_keys_expiry ON idempotency_keys (expires_at);
CREATE INDEX IF NOT EXISTS idempotency_keys_job ON idempotency_keys (job_id);
`;

const INSERT_JOB = `INSERT INTO jobs (id, model, status, priority, input, metadata, created_at, updated_at,
  attempts, max_attempts, run_at, timeout_ms, idempotency_key, request_hash, idempotency_expires_at, webhook, owner, trace, version)
  VALUES (@id, @model, 'queued', @priority, @input, @metadata, @now, @now,
  0, @maxAttempts, @now, @timeoutMs, @idempotencyKey, @requestHash, @idempotencyExpiresAt, @webhook, @owner, @trace, @version)`;

/** A finished record: succeeded at once, one attempt, never claimable. */
const INSERT_FINISHED = `INSERT INTO jobs (id, model, status, priority, input, metadata, created_at, updated_at,
  started_at, finished_at, attempts, max_attempts, run_at, timeout_ms, result, result_bytes, owner, trace, version)
  VALUES (@id, @model, 'succeeded', 0, @input, @metadata, @now, @now,
  @now, @now, 1, 1, @now, 0, @result, @resultBytes, @owner, @trace, @version)`;

/** Columns added after schema 1 was released: added in place when missing (see the constructor). */
const ADDED_COLUMNS: readonly (readonly [string, string])[] = [
  ["owner", "TEXT"],
  ["trace", "TEXT"],
  ["version", "TEXT"],
];

const CLEAR_LEASE = "lease_owner = NULL, lease_expires_at = NULL";
const HELD = "id = ? AND status = 'running' AND lease_owner = ?";

type Stmt = Database.Statement<unknown[], unknown>;

export class SqliteJobStore implements JobStore {
  readonly path: string;
  #db: Database.Database;
  #closed = false;
  readonly #busyRetryMs: number;
  #stmts = new Map<string, Stmt>();
  #tx: {
    create: (job: NewJob, now: number) => CreateResult;
    claim: (worker: string, models: readonly string[], leaseMs: number, now: number) => Job | undefined;
    cancel: (id: string, now: number) => Job | undefined;
    retry: (id: string, now: number) => Job | undefined;
    purge: (before: number, limit: number) => Job[];
    remove: (id: string) => Job | undefined;
  };

  /** Opens (creating the folder and file on first use) the store at `path`. */
  static async open(path: string, options: SqliteJobStoreOptions = {}): Promise<SqliteJobStore> {
    // Opening writes the schema: while another process holds the lock, wait without blocking.
    const deadline = performance.now() + (options.busyRetryMs ?? DEFAULT_BUSY_RETRY_MS);
    let wait = BUSY_BACKOFF_FIRST_MS;
    for (;;) {
      try {
        return new SqliteJobStore(path, options);
      } catch (err) {
        const locked = isModelportError(err) && isLocked({ code: err.details?.sqliteCode });
        if (!locked || performance.now() + wait > deadline) throw err;
        await sleep(wait);
        wait = Math.min(wait * 2, BUSY_BACKOFF_MAX_MS);
      }
    }
  }

  constructor(path: string, options: SqliteJobStoreOptions = {}) {
    this.path = path;
    const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
    this.#busyRetryMs = options.busyRetryMs ?? DEFAULT_BUSY_RETRY_MS;
    let db: Database.Database | undefined;
    try {
      // Created 0600 before SQLite opens it (its -wal and -shm take the file's mode), in a folder
      // made 0700 when missing: jobs hold what tenants sent and got.
      if (path !== ":memory:" && !path.startsWith("file:")) ensurePrivateFile(path);
      db = openSqlite(path, { timeout: busyTimeoutMs });
      db.pragma(`busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = NORMAL");
      db.pragma("foreign_keys = OFF");
      db.transaction(() => {
        const version = db!.pragma("user_version", { simple: true }) as number;
        if (version > SCHEMA_VERSION) {
          throw new Error(
            `the job database was written by a newer modelport (schema ${version}, this one knows ${SCHEMA_VERSION})`,
          );
        }
        // Columns added since schema 1, nullable, so a database written before them opens as
        // is and an older modelport sharing the file still reads and writes it (no version bump).
        // Added before SCHEMA runs: its indexes name them.
        const columns = new Set((db!.pragma("table_info(jobs)") as { name: string }[]).map((c) => c.name));
        if (columns.size > 0)
          for (const [name, type] of ADDED_COLUMNS)
            if (!columns.has(name)) db!.exec(`ALTER TABLE jobs ADD COLUMN ${name} ${type}`);
        db!.exec(SCHEMA);
        if (version < SCHEMA_VERSION) db!.pragma(`user_version = ${SCHEMA_VERSION}`);
      }).immediate();
    } catch (err) {
      try {
        db?.close();
      } catch {
        // already failing: the open error is the one to report
      }
      throw new ModelportError(
        "MP_ERR_JOB_STORE_UNAVAILABLE",
        `cannot open the job database ${path}: ${(err as Error).message}; check that the folder is writable (jobs.sqlitePath)`,
        { path, sqliteCode: (err as { code?: unknown }).code },
      );
    }
    this.#db = db;
    this.#tx = {
      create: this.#wrapTx((job: NewJob, now: number) => this.#create(job, now)),
      claim: this.#wrapTx((worker: string, models: readonly string[], leaseMs: number, now: number) =>
        this.#claim(worker, models, leaseMs, now),
      ),
      cancel: this.#wrapTx((id: string, now: number) => this.#cancel(id, now)),
      retry: this.#wrapTx((id: string, now: number) => this.#retry(id, now)),
      purge: this.#wrapTx((before: number, limit: number) => this.#purge(before, limit)),
      remove: this.#wrapTx((id: string) => this.#remove(id)),
    };
  }

  async create(job: NewJob, now: number): Promise<CreateResult> {
    // Without an idempotency key, creating is one INSERT: atomic on its own.
    return this.#run(() =>
      job.idempotencyKey === undefined ? this.#create(job, now) : this.#tx.create(job, now),
    );
  }

  async record(job: FinishedJob, now: number): Promise<Job> {
    return this.#run(() => {
      try {
        this.#stmt(INSERT_FINISHED).run({
          id: job.id,
          model: job.model,
          input: job.input,
          metadata: job.metadata === undefined ? null : JSON.stringify(job.metadata),
          now,
          result: job.result,
          resultBytes: Buffer.byteLength(job.result, "utf8"),
          owner: job.owner ?? null,
          trace: job.trace === undefined ? null : JSON.stringify(job.trace),
          version: job.version ?? null,
        });
      } catch (err) {
        if ((err as { code?: string }).code === "SQLITE_CONSTRAINT_PRIMARYKEY")
          throw new ModelportError("MP_ERR_SERVER_INTERNAL", `a job with id ${job.id} already exists`);
        throw err;
      }
      return this.#get(job.id)!;
    });
  }

  async remove(id: string): Promise<Job | undefined> {
    return this.#run(() => this.#tx.remove(id));
  }

  async get(id: string): Promise<Job | undefined> {
    return this.#run(() => this.#get(id));
  }

  async state(id: string): Promise<JobState | undefined> {
    return this.#run(() => {
      const row = this.#stmt("SELECT status, updated_at FROM jobs WHERE id = ?").get(id) as
        | { status: JobStatus; updated_at: number }
        | undefined;
      return row ? { status: row.status, updatedAt: row.updated_at } : undefined;
    });
  }

  async queuedCount(model: string): Promise<number> {
    return this.#run(
      () =>
        (
          this.#stmt("SELECT COUNT(*) AS n FROM jobs WHERE model = ? AND status = 'queued'").get(model) as {
            n: number;
          }
        ).n,
    );
  }

  async list(query: ListQuery): Promise<ListPage> {
    return this.#run(() => this.#list(query));
  }

  async activeCount(owner: string): Promise<number> {
    return this.#run(
      () =>
        (
          this.#stmt(
            "SELECT count(*) AS n FROM jobs WHERE owner = ? AND status IN ('queued', 'running')",
          ).get(owner) as { n: number }
        ).n,
    );
  }

  async claim(
    worker: string,
    models: readonly string[],
    leaseMs: number,
    now: number,
  ): Promise<Job | undefined> {
    if (models.length === 0) return undefined;
    return this.#run(() => this.#tx.claim(worker, models, leaseMs, now));
  }

  async renew(id: string, worker: string, leaseMs: number, now: number): Promise<boolean> {
    return this.#run(
      () =>
        this.#stmt(`UPDATE jobs SET lease_expires_at = ?, updated_at = ? WHERE ${HELD}`).run(
          now + leaseMs,
          now,
          id,
          worker,
        ).changes === 1,
    );
  }

  async complete(id: string, worker: string, result: CompleteResult, now: number): Promise<boolean> {
    return this.#run(
      () =>
        this.#stmt(
          `UPDATE jobs SET status = 'succeeded', result = ?, result_key = ?, result_bytes = ?,
            finished_at = ?, updated_at = ?, ${CLEAR_LEASE} WHERE ${HELD}`,
        ).run(result.result ?? null, result.resultKey ?? null, result.resultBytes, now, now, id, worker)
          .changes === 1,
    );
  }

  async fail(
    id: string,
    worker: string,
    error: JobError,
    retryAt: number | undefined,
    now: number,
  ): Promise<boolean> {
    const lastError = JSON.stringify({ code: error.code, message: error.message });
    return this.#run(() =>
      retryAt === undefined
        ? this.#stmt(
            `UPDATE jobs SET status = 'failed', last_error = ?, finished_at = ?, updated_at = ?, ${CLEAR_LEASE}
              WHERE ${HELD}`,
          ).run(lastError, now, now, id, worker).changes === 1
        : this.#stmt(
            `UPDATE jobs SET status = 'queued', last_error = ?, run_at = ?, updated_at = ?, ${CLEAR_LEASE}
              WHERE ${HELD}`,
          ).run(lastError, retryAt, now, id, worker).changes === 1,
    );
  }

  async release(id: string, worker: string, now: number): Promise<boolean> {
    // The attempt is given back: a job drained at shutdown does not lose one of its attempts.
    return this.#run(
      () =>
        this.#stmt(
          `UPDATE jobs SET status = 'queued', attempts = MAX(attempts - 1, 0), updated_at = ?, ${CLEAR_LEASE}
            WHERE ${HELD}`,
        ).run(now, id, worker).changes === 1,
    );
  }

  async cancel(id: string, now: number): Promise<Job | undefined> {
    return this.#run(() => this.#tx.cancel(id, now));
  }

  async markCanceled(id: string, worker: string, now: number): Promise<boolean> {
    return this.#run(
      () =>
        this.#stmt(
          `UPDATE jobs SET status = 'canceled', finished_at = ?, updated_at = ?, ${CLEAR_LEASE} WHERE ${HELD}`,
        ).run(now, now, id, worker).changes === 1,
    );
  }

  async retry(id: string, now: number): Promise<Job | undefined> {
    return this.#run(() => this.#tx.retry(id, now));
  }

  async recordWebhook(id: string, state: NonNullable<Job["webhook"]>): Promise<void> {
    await this.#run(() =>
      this.#stmt("UPDATE jobs SET webhook = ? WHERE id = ?").run(JSON.stringify(state), id),
    );
  }

  async purge(before: number): Promise<Job[]> {
    // One store call per batch: a retry on a locked database never repeats a committed batch.
    const purged: Job[] = [];
    for (;;) {
      const batch = await this.#run(() => this.#tx.purge(before, PURGE_BATCH));
      purged.push(...batch);
      if (batch.length < PURGE_BATCH) return purged;
    }
  }

  async counts(): Promise<Record<JobStatus, number>> {
    return this.#run(() => {
      const counts: Record<JobStatus, number> = {
        queued: 0,
        running: 0,
        succeeded: 0,
        failed: 0,
        canceled: 0,
      };
      const rows = this.#stmt("SELECT status, COUNT(*) AS n FROM jobs GROUP BY status").all() as {
        status: JobStatus;
        n: number;
      }[];
      for (const row of rows) if (row.status in counts) counts[row.status] = row.n;
      return counts;
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stmts.clear();
    try {
      this.#db.close();
    } catch {
      // closing twice or after a failure: nothing left to release
    }
  }

  // --- transactions (run inside BEGIN IMMEDIATE) ---

  #create(job: NewJob, now: number): CreateResult {
    let expiresAt: number | null = null;
    if (job.idempotencyKey !== undefined) {
      const key = this.#stmt(
        "SELECT job_id, request_hash, expires_at FROM idempotency_keys WHERE key = ?",
      ).get(job.idempotencyKey) as KeyRow | undefined;
      if (key && key.expires_at > now) {
        const existing = this.#get(key.job_id);
        if (existing) {
          if ((key.request_hash ?? undefined) !== job.requestHash) {
            throw new ModelportError(
              "MP_ERR_JOB_IDEMPOTENCY_CONFLICT",
              `the Idempotency-Key ${JSON.stringify(job.idempotencyKey)} was already used with a different request (job ${existing.id}); use a new key for a new request`,
              { jobId: existing.id },
            );
          }
          return { job: existing, created: false };
        }
      }
      expiresAt = now + (job.idempotencyTtlMs ?? DEFAULT_IDEMPOTENCY_TTL_MS);
    }
    const webhook =
      job.callbackUrl === undefined ? null : JSON.stringify({ url: job.callbackUrl, attempts: 0 });
    const metadata = job.metadata === undefined ? null : JSON.stringify(job.metadata);
    try {
      this.#stmt(INSERT_JOB).run({
        id: job.id,
        model: job.model,
        priority: job.priority ?? 0,
        input: job.input,
        metadata,
        now,
        maxAttempts: job.maxAttempts,
        timeoutMs: job.timeoutMs,
        idempotencyKey: job.idempotencyKey ?? null,
        requestHash: job.requestHash ?? null,
        idempotencyExpiresAt: expiresAt,
        webhook,
        owner: job.owner ?? null,
        trace: job.trace === undefined ? null : JSON.stringify(job.trace),
        version: job.version ?? null,
      });
    } catch (err) {
      if ((err as { code?: string }).code === "SQLITE_CONSTRAINT_PRIMARYKEY") {
        throw new ModelportError("MP_ERR_SERVER_INTERNAL", `a job with id ${job.id} already exists`);
      }
      throw err;
    }
    if (job.idempotencyKey !== undefined && expiresAt !== null) {
      this.#stmt(
        "INSERT OR REPLACE INTO idempotency_keys (key, job_id, request_hash, expires_at) VALUES (?, ?, ?, ?)",
      ).run(job.idempotencyKey, job.id, job.requestHash ?? null, expiresAt);
    }
    const created: Job = {
      id: job.id,
      model: job.model,
      ...(job.version !== undefined ? { version: job.version } : {}),
      status: "queued",
      priority: job.priority ?? 0,
      input: job.input,
      createdAt: now,
      updatedAt: now,
      attempts: 0,
      maxAttempts: job.maxAttempts,
      runAt: now,
      timeoutMs: job.timeoutMs,
    };
    // What get() will return: the metadata as stored (JSON), not the caller's object.
    if (metadata !== null) created.metadata = JSON.parse(metadata) as Record<string, unknown>;
    if (job.idempotencyKey !== undefined) created.idempotencyKey = job.idempotencyKey;
    if (job.requestHash !== undefined) created.requestHash = job.requestHash;
    if (expiresAt !== null) created.idempotencyExpiresAt = expiresAt;
    if (job.callbackUrl !== undefined) created.webhook = { url: job.callbackUrl, attempts: 0 };
    if (job.owner !== undefined) created.owner = job.owner;
    if (job.trace !== undefined) created.trace = { ...job.trace };
    return { job: created, created: true };
  }

  #claim(worker: string, models: readonly string[], leaseMs: number, now: number): Job | undefined {
    // One indexed LIMIT 1 probe per model and state (claim order straight from jobs_claim), then
    // the best of those few candidates; a lapsed lease whose job has no attempt left ends it
    // failed and the search goes on.
    const queued = this.#stmt(
      `SELECT * FROM jobs WHERE model = ? AND status = 'queued' AND run_at <= ?
        ORDER BY priority DESC, created_at, id LIMIT 1`,
    );
    const lapsed = this.#stmt(
      `SELECT * FROM jobs WHERE model = ? AND status = 'running' AND lease_expires_at <= ?
        ORDER BY priority DESC, created_at, id LIMIT 1`,
    );
    for (;;) {
      let best: JobRow | undefined;
      for (const model of new Set(models)) {
        for (const stmt of [queued, lapsed]) {
          const row = stmt.get(model, now) as JobRow | undefined;
          if (row && (!best || before(row, best))) best = row;
        }
      }
      if (!best) return undefined;
      if (best.status === "running") {
        if (best.cancel_requested) {
          // Its worker died after a cancel was asked for: the job ends canceled, not rerun.
          this.#stmt(
            `UPDATE jobs SET status = 'canceled', finished_at = ?, updated_at = ?, ${CLEAR_LEASE} WHERE id = ?`,
          ).run(now, now, best.id);
          continue;
        }
        if (best.attempts + 1 > best.max_attempts) {
          const lastError: JobError = {
            code: "MP_ERR_RUNNER_CRASHED",
            message: `the worker holding the lease stopped (${best.lease_owner ?? "unknown worker"}, lease lapsed at ${best.lease_expires_at}) and the job has no attempt left (attempt ${best.attempts} of ${best.max_attempts})`,
          };
          this.#stmt(
            `UPDATE jobs SET status = 'failed', last_error = ?, finished_at = ?, updated_at = ?, ${CLEAR_LEASE}
              WHERE id = ?`,
          ).run(JSON.stringify(lastError), now, now, best.id);
          continue;
        }
      }
      const row = this.#stmt(
        `UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_owner = ?, lease_expires_at = ?,
          started_at = ?, updated_at = ? WHERE id = ? RETURNING *`,
      ).get(worker, now + leaseMs, now, now, best.id) as JobRow;
      return toJob(row);
    }
  }

  #cancel(id: string, now: number): Job | undefined {
    const job = this.#get(id);
    if (!job) return undefined;
    if (job.status === "queued") {
      this.#stmt(
        `UPDATE jobs SET status = 'canceled', finished_at = ?, updated_at = ?, ${CLEAR_LEASE} WHERE id = ?`,
      ).run(now, now, id);
    } else if (job.status === "running") {
      if (job.cancelRequested) return job;
      this.#stmt("UPDATE jobs SET cancel_requested = 1, updated_at = ? WHERE id = ?").run(now, id);
    } else {
      return job;
    }
    return this.#get(id);
  }

  #retry(id: string, now: number): Job | undefined {
    const job = this.#get(id);
    if (!job) return undefined;
    if (job.status !== "failed" && job.status !== "canceled") return job;
    // lastError stays as the record of why it ended; the result of the old run, if any, goes.
    this.#stmt(
      `UPDATE jobs SET status = 'queued', attempts = 0, run_at = ?, updated_at = ?, finished_at = NULL,
        cancel_requested = 0, result = NULL, result_key = NULL, result_bytes = NULL, ${CLEAR_LEASE}
        WHERE id = ?`,
    ).run(now, now, id);
    return this.#get(id);
  }

  /** One batch of purge: at most `limit` jobs, so the write lock is never held for long. */
  #purge(before: number, limit: number): Job[] {
    // finished_at is set only on final jobs (retry clears it), so jobs_finished finds them all.
    const rows = (
      this.#stmt(
        "SELECT * FROM jobs INDEXED BY jobs_finished WHERE finished_at IS NOT NULL AND finished_at < ? LIMIT ?",
      ).all(before, limit) as JobRow[]
    ).filter((row) => FINAL_STATUSES.includes(row.status));
    const deleteJob = this.#stmt("DELETE FROM jobs WHERE id = ?");
    const deleteKeys = this.#stmt("DELETE FROM idempotency_keys WHERE job_id = ?");
    for (const row of rows) {
      deleteJob.run(row.id);
      deleteKeys.run(row.id);
    }
    // Keys past their expiry already match nothing; their rows go too.
    this.#stmt("DELETE FROM idempotency_keys WHERE expires_at < ?").run(before);
    return rows.map(toJob);
  }

  #remove(id: string): Job | undefined {
    const job = this.#get(id);
    if (!job || !FINAL_STATUSES.includes(job.status)) return undefined;
    this.#stmt("DELETE FROM jobs WHERE id = ?").run(id);
    this.#stmt("DELETE FROM idempotency_keys WHERE job_id = ?").run(id);
    return job;
  }

  // --- reads ---

  #get(id: string): Job | undefined {
    const row = this.#stmt("SELECT * FROM jobs WHERE id = ?").get(id) as JobRow | undefined;
    return row ? toJob(row) : undefined;
  }

  #list(query: ListQuery): ListPage {
    const limit = listLimit(query);
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.status !== undefined) {
      where.push("status = ?");
      params.push(query.status);
    }
    if (query.model !== undefined) {
      where.push("model = ?");
      params.push(query.model);
    }
    if (query.owner !== undefined) {
      where.push("owner = ?");
      params.push(query.owner);
    }
    if (query.cursor !== undefined) {
      const [createdAt, id] = decodeCursor(query.cursor);
      where.push("(created_at < ? OR (created_at = ? AND id < ?))");
      params.push(createdAt, createdAt, id);
    }
    const sql = `SELECT ${SUMMARY_COLUMNS} FROM jobs ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY created_at DESC, id DESC LIMIT ?`;
    const rows = this.#stmt(sql).all(...params, limit + 1) as Omit<JobRow, "input" | "result">[];
    const more = rows.length > limit;
    const jobs = (more ? rows.slice(0, limit) : rows).map((row) => summaryOf(toJob(row as JobRow)));
    const last = jobs[jobs.length - 1];
    return more && last ? { jobs, nextCursor: encodeCursor(last.createdAt, last.id) } : { jobs };
  }

  // --- plumbing ---

  #stmt(sql: string): Stmt {
    let stmt = this.#stmts.get(sql);
    if (!stmt) {
      stmt = this.#db.prepare(sql);
      this.#stmts.set(sql, stmt);
    }
    return stmt;
  }

  /** A BEGIN IMMEDIATE transaction: the write lock is taken before the first read. */
  #wrapTx<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R {
    const tx = this.#db.transaction(fn);
    return (...args: A) => tx.immediate(...args);
  }

  /**
   * Runs one store operation. A locked database (another process writing) is retried after an
   * asynchronous backoff until busyRetryMs has passed: nothing was applied by the failed try.
   */
  async #run<T>(fn: () => T): Promise<T> {
    const deadline = performance.now() + this.#busyRetryMs;
    let wait = BUSY_BACKOFF_FIRST_MS;
    for (;;) {
      if (this.#closed) {
        throw new ModelportError("MP_ERR_JOB_STORE_UNAVAILABLE", "the job store is closed");
      }
      try {
        return fn();
      } catch (err) {
        if (isModelportError(err)) throw err;
        if (isLocked(err) && performance.now() + wait <= deadline) {
          await sleep(wait);
          wait = Math.min(wait * 2, BUSY_BACKOFF_MAX_MS);
          continue;
        }
        const code = (err as { code?: string }).code;
        if (typeof code === "string" && code.startsWith("SQLITE_")) {
          throw new ModelportError(
            "MP_ERR_JOB_STORE_UNAVAILABLE",
            isLocked(err)
              ? `the job database ${this.path} stayed locked by another process for ${this.#busyRetryMs} ms (jobs.storeBusyRetryMs); retry`
              : `the job database ${this.path} could not be read or written (${code}): ${(err as Error).message}`,
            { path: this.path, sqliteCode: code },
          );
        }
        throw err;
      }
    }
  }
}

/** Claim order: higher priority first, then older, then id. */
function before(a: JobRow, b: JobRow): boolean {
  if (a.priority !== b.priority) return a.priority > b.priority;
  if (a.created_at !== b.created_at) return a.created_at < b.created_at;
  return a.id < b.id;
}
