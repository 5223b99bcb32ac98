// The Redis JobStore: one Redis server (or primary) shared by every process that opens it.
//
// - Every operation that reads then writes is one Lua script (redis-lua/*.lua, each headed by
//   its KEYS and ARGV), which Redis runs atomically: two
//   workers (in any process) can never be handed the same job, only the lease owner can change a
//   running job, and an idempotency key can never create two jobs.
// - The clock is never read here, neither Node's nor Redis's: every time comes in as an argument.
// - Keys are computed inside the scripts (per model), so this needs a single Redis server, not
//   Redis Cluster.
//
// Layout under the prefix (default "modelport:"):
//   job:{id}              hash: the job's fields (absent fields are absent), plus om (see below)
//   q:{model}             zset of runnable queued jobs: score -priority, member om
//   dly:{model}           zset of queued jobs waiting out a backoff: score runAt, member id
//   run:{model}           zset of running jobs: score leaseExpiresAt, member id
//   fin                   zset of final jobs: score finishedAt, member id (purge)
//   lall, lm:{model}, ls:{status}, lms:{model}:{status}, lo:{owner}, los:{owner}:{status}
//                         zsets for list and counts, all scores 0, member om (read by lex); the
//                         owner ones only for jobs submitted with a key name
//   idem:{key}            string {j: job id, h: request hash, e: expiresAt}, with a PX expiry
// om ("order member") is the zero-padded createdAt, ":", the id: equal scores sort by member, so
// it gives claim order (createdAt, id) within a priority and list order (createdAt, id).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { isModelportError, ModelportError } from "../../errors.js";
import type { FinishedJob, Job, JobError, JobStatus, NewJob } from "../job.js";
import type {
  CompleteResult,
  CreateResult,
  JobState,
  JobStore,
  JobSummary,
  ListPage,
  ListQuery,
} from "../job-store.js";
import {
  DEFAULT_IDEMPOTENCY_TTL_MS,
  decodeCursor,
  encodeCursor,
  jobFromFields,
  listLimit,
  PURGE_BATCH,
  summaryOf,
} from "./stored-job.js";

const toJob = (h: Record<string, string>) => jobFromFields((k) => h[k]);

/** Kept past the key's own expiry before Redis drops it (the expiry itself is checked against `now`). */
const IDEMPOTENCY_GRACE_MS = 60_000;
const STATUSES: readonly JobStatus[] = ["queued", "running", "succeeded", "failed", "canceled"];

export interface RedisJobStoreOptions {
  /** Prefix of every key this store writes (default "modelport:"). */
  prefix?: string;
  /** How long connecting may take before the store is unavailable (ms, default 2000). */
  connectTimeoutMs?: number;
  /** How long one command may wait for its answer (ms, default 10000). */
  commandTimeoutMs?: number;
}

interface Script {
  source: string;
  sha: string;
}

// The scripts live in redis-lua/*.lua, each with a header naming its KEYS and ARGV; lib.lua is
// prepended to each. The build copies them beside the compiled file.
const LUA_DIR = new URL("./redis-lua/", import.meta.url);
const LIB = readFileSync(new URL("lib.lua", LUA_DIR), "utf8");

