// The Redis JobStore: one Redis server (or primary) shared by every process that opens it.
//
// - Every operation that reads then writes is one Lua script, which Redis runs atomically: two
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
//   lall, lm:{model}, ls:{status}, lms:{model}:{status}
//                         zsets for list and counts, all scores 0, member om (read by lex)
//   idem:{key}            string {j: job id, h: request hash, e: expiresAt}, with a PX expiry
// om ("order member") is the zero-padded createdAt, ":", the id: equal scores sort by member, so
// it gives claim order (createdAt, id) within a priority and list order (createdAt, id).
import { createHash } from "node:crypto";
import { Redis } from "ioredis";
import { isModelportError, ModelportError } from "../../errors.js";
import type { Job, JobError, JobStatus, NewJob } from "../job.js";
import type {
  CompleteResult,
  CreateResult,
  JobState,
  JobStore,
  JobSummary,
  ListPage,
  ListQuery,
} from "../job-store.js";

/** Used when a NewJob carries an idempotency key but no TTL (jobs.idempotencyTtlMs default). */
const DEFAULT_IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** Kept past the key's own expiry before Redis drops it (the expiry itself is checked against `now`). */
const IDEMPOTENCY_GRACE_MS = 60_000;
const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1000;
const PURGE_BATCH = 500;
const STATUSES: readonly JobStatus[] = ["queued", "running", "succeeded", "failed", "canceled"];

export interface RedisJobStoreOptions {
  /** Prefix of every key this store writes (default "modelport:"). */
  prefix?: string;
  /** How long connecting may take before the store is unavailable (ms, default 2000). */
  connectTimeoutMs?: number;
  /** How long one command may wait for its answer (ms, default 10000). */
  commandTimeoutMs?: number;
}

// --- Lua ---

const LIB = `
local P = ARGV[1]
local function jk(id) return P .. 'job:' .. id end
local function n2s(x) return string.format('%.0f', x) end
local function move(id, model, om, old, new)
  if old then
    redis.call('ZREM', P .. 'ls:' .. old, om)
    redis.call('ZREM', P .. 'lms:' .. model .. ':' .. old, om)
  end
  redis.call('ZADD', P .. 'ls:' .. new, 0, om)
  redis.call('ZADD', P .. 'lms:' .. model .. ':' .. new, 0, om)
  redis.call('HSET', jk(id), 'status', new)
end
local function finish(id, model, om, old, status, now)
  redis.call('ZREM', P .. 'run:' .. model, id)
  redis.call('ZREM', P .. 'q:' .. model, om)
  redis.call('ZREM', P .. 'dly:' .. model, id)
  redis.call('HSET', jk(id), 'finishedAt', now, 'updatedAt', now)
  redis.call('HDEL', jk(id), 'leaseOwner', 'leaseExpiresAt')
  redis.call('ZADD', P .. 'fin', now, id)
  move(id, model, om, old, status)
end
`;

// ARGV: P, id, model, om, -priority, hasKey, key, hasHash, hash, expiresAt, pxMs, field, value, ...
const CREATE = `${LIB}
local id, model, om = ARGV[2], ARGV[3], ARGV[4]
local hasKey, key = ARGV[6] == '1', ARGV[7]
local hash = false
if ARGV[8] == '1' then hash = ARGV[9] end
local now = ARGV[10]
if hasKey then
  local v = redis.call('GET', P .. 'idem:' .. key)
  if v then
    local d = cjson.decode(v)
    if tonumber(d.e) > tonumber(now) and redis.call('EXISTS', jk(d.j)) == 1 then
      if (d.h or false) ~= hash then return {'conflict', d.j} end
      return {'existing', redis.call('HGETALL', jk(d.j))}
    end
  end
end
if redis.call('EXISTS', jk(id)) == 1 then return {'exists'} end
local fields = {}
for i = 13, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', jk(id), unpack(fields))
redis.call('ZADD', P .. 'q:' .. model, ARGV[5], om)
redis.call('ZADD', P .. 'lall', 0, om)
redis.call('ZADD', P .. 'lm:' .. model, 0, om)
move(id, model, om, false, 'queued')
if hasKey then
  local d = {j = id, e = ARGV[11]}
  if hash then d.h = hash end
  redis.call('SET', P .. 'idem:' .. key, cjson.encode(d), 'PX', ARGV[12])
end
return {'created'}
`;

