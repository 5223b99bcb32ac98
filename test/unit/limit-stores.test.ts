// Both LimitStores through the conformance suite (test/conformance/limit-store.conformance.ts):
// the in-memory store, and the Redis store against the real Redis (REDIS_URL, default
// redis://127.0.0.1:6379) under a random key prefix per run, its keys deleted and its connection
// closed after. Passing proves the two enforce the same bucket and lease rules, so a deployment
// may move from one process to a shared Redis without its limits changing meaning.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { MemoryLimitStore } from "../../src/tenants/limit-store.js";
import { RedisLimitStore } from "../../src/tenants/redis-limit-store.js";
import { limitStoreConformance } from "../conformance/limit-store.conformance.js";
import { deletePrefix, REDIS_URL, redisUrl, uniquePrefix } from "../helpers/redis.js";

const prefix = uniquePrefix("limits");

// The environment's Redis; one is started only when none answers there.
before(() => redisUrl());
after(() => deletePrefix(REDIS_URL, prefix));

limitStoreConformance("MemoryLimitStore", async () => ({
  store: new MemoryLimitStore(),
  close: async () => {},
}));

limitStoreConformance("RedisLimitStore", async () => {
  const redis = new Redis(await redisUrl());
  return {
    store: new RedisLimitStore(redis, prefix),
    close: async () => {
      await redis.quit();
    },
  };
});

describe("RedisLimitStore", () => {
  it("keeps its keys under its prefix, and lets idle ones expire", async () => {
    const redis = new Redis(await redisUrl());
    try {
      const own = uniquePrefix("limits-own");
      const store = new RedisLimitStore(redis, own);
      await store.bucket("k", { capacity: 5, perSecond: 1 }, 2, "take");
      assert.equal(await store.acquire("k", 1, "lease", 60_000), true);
      const keys = (await redis.keys(`${own}*`)).sort();
      assert.deepEqual(keys, [`${own}rl:b:k`, `${own}rl:c:k`]);
      for (const k of keys) {
        const ttl = await redis.pttl(k);
        assert.ok(ttl > 0 && ttl <= 61_000, `${k} expires (pttl ${ttl})`);
      }
      // A bucket back at capacity is deleted, as if never seen.
      await store.bucket("full", { capacity: 5, perSecond: 1 }, 1, "peek");
      assert.equal(await redis.exists(`${own}rl:b:full`), 0);
      await deletePrefix(REDIS_URL, own);
    } finally {
      await redis.quit();
    }
  });
});
