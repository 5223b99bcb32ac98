// The tenants of one server, assembled from config: its keys (watched for changes), the limits
// of each key (in memory, or in the job store's Redis so every process shares them) and usage
// per key (flushed to the job store's database). A server without keys records no usage and
// limits nothing: it pays nothing for any of this.
import { resolve } from "node:path";
import { Redis } from "ioredis";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import type { Metrics } from "../metrics/metrics.js";
import { KeyLimiter } from "../tenants/key-limits.js";
import { type LimitStore, MemoryLimitStore } from "../tenants/limit-store.js";
import { RedisLimitStore } from "../tenants/redis-limit-store.js";
import { RedisUsageStore } from "../tenants/redis-usage-store.js";
import { Tenants } from "../tenants/tenants.js";
import { UsageRecorder } from "../tenants/usage.js";
import { SqliteUsageStore, type UsageStore } from "../tenants/usage-store.js";

export interface Tenancy {
  readonly tenants: Tenants;
  readonly limiter: KeyLimiter;
  /** Undefined on a server without keys. */
  readonly usage: UsageRecorder | undefined;
  close(): Promise<void>;
}

export function createTenancy(
  config: Config,
  options: { cwd: string; log: Logger; metrics: Metrics; instance: string },
): Tenancy {
  const { log, metrics } = options;
  const tenants = new Tenants({
    apiKeys: config.server.apiKeys,
    adminKeys: config.server.adminKeys,
    keysFile: config.server.keys,
    log,
  });
  const stopWatching = tenants.watch();
  // Limits and usage live beside the jobs: in their Redis (one connection of its own, commands
  // failing fast so a Redis outage never stalls a request), else in this process and SQLite file.
  let redis: Redis | undefined;
  if (config.jobs.store === "redis") {
    redis = new Redis(config.jobs.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379", {
      lazyConnect: true,
      connectTimeout: 2000,
      commandTimeout: 1000,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: true,
      retryStrategy: (times) => Math.min(times * 200, 2000),
    });
    redis.on("error", () => {});
  }
  const prefix = config.jobs.redisPrefix;
  const limitStore: LimitStore = redis ? new RedisLimitStore(redis, prefix) : new MemoryLimitStore();
  const limiter = new KeyLimiter(limitStore, options.instance, log, (key, limit) =>
    metrics.rateLimited.inc({ key, limit }),
  );
  const openUsage = (): UsageStore =>
    redis
      ? new RedisUsageStore(redis, prefix)
      : new SqliteUsageStore(resolve(options.cwd, config.jobs.sqlitePath));
  const usage = tenants.required ? new UsageRecorder(openUsage, metrics.keyUsage, log) : undefined;
  usage?.start();
  return {
    tenants,
    limiter,
    usage,
    async close() {
      stopWatching();
      await usage?.close().catch((err) => log.warn(`usage: final flush failed: ${(err as Error).message}`));
      await limitStore.close();
      redis?.disconnect();
    },
  };
}