function script(name: string): Script {
  const source = `${LIB}\n${readFileSync(new URL(`${name}.lua`, LUA_DIR), "utf8")}`;
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

const SCRIPTS = {
  create: script("create"),
  record: script("record"),
  remove: script("remove"),
  claim: script("claim"),
  held: script("held"),
  cancel: script("cancel"),
  retry: script("retry"),
  webhook: script("webhook"),
  purge: script("purge"),
  list: script("list"),
  counts: script("counts"),
};

type Reply = string | number | null | Reply[];

export class RedisJobStore implements JobStore {
  /** The URL with any password masked, for messages. */
  readonly url: string;
  readonly prefix: string;
  #redis: Redis;
  #closed = false;

  /**
   * Connects to `url` (default REDIS_URL, else redis://127.0.0.1:6379). Fails with
   * MP_ERR_JOB_STORE_UNAVAILABLE when the server cannot be reached within the connect timeout.
   */
  static async open(
    url: string = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379",
    options: RedisJobStoreOptions = {},
  ): Promise<RedisJobStore> {
    const shown = maskUrl(url);
    let ready = false;
    let lastError: Error | undefined;
    let redis: Redis;
    try {
      redis = new Redis(url, {
        lazyConnect: true,
        connectTimeout: options.connectTimeoutMs ?? 2000,
        commandTimeout: options.commandTimeoutMs ?? 10_000,
        // A command waits for at most one reconnection before failing (the store is then unavailable).
        maxRetriesPerRequest: 1,
        // While opening, one try; once open, reconnect in the background with a capped backoff.
        retryStrategy: (times) => (ready ? Math.min(times * 100, 2000) : null),
      });
    } catch (err) {
      throw new ModelportError(
        "MP_ERR_JOB_STORE_UNAVAILABLE",
        `cannot open the Redis job store ${shown}: ${(err as Error).message}; check the URL (REDIS_URL)`,
        { url: shown },
      );
    }
    // Without a listener, ioredis reports every connection error on stderr.
    redis.on("error", (err: Error) => {
      lastError = err;
    });
    try {
      await redis.connect();
      ready = true;
    } catch (err) {
      redis.disconnect();
      const cause = lastError?.message ?? (err as Error).message;
      throw new ModelportError(
        "MP_ERR_JOB_STORE_UNAVAILABLE",
        `cannot reach the Redis job store at ${shown}: ${cause}; check that Redis is running and the URL (REDIS_URL) is right`,
        { url: shown },
      );
    }
    return new RedisJobStore(redis, shown, options.prefix ?? "modelport:");
  }

  private constructor(redis: Redis, url: string, prefix: string) {
    this.#redis = redis;
    this.url = url;
    this.prefix = prefix;
  }

  async create(job: NewJob, now: number): Promise<CreateResult> {
    const priority = job.priority ?? 0;
    const om = orderMember(now, job.id);
    const hasKey = job.idempotencyKey !== undefined;
    const ttl = job.idempotencyTtlMs ?? DEFAULT_IDEMPOTENCY_TTL_MS;
    const expiresAt = now + ttl;
    const fields: Record<string, string> = {
      id: job.id,
      model: job.model,
      status: "queued",
      priority: String(priority),
      input: job.input,
      createdAt: String(now),
      updatedAt: String(now),
      attempts: "0",
      maxAttempts: String(job.maxAttempts),
      runAt: String(now),
      timeoutMs: String(job.timeoutMs),
      om,
    };
    if (job.metadata !== undefined) fields["metadata"] = JSON.stringify(job.metadata);
    if (job.idempotencyKey !== undefined) {
      fields["idempotencyKey"] = job.idempotencyKey;
      fields["idempotencyExpiresAt"] = String(expiresAt);
    }
    if (job.requestHash !== undefined) fields["requestHash"] = job.requestHash;
    if (job.callbackUrl !== undefined)
      fields["webhook"] = JSON.stringify({ url: job.callbackUrl, attempts: 0 });
    if (job.owner !== undefined) fields["owner"] = job.owner;
    if (job.version !== undefined) fields["version"] = job.version;
    // A hash field of its own: records written before it simply lack it.
    if (job.trace !== undefined) fields["trace"] = JSON.stringify(job.trace);
    const reply = (await this.#eval(
      SCRIPTS.create,
      job.id,
      job.model,
      om,
      String(-priority),
      hasKey ? "1" : "0",
      job.idempotencyKey ?? "",
      job.requestHash !== undefined ? "1" : "0",
      job.requestHash ?? "",
      String(now),
      String(expiresAt),
      String(Math.max(1, Math.ceil(ttl)) + IDEMPOTENCY_GRACE_MS),
      ...Object.entries(fields).flat(),
    )) as Reply[];
    switch (reply[0]) {
      case "created":
        return { job: toJob(fields), created: true };
      case "existing":
        return { job: toJob(toRecord(reply[1] as string[])), created: false };
      case "conflict":
        throw new ModelportError(
          "MP_ERR_JOB_IDEMPOTENCY_CONFLICT",
          `the Idempotency-Key ${JSON.stringify(job.idempotencyKey)} was already used with a different request (job ${String(reply[1])}); use a new key for a new request`,
          { jobId: String(reply[1]) },
        );
      default:
        throw new ModelportError("MP_ERR_SERVER_INTERNAL", `a job with id ${job.id} already exists`);
    }
  }

  async record(job: FinishedJob, now: number): Promise<Job> {
    const om = orderMember(now, job.id);
    const at = String(now);
    const fields: Record<string, string> = {
      id: job.id,
      model: job.model,
      priority: "0",
      input: job.input,
      createdAt: at,
      updatedAt: at,
      startedAt: at,
      finishedAt: at,
      attempts: "1",
      maxAttempts: "1",
      runAt: at,
      timeoutMs: "0",
      result: job.result,
      resultBytes: String(Buffer.byteLength(job.result, "utf8")),
      om,
    };
    if (job.metadata !== undefined) fields["metadata"] = JSON.stringify(job.metadata);
    if (job.owner !== undefined) fields["owner"] = job.owner;
    if (job.version !== undefined) fields["version"] = job.version;
    if (job.trace !== undefined) fields["trace"] = JSON.stringify(job.trace);
    const done = await this.#eval(
      SCRIPTS.record,
      job.id,
      job.model,
      om,
      at,
      ...Object.entries(fields).flat(),
    );
    if (done !== 1)
      throw new ModelportError("MP_ERR_SERVER_INTERNAL", `a job with id ${job.id} already exists`);
    return toJob({ ...fields, status: "succeeded" });
  }

  async remove(id: string): Promise<Job | undefined> {
    const reply = await this.#eval(SCRIPTS.remove, id);
    return Array.isArray(reply) ? toJob(toRecord(reply as string[])) : undefined;
  }

  async get(id: string): Promise<Job | undefined> {
    const hash = await this.#call(() => this.#redis.hgetall(`${this.prefix}job:${id}`));
    return Object.keys(hash).length === 0 ? undefined : toJob(hash);
  }

  async state(id: string): Promise<JobState | undefined> {
    const [status, updatedAt] = await this.#call(() =>
      this.#redis.hmget(`${this.prefix}job:${id}`, "status", "updatedAt"),
    );
    return status ? { status: status as JobStatus, updatedAt: Number(updatedAt) } : undefined;
  }

  async queuedCount(model: string): Promise<number> {
    return this.#call(() => this.#redis.zcard(`${this.prefix}lms:${model}:queued`));
  }

  async activeCount(owner: string): Promise<number> {
    return this.#call(async () => {
      const [queued, running] = await this.#redis
        .multi()
        .zcard(`${this.prefix}los:${owner}:queued`)
        .zcard(`${this.prefix}los:${owner}:running`)
        .exec()
        .then((r) => (r ?? []).map(([, n]) => Number(n)));
      return (queued ?? 0) + (running ?? 0);
    });
  }

  async list(query: ListQuery): Promise<ListPage> {
    const limit = listLimit(query);
    let index = "lall";
    // A key's own jobs come from its own indexes; by model too, they are filtered in the script.
    let model = "";
    if (query.owner !== undefined) {
      index = query.status !== undefined ? `los:${query.owner}:${query.status}` : `lo:${query.owner}`;
      model = query.model ?? "";
    } else if (query.status !== undefined && query.model !== undefined)
      index = `lms:${query.model}:${query.status}`;
    else if (query.status !== undefined) index = `ls:${query.status}`;
    else if (query.model !== undefined) index = `lm:${query.model}`;
    const max = query.cursor === undefined ? "+" : `(${orderMember(...decodeCursor(query.cursor))}`;
    const [oms, hashes, scanned] = (await this.#eval(SCRIPTS.list, index, max, String(limit + 1), model)) as [
      string[],
      string[][],
      string | false | null,
    ];
    // Filtered and cut short by the scan bound: the next page starts after the last job looked at.
    if (model !== "" && oms.length <= limit && scanned) {
      const jobs = hashes.filter((h) => h.length > 0).map((h) => summaryOf(toJob(toRecord(h))));
      return { jobs, nextCursor: encodeCursor(...splitOrderMember(scanned)) };
    }
    const more = oms.length > limit;
    const n = Math.min(limit, oms.length);
    const jobs: JobSummary[] = [];
    for (let i = 0; i < n; i++) {
      const hash = hashes[i];
      if (hash && hash.length > 0) jobs.push(summaryOf(toJob(toRecord(hash))));
    }
    const last = oms[n - 1];
    return more && last !== undefined
      ? { jobs, nextCursor: encodeCursor(...splitOrderMember(last)) }
      : { jobs };
  }

  async claim(
    worker: string,
    models: readonly string[],
    leaseMs: number,
    now: number,
  ): Promise<Job | undefined> {
    if (models.length === 0) return undefined;
    const reply = await this.#eval(SCRIPTS.claim, worker, String(leaseMs), String(now), ...new Set(models));
    return Array.isArray(reply) ? toJob(toRecord(reply as string[])) : undefined;
  }

  async renew(id: string, worker: string, leaseMs: number, now: number): Promise<boolean> {
    return this.#held("renew", id, worker, now, String(leaseMs));
  }

  async complete(id: string, worker: string, result: CompleteResult, now: number): Promise<boolean> {
    return this.#held(
      "complete",
      id,
      worker,
      now,
      result.result !== undefined ? "1" : "0",
      result.result ?? "",
      result.resultKey !== undefined ? "1" : "0",
      result.resultKey ?? "",
      String(result.resultBytes),
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
    return this.#held("fail", id, worker, now, lastError, retryAt === undefined ? "" : String(retryAt));
  }

  async release(id: string, worker: string, now: number): Promise<boolean> {
    // The attempt is given back: a job drained at shutdown does not lose one of its attempts.
    return this.#held("release", id, worker, now);
  }

  async cancel(id: string, now: number): Promise<Job | undefined> {
    const reply = await this.#eval(SCRIPTS.cancel, id, String(now));
    return Array.isArray(reply) ? toJob(toRecord(reply as string[])) : undefined;
  }

  async markCanceled(id: string, worker: string, now: number): Promise<boolean> {
    return this.#held("markCanceled", id, worker, now);
  }

  async retry(id: string, now: number): Promise<Job | undefined> {
    const reply = await this.#eval(SCRIPTS.retry, id, String(now));
    return Array.isArray(reply) ? toJob(toRecord(reply as string[])) : undefined;
  }

  async recordWebhook(id: string, state: NonNullable<Job["webhook"]>): Promise<void> {
    await this.#eval(SCRIPTS.webhook, id, JSON.stringify(state));
  }

  async purge(before: number): Promise<Job[]> {
    const purged: Job[] = [];
    for (;;) {
      const [examined, hashes] = (await this.#eval(SCRIPTS.purge, String(before), String(PURGE_BATCH))) as [
        number,
        string[][],
      ];
      for (const hash of hashes) purged.push(toJob(toRecord(hash)));
      if (examined < PURGE_BATCH) return purged;
    }
  }

  async counts(): Promise<Record<JobStatus, number>> {
    const reply = (await this.#eval(SCRIPTS.counts, ...STATUSES)) as number[];
    const counts = { queued: 0, running: 0, succeeded: 0, failed: 0, canceled: 0 };
    STATUSES.forEach((status, i) => {
      counts[status] = Number(reply[i] ?? 0);
    });
    return counts;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.#redis.quit();
    } catch {
      // the connection is already gone: nothing left to release
      this.#redis.disconnect();
    }
  }

  // --- plumbing ---

  /** Runs a script by its SHA, loading it on first use (NOSCRIPT). */
  /** An operation only the lease owner may do (held.lua); false when `worker` does not hold it. */
  async #held(op: string, id: string, worker: string, now: number, ...args: string[]): Promise<boolean> {
    return (await this.#eval(SCRIPTS.held, id, worker, String(now), op, ...args)) === 1;
  }

  async #eval(s: Script, ...args: string[]): Promise<Reply> {
    return this.#call(async () => {
      try {
        return (await this.#redis.evalsha(s.sha, 0, this.prefix, ...args)) as Reply;
      } catch (err) {
        if (!String((err as Error).message).startsWith("NOSCRIPT")) throw err;
        return (await this.#redis.eval(s.source, 0, this.prefix, ...args)) as Reply;
      }
    });
  }

  async #call<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) {
      throw new ModelportError("MP_ERR_JOB_STORE_UNAVAILABLE", "the job store is closed");
    }
    try {
      return await fn();
    } catch (err) {
      if (isModelportError(err)) throw err;
      throw new ModelportError(
        "MP_ERR_JOB_STORE_UNAVAILABLE",
        `the Redis job store at ${this.url} could not be read or written: ${(err as Error).message}`,
        { url: this.url },
      );
    }
  }
}

function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url;
  }
}

/** Claim and list order within one score: createdAt (zero-padded so text order is number order), then id. */
/** The (createdAt, id) an order member was made from. */
function splitOrderMember(om: string): [number, string] {
  const sep = om.indexOf(":");
  return [Number(om.slice(0, sep)), om.slice(sep + 1)];
}

function orderMember(createdAt: number, id: string): string {
  if (!Number.isSafeInteger(createdAt) || createdAt < 0) {
    throw new ModelportError(
      "MP_ERR_SERVER_INTERNAL",
      `a job's creation time must be ms since epoch, not ${createdAt}`,
    );
  }
  return `${String(createdAt).padStart(16, "0")}:${id}`;
}

function toRecord(flat: readonly string[]): Record<string, string> {
  const rec: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) rec[flat[i]!] = flat[i + 1]!;
  return rec;
}
