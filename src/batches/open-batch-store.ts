// Opens the BatchStore beside the configured job store: tables in its SQLite file, or keys in its
// Redis (a connection of its own). Opened on first use, so a server nobody sends a batch to
// makes no file and no connection for it.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { JobsConfig } from "../config/schema.js";
import type { BatchStore } from "./batch-store.js";

export function openBatchStore(config: JobsConfig, cwd: string): BatchStore {
  const sqlitePath = resolve(cwd, config.sqlitePath);
  let opened: Promise<{ store: BatchStore; close: () => Promise<void> }> | undefined;
  const open = () =>
    (opened ??= (async () => {
      if (config.store === "redis") {
        const { Redis } = await import("ioredis");
        const { RedisBatchStore } = await import("./redis-batch-store.js");
        const redis = new Redis(config.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379", {
          connectTimeout: 2000,
          commandTimeout: 10_000,
          maxRetriesPerRequest: 1,
          retryStrategy: (times) => Math.min(times * 200, 2000),
        });
        redis.on("error", () => {});
        return {
          store: new RedisBatchStore(redis, config.redisPrefix),
          close: async () => void redis.disconnect(),
        };
      }
      const { SqliteBatchStore } = await import("./sqlite-batch-store.js");
      const store = new SqliteBatchStore(sqlitePath);
      return { store, close: () => store.close() };
    })());
  const via = <K extends Exclude<keyof BatchStore, "close">>(name: K): BatchStore[K] =>
    (async (...args: unknown[]) => {
      const { store } = await open();
      return (store[name] as (...a: unknown[]) => unknown).apply(store, args);
    }) as BatchStore[K];
  return {
    putFile: via("putFile"),
    getFile: via("getFile"),
    deleteFile: via("deleteFile"),
    listFiles: via("listFiles"),
    createBatch: via("createBatch"),
    updateBatch: via("updateBatch"),
    getBatch: via("getBatch"),
    listBatches: via("listBatches"),
    // The periodic check asks this of every server: a SQLite file never made holds no batch.
    unfinishedBatches: async () =>
      opened || config.store === "redis" || existsSync(sqlitePath) ? via("unfinishedBatches")() : [],
    putRequests: via("putRequests"),
    requests: via("requests"),
    async close() {
      if (!opened) return;
      await (await opened).close();
    },
  };
}
