// Both BatchStores through the conformance suite (test/conformance/batch-store.conformance.ts):
// SQLite in a fresh file of a temp folder per test, and Redis against the real server (REDIS_URL,
// default redis://127.0.0.1:6379) under a fresh random key prefix per test, all deleted after.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";
import { Redis } from "ioredis";
import { RedisBatchStore } from "../../../src/batches/redis-batch-store.js";
import { SqliteBatchStore } from "../../../src/batches/sqlite-batch-store.js";
import { batchStoreConformance } from "../../conformance/batch-store.conformance.js";
import { deletePrefix, REDIS_URL, redisUrl, uniquePrefix } from "../../helpers/redis.js";

const dir = mkdtempSync(join(tmpdir(), "modelport-batches-"));
const prefixes: string[] = [];

before(() => redisUrl());
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await deletePrefix(REDIS_URL, prefix);
});

batchStoreConformance("SqliteBatchStore", async () => ({
  // A folder not made yet: the store makes it.
  store: new SqliteBatchStore(join(dir, randomUUID(), "jobs.db")),
  close: async () => {},
}));

batchStoreConformance("RedisBatchStore", async () => {
  const prefix = uniquePrefix("batches");
  prefixes.push(prefix);
  const redis = new Redis(await redisUrl());
  return {
    store: new RedisBatchStore(redis, prefix),
    close: async () => {
      await redis.quit();
    },
  };
});