// ARGV: P, worker, leaseMs, now, model, ...
const CLAIM = `${LIB}
local worker, leaseMs, now = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local models = {}
for i = 5, #ARGV do models[#models + 1] = ARGV[i] end
for _, m in ipairs(models) do
  local dk = P .. 'dly:' .. m
  local due = redis.call('ZRANGEBYSCORE', dk, '-inf', now, 'LIMIT', 0, 500)
  for _, id in ipairs(due) do
    local f = redis.call('HMGET', jk(id), 'priority', 'om')
    if f[2] then redis.call('ZADD', P .. 'q:' .. m, -tonumber(f[1]), f[2]) end
    redis.call('ZREM', dk, id)
  end
end
local function better(a, b)
  if not b then return true end
  if a.prio ~= b.prio then return a.prio > b.prio end
  if a.created ~= b.created then return a.created < b.created end
  return a.id < b.id
end
for _ = 1, 10000 do
  local best = false
  for _, m in ipairs(models) do
    local top = redis.call('ZRANGE', P .. 'q:' .. m, 0, 0, 'WITHSCORES')
    if top[1] then
      local om = top[1]
      local sep = string.find(om, ':', 1, true)
      local c = {kind = 'q', model = m, om = om, prio = -tonumber(top[2]),
        created = tonumber(string.sub(om, 1, sep - 1)), id = string.sub(om, sep + 1)}
      if better(c, best) then best = c end
    end
    local rk = P .. 'run:' .. m
    local lapsed = redis.call('ZRANGEBYSCORE', rk, '-inf', now, 'LIMIT', 0, 100)
    for _, id in ipairs(lapsed) do
      local f = redis.call('HMGET', jk(id), 'priority', 'createdAt', 'om')
      if f[3] then
        local c = {kind = 'r', model = m, om = f[3], prio = tonumber(f[1]), created = tonumber(f[2]), id = id}
        if better(c, best) then best = c end
      else
        redis.call('ZREM', rk, id)
      end
    end
  end
  if not best then return false end
  local k = jk(best.id)
  local proceed = true
  if best.kind == 'q' then
    redis.call('ZREM', P .. 'q:' .. best.model, best.om)
    local runAt = tonumber(redis.call('HGET', k, 'runAt'))
    if runAt > now then
      redis.call('ZADD', P .. 'dly:' .. best.model, runAt, best.id)
      proceed = false
    end
  else
    local f = redis.call('HMGET', k, 'cancelRequested', 'attempts', 'maxAttempts', 'leaseOwner', 'leaseExpiresAt')
    if f[1] == '1' then
      finish(best.id, best.model, best.om, 'running', 'canceled', ARGV[4])
      proceed = false
    elseif tonumber(f[2]) + 1 > tonumber(f[3]) then
      local msg = 'the worker holding the lease stopped (' .. (f[4] or 'unknown worker') .. ', lease lapsed at ' ..
        (f[5] or '?') .. ') and the job has no attempt left (attempt ' .. f[2] .. ' of ' .. f[3] .. ')'
      redis.call('HSET', k, 'lastError', cjson.encode({code = 'MP_ERR_RUNNER_CRASHED', message = msg}))
      finish(best.id, best.model, best.om, 'running', 'failed', ARGV[4])
      proceed = false
    end
  end
  if proceed then
    local exp = now + leaseMs
    redis.call('HINCRBY', k, 'attempts', 1)
    redis.call('HSET', k, 'leaseOwner', worker, 'leaseExpiresAt', n2s(exp), 'startedAt', ARGV[4], 'updatedAt', ARGV[4])
    redis.call('ZADD', P .. 'run:' .. best.model, exp, best.id)
    if best.kind == 'q' then move(best.id, best.model, best.om, 'queued', 'running') end
    return redis.call('HGETALL', k)
  end
end
return false
`;

