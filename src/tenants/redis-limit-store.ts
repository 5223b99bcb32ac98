// Per-key limits held in Redis, so every process and tier sharing it enforces one limit. Each
// step is one Lua script (one round trip, atomic), timed by the Redis server's own clock so
// machines whose clocks disagree still share one bucket. Keys expire once their bucket would be
// full again, or their last lease would have lapsed, so idle keys cost Redis nothing.
//
// Layout under the prefix (default "modelport:"):
//   rl:b:{key}   hash {t: tokens, ts: ms of the last step}
//   rl:c:{key}   zset of leases: score the lease's end (ms), member the lease id
import type { Redis } from "ioredis";
import type { Bucket, BucketMode, BucketResult, LimitStore } from "./limit-store.js";

// Redis's clock in ms, read inside the script (allowed since Redis 5 with effects replication).
const NOW = `local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)`;

// KEYS[1] the bucket hash; ARGV capacity, perSecond, cost, mode. Returns {allowed, tokens, retryAfterMs}.
const BUCKET = `${NOW}
local cap, rate, cost, mode = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local h = redis.call('HMGET', KEYS[1], 't', 'ts')
local t = cap
if h[1] then t = math.min(cap, tonumber(h[1]) + math.max(0, now - tonumber(h[2])) * rate / 1000) end
local allowed = 1
local missing = 0
if mode == 'take' then
  if t >= cost then t = t - cost else allowed = 0; missing = cost - t end
elseif mode == 'charge' then
  t = t - cost
elseif t <= 0 then
  allowed = 0; missing = 1e-9 - t
end
if t >= cap then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 't', tostring(t), 'ts', now)
  redis.call('PEXPIRE', KEYS[1], math.ceil((cap - t) * 1000 / rate) + 1000)
end
return {allowed, tostring(t), math.ceil(missing * 1000 / rate)}`;

// KEYS[1] the lease set; ARGV max, lease, ttlMs. Returns 1 when the lease is held.
const ACQUIRE = `${NOW}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
local ends = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], ends, ARGV[2])
local last = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIRE', KEYS[1], math.max(1, last - now))
return 1`;

type Scripted = Redis & {
  mpBucket(
    key: string,
    cap: number,
    rate: number,
    cost: number,
    mode: string,
  ): Promise<[number, string, number]>;
  mpAcquire(key: string, max: number, lease: string, ttlMs: number): Promise<number>;
};

export class RedisLimitStore implements LimitStore {
  readonly #redis: Scripted;
  readonly #prefix: string;

  /** Uses `redis` (its owner closes it); keys go under `prefix`. */
  constructor(redis: Redis, prefix = "modelport:") {
    redis.defineCommand("mpBucket", { numberOfKeys: 1, lua: BUCKET });
    redis.defineCommand("mpAcquire", { numberOfKeys: 1, lua: ACQUIRE });
    this.#redis = redis as Scripted;
    this.#prefix = prefix;
  }

  async bucket(key: string, bucket: Bucket, cost: number, mode: BucketMode): Promise<BucketResult> {
    const [allowed, tokens, retryAfterMs] = await this.#redis.mpBucket(
      `${this.#prefix}rl:b:${key}`,
      bucket.capacity,
      bucket.perSecond,
      cost,
      mode,
    );
    return { allowed: allowed === 1, tokens: Number(tokens), retryAfterMs: Number(retryAfterMs) };
  }

  async acquire(key: string, max: number, lease: string, ttlMs: number): Promise<boolean> {
    return (await this.#redis.mpAcquire(`${this.#prefix}rl:c:${key}`, max, lease, ttlMs)) === 1;
  }

  async release(key: string, lease: string): Promise<void> {
    await this.#redis.zrem(`${this.#prefix}rl:c:${key}`, lease);
  }

  async close(): Promise<void> {}
}
