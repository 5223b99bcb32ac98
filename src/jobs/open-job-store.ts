// Opens the configured job store (SQLite under the working directory, created on first use, or Redis)
// and purges what outlived the retention time.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { Logger } from "pino";
import type { JobsConfig } from "../config/schema.js";
import type { BlobStore } from "../storage/blob-store.js";
import type { JobStore } from "./job-store.js";
import { lazyJobStore } from "./lazy-job-store.js";

export function openJobStore(config: JobsConfig, cwd: string): JobStore {
  if (config.store === "redis") {
    // Shared by every process: connect at once, so jobs queued elsewhere start running here.
    const url = config.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
    return lazyJobStore(async () => {
      const { RedisJobStore } = await import("./stores/redis-job-store.js");
      return RedisJobStore.open(url, { prefix: config.redisPrefix });
    }, true);
  }
  const path = resolve(cwd, config.sqlitePath);
  return lazyJobStore(async () => {
    const { SqliteJobStore } = await import("./stores/sqlite-job-store.js");
    return SqliteJobStore.open(path, { busyRetryMs: config.storeBusyRetryMs });
  }, existsSync(path));
}

/** Deletes final jobs older than `retentionMs` and their result blobs; returns how many went. */
export async function purgeExpired(
  store: JobStore,
  blobs: BlobStore,
  retentionMs: number,
  log: Logger,
): Promise<number> {
  try {
    const purged = await store.purge(Date.now() - retentionMs);
    for (const job of purged) if (job.resultKey) await blobs.delete(job.resultKey);
    if (purged.length) log.info({ purged: purged.length }, "purged finished jobs past their retention");
    return purged.length;
  } catch (err) {
    log.error({ err }, "purging old jobs failed; will retry");
    return 0;
  }
}