// Operations only the lease owner may do. ARGV: P, id, worker, now, op, args...
const HELD = `${LIB}
local id, worker, now, op = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local k = jk(id)
local f = redis.call('HMGET', k, 'status', 'leaseOwner', 'model', 'om', 'priority', 'attempts')
if f[1] ~= 'running' or f[2] ~= worker then return 0 end
local model, om = f[3], f[4]
if op == 'renew' then
  local exp = tonumber(now) + tonumber(ARGV[6])
  redis.call('HSET', k, 'leaseExpiresAt', n2s(exp), 'updatedAt', now)
  redis.call('ZADD', P .. 'run:' .. model, exp, id)
elseif op == 'complete' then
  if ARGV[6] == '1' then redis.call('HSET', k, 'result', ARGV[7]) else redis.call('HDEL', k, 'result') end
  if ARGV[8] == '1' then redis.call('HSET', k, 'resultKey', ARGV[9]) else redis.call('HDEL', k, 'resultKey') end
  redis.call('HSET', k, 'resultBytes', ARGV[10])
  finish(id, model, om, 'running', 'succeeded', now)
elseif op == 'fail' then
  redis.call('HSET', k, 'lastError', ARGV[6])
  if ARGV[7] == '' then
    finish(id, model, om, 'running', 'failed', now)
  else
    redis.call('HSET', k, 'runAt', ARGV[7], 'updatedAt', now)
    redis.call('HDEL', k, 'leaseOwner', 'leaseExpiresAt')
    redis.call('ZREM', P .. 'run:' .. model, id)
    redis.call('ZADD', P .. 'dly:' .. model, ARGV[7], id)
    move(id, model, om, 'running', 'queued')
  end
elseif op == 'release' then
  local attempts = math.max(tonumber(f[6]) - 1, 0)
  redis.call('HSET', k, 'attempts', attempts, 'updatedAt', now)
  redis.call('HDEL', k, 'leaseOwner', 'leaseExpiresAt')
  redis.call('ZREM', P .. 'run:' .. model, id)
  redis.call('ZADD', P .. 'q:' .. model, -tonumber(f[5]), om)
  move(id, model, om, 'running', 'queued')
elseif op == 'markCanceled' then
  finish(id, model, om, 'running', 'canceled', now)
else
  return redis.error_reply('unknown op ' .. op)
end
return 1
`;

// ARGV: P, id, now
const CANCEL = `${LIB}
local id, now = ARGV[2], ARGV[3]
local k = jk(id)
local f = redis.call('HMGET', k, 'status', 'model', 'om', 'cancelRequested')
if not f[1] then return false end
if f[1] == 'queued' then
  finish(id, f[2], f[3], 'queued', 'canceled', now)
elseif f[1] == 'running' and f[4] ~= '1' then
  redis.call('HSET', k, 'cancelRequested', '1', 'updatedAt', now)
end
return redis.call('HGETALL', k)
`;

// ARGV: P, id, now
const RETRY = `${LIB}
local id, now = ARGV[2], ARGV[3]
local k = jk(id)
local f = redis.call('HMGET', k, 'status', 'model', 'om', 'priority')
if not f[1] then return false end
if f[1] == 'failed' or f[1] == 'canceled' then
  redis.call('HSET', k, 'attempts', '0', 'runAt', now, 'updatedAt', now)
  redis.call('HDEL', k, 'finishedAt', 'cancelRequested', 'result', 'resultKey', 'resultBytes', 'leaseOwner', 'leaseExpiresAt')
  redis.call('ZREM', P .. 'fin', id)
  redis.call('ZADD', P .. 'q:' .. f[2], -tonumber(f[4]), f[3])
  move(id, f[2], f[3], f[1], 'queued')
end
return redis.call('HGETALL', k)
`;

// ARGV: P, id, webhook JSON
const WEBHOOK = `${LIB}
if redis.call('EXISTS', jk(ARGV[2])) == 1 then redis.call('HSET', jk(ARGV[2]), 'webhook', ARGV[3]) end
return 1
`;

// ARGV: P, before, limit. Returns {ids examined, {job hash, ...}}.
const PURGE = `${LIB}
local ids = redis.call('ZRANGEBYSCORE', P .. 'fin', '-inf', '(' .. ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', P .. 'fin', id)
  local k = jk(id)
  local f = redis.call('HMGET', k, 'status', 'model', 'om', 'idempotencyKey')
  if f[1] == 'succeeded' or f[1] == 'failed' or f[1] == 'canceled' then
    out[#out + 1] = redis.call('HGETALL', k)
    redis.call('DEL', k)
    redis.call('ZREM', P .. 'lall', f[3])
    redis.call('ZREM', P .. 'lm:' .. f[2], f[3])
    redis.call('ZREM', P .. 'ls:' .. f[1], f[3])
    redis.call('ZREM', P .. 'lms:' .. f[2] .. ':' .. f[1], f[3])
    if f[4] then
      local ik = P .. 'idem:' .. f[4]
      local v = redis.call('GET', ik)
      if v and cjson.decode(v).j == id then redis.call('DEL', ik) end
    end
  end
end
return {#ids, out}
`;

// ARGV: P, index key (after P), max (lex), limit + 1. Returns {oms, {job hash, ...}} aligned.
const LIST = `${LIB}
local oms = redis.call('ZREVRANGEBYLEX', P .. ARGV[2], ARGV[3], '-', 'LIMIT', 0, tonumber(ARGV[4]))
local out = {}
for i, om in ipairs(oms) do
  local sep = string.find(om, ':', 1, true)
  -- Summaries: a page never carries inputs or results.
  local h = redis.call('HGETALL', jk(string.sub(om, sep + 1)))
  local s = {}
  for j = 1, #h, 2 do
    if h[j] ~= 'input' and h[j] ~= 'result' then
      s[#s + 1] = h[j]
      s[#s + 1] = h[j + 1]
    end
  end
  out[i] = s
end
return {oms, out}
`;

// ARGV: P, status, ...
const COUNTS = `${LIB}
local out = {}
for i = 2, #ARGV do out[#out + 1] = redis.call('ZCARD', P .. 'ls:' .. ARGV[i]) end
return out
`;

interface Script {
  source: string;
  sha: string;
}

function script(source: string): Script {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

const SCRIPTS = {
  create: script(CREATE),
  claim: script(CLAIM),
  held: script(HELD),
  cancel: script(CANCEL),
  retry: script(RETRY),
  webhook: script(WEBHOOK),
  purge: script(PURGE),
  list: script(LIST),
  counts: script(COUNTS),
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

  async list(query: ListQuery): Promise<ListPage> {
    const limit = Math.min(
      MAX_LIST_LIMIT,
      Math.max(1, Math.floor(Number.isFinite(query.limit) ? query.limit! : DEFAULT_LIST_LIMIT)),
    );
    let index = "lall";
    if (query.status !== undefined && query.model !== undefined) index = `lms:${query.model}:${query.status}`;
    else if (query.status !== undefined) index = `ls:${query.status}`;
    else if (query.model !== undefined) index = `lm:${query.model}`;
    const max = query.cursor === undefined ? "+" : `(${decodeCursor(query.cursor)}`;
    const [oms, hashes] = (await this.#eval(SCRIPTS.list, index, max, String(limit + 1))) as [
      string[],
      string[][],
    ];
    const more = oms.length > limit;
    const n = Math.min(limit, oms.length);
    const jobs: JobSummary[] = [];
    for (let i = 0; i < n; i++) {
      const hash = hashes[i];
      if (hash && hash.length > 0) jobs.push(toSummary(toRecord(hash)));
    }
    const last = oms[n - 1];
    return more && last !== undefined ? { jobs, nextCursor: encodeCursor(last) } : { jobs };
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
    return (await this.#eval(SCRIPTS.held, id, worker, String(now), "renew", String(leaseMs))) === 1;
  }

  async complete(id: string, worker: string, result: CompleteResult, now: number): Promise<boolean> {
    return (
      (await this.#eval(
        SCRIPTS.held,
        id,
        worker,
        String(now),
        "complete",
        result.result !== undefined ? "1" : "0",
        result.result ?? "",
        result.resultKey !== undefined ? "1" : "0",
        result.resultKey ?? "",
        String(result.resultBytes),
      )) === 1
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
    return (
      (await this.#eval(
        SCRIPTS.held,
        id,
        worker,
        String(now),
        "fail",
        lastError,
        retryAt === undefined ? "" : String(retryAt),
      )) === 1
    );
  }

  async release(id: string, worker: string, now: number): Promise<boolean> {
    // The attempt is given back: a job drained at shutdown does not lose one of its attempts.
    return (await this.#eval(SCRIPTS.held, id, worker, String(now), "release")) === 1;
  }

  async cancel(id: string, now: number): Promise<Job | undefined> {
    const reply = await this.#eval(SCRIPTS.cancel, id, String(now));
    return Array.isArray(reply) ? toJob(toRecord(reply as string[])) : undefined;
  }

  async markCanceled(id: string, worker: string, now: number): Promise<boolean> {
    return (await this.#eval(SCRIPTS.held, id, worker, String(now), "markCanceled")) === 1;
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

/** A listed job: the hash without input and result (the list script leaves them out). */
function toSummary(h: Record<string, string>): JobSummary {
  const { input: _input, result: _result, ...summary } = toJob({ ...h, input: "" });
  return summary;
}

function toJob(h: Record<string, string>): Job {
  const num = (k: string) => Number(h[k]);
  const job: Job = {
    id: h["id"]!,
    model: h["model"]!,
    status: h["status"] as JobStatus,
    priority: num("priority"),
    input: h["input"]!,
    createdAt: num("createdAt"),
    updatedAt: num("updatedAt"),
    attempts: num("attempts"),
    maxAttempts: num("maxAttempts"),
    runAt: num("runAt"),
    timeoutMs: num("timeoutMs"),
  };
  if (h["metadata"] !== undefined) job.metadata = JSON.parse(h["metadata"]) as Record<string, unknown>;
  if (h["startedAt"] !== undefined) job.startedAt = num("startedAt");
  if (h["finishedAt"] !== undefined) job.finishedAt = num("finishedAt");
  if (h["lastError"] !== undefined) job.lastError = JSON.parse(h["lastError"]) as JobError;
  if (h["leaseOwner"] !== undefined) job.leaseOwner = h["leaseOwner"];
  if (h["leaseExpiresAt"] !== undefined) job.leaseExpiresAt = num("leaseExpiresAt");
  if (h["cancelRequested"] === "1") job.cancelRequested = true;
  if (h["result"] !== undefined) job.result = h["result"];
  if (h["resultKey"] !== undefined) job.resultKey = h["resultKey"];
  if (h["resultBytes"] !== undefined) job.resultBytes = num("resultBytes");
  if (h["idempotencyKey"] !== undefined) job.idempotencyKey = h["idempotencyKey"];
  if (h["requestHash"] !== undefined) job.requestHash = h["requestHash"];
  if (h["idempotencyExpiresAt"] !== undefined) job.idempotencyExpiresAt = num("idempotencyExpiresAt");
  if (h["webhook"] !== undefined) job.webhook = JSON.parse(h["webhook"]) as NonNullable<Job["webhook"]>;
  return job;
}

function encodeCursor(om: string): string {
  return Buffer.from(om).toString("base64url");
}

function decodeCursor(cursor: string): string {
  const om = Buffer.from(cursor, "base64url").toString("utf8");
  if (/^\d{16}:./s.test(om) && encodeCursor(om) === cursor) return om;
  throw new ModelportError(
    "MP_ERR_REQUEST_INVALID",
    "the cursor is not one this server issued; pass nextCursor from the previous page as it was returned",
  );
}
