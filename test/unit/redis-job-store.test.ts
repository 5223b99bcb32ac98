// The Redis JobStore: the JobStore conformance suite against the real Redis (REDIS_URL, default
// redis://127.0.0.1:6379) with a fresh random key prefix per store, then what only a shared server
// has: two connections claiming from one prefix, and an unreachable server failing fast.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { isModelportError } from "../../src/errors.js";
import { RedisJobStore } from "../../src/jobs/stores/redis-job-store.js";
import { jobStoreConformance, newJob, T0 } from "../conformance/job-store.conformance.js";
import { jobStoreBatchConformance } from "../conformance/job-store-batch.conformance.js";
import { REDIS_URL, redisUrl } from "../helpers/redis.js";

const URL = REDIS_URL;
const prefixes: string[] = [];

function freshPrefix(): string {
  const prefix = `modelport-test:${randomUUID()}:`;
  prefixes.push(prefix);
  return prefix;
}

async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  // Prefixes are random UUIDs, so the glob characters in them need no escaping.
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== "0");
}

// The environment's Redis; one is started only when none answers there.
before(() => redisUrl());

after(async () => {
  const redis = new Redis(URL, { maxRetriesPerRequest: 1 });
  try {
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
  } finally {
    await redis.quit();
  }
});

jobStoreConformance("RedisJobStore", () => RedisJobStore.open(URL, { prefix: freshPrefix() }));
jobStoreBatchConformance("RedisJobStore", () => RedisJobStore.open(URL, { prefix: freshPrefix() }));

describe("RedisJobStore", () => {
  it("two connections claiming from one prefix: each of 200 jobs claimed and completed exactly once", async () => {
    const prefix = freshPrefix();
    const a = await RedisJobStore.open(URL, { prefix });
    const b = await RedisJobStore.open(URL, { prefix });
    try {
      const ids = new Set<string>();
      for (let i = 0; i < 200; i++) ids.add((await a.create(newJob({ priority: i % 4 }), T0 + i)).job.id);
      const claimer = async (store: RedisJobStore, worker: string): Promise<string[]> => {
        const mine: string[] = [];
        for (;;) {
          const job = await store.claim(worker, ["m"], 60_000, T0 + 1000);
          if (!job) return mine;
          mine.push(job.id);
          assert.ok(await store.complete(job.id, worker, { result: "1", resultBytes: 1 }, T0 + 1001));
        }
      };
      const perWorker = await Promise.all([
        claimer(a, "a1"),
        claimer(a, "a2"),
        claimer(b, "b1"),
        claimer(b, "b2"),
      ]);
      const all = perWorker.flat();
      assert.equal(all.length, 200, `claims per worker: ${perWorker.map((w) => w.length).join(", ")}`);
      assert.equal(new Set(all).size, 200, "no job claimed twice");
      for (const id of all) assert.ok(ids.has(id));
      assert.ok(perWorker[2]!.length + perWorker[3]!.length > 0, "the second connection claimed too");
      assert.deepEqual(await b.counts(), { queued: 0, running: 0, succeeded: 200, failed: 0, canceled: 0 });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("stores under different prefixes do not see each other", async () => {
    const a = await RedisJobStore.open(URL, { prefix: freshPrefix() });
    const b = await RedisJobStore.open(URL, { prefix: freshPrefix() });
    try {
      const { job } = await a.create(newJob(), T0);
      assert.equal(await b.get(job.id), undefined);
      assert.equal(await b.claim("w", ["m"], 1000, T0 + 1), undefined);
      assert.equal((await a.counts()).queued, 1);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("an unreachable server is MP_ERR_JOB_STORE_UNAVAILABLE, quickly, naming the URL", async () => {
    const started = Date.now();
    await assert.rejects(RedisJobStore.open("redis://127.0.0.1:1", { prefix: freshPrefix() }), (err) => {
      assert.ok(isModelportError(err));
      assert.equal(err.code, "MP_ERR_JOB_STORE_UNAVAILABLE");
      assert.match(err.message, /127\.0\.0\.1:1/);
      return true;
    });
    assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
  });

  it("purges in batches yet returns every purged job, and leaves no keys of purged jobs", async () => {
    const prefix = freshPrefix();
    const store = await RedisJobStore.open(URL, { prefix });
    try {
      for (let i = 0; i < 1200; i++) {
        const { job } = await store.create(newJob({ idempotencyKey: `k${i}`, idempotencyTtlMs: 10 }), T0);
        await store.cancel(job.id, T0 + 1);
      }
      const kept = (await store.create(newJob(), T0)).job;
      const purged = await store.purge(T0 + 2);
      assert.equal(purged.length, 1200);
      assert.equal(new Set(purged.map((j) => j.id)).size, 1200);
      assert.deepEqual(
        (await store.list({})).jobs.map((j) => j.id),
        [kept.id],
      );
      const redis = new Redis(URL);
      try {
        const idem: string[] = [];
        let cursor = "0";
        do {
          const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}idem:*`, "COUNT", 1000);
          cursor = next;
          idem.push(...keys);
        } while (cursor !== "0");
        assert.deepEqual(idem, []);
        assert.equal(await redis.exists(`${prefix}job:${purged[0]!.id}`), 0);
      } finally {
        await redis.quit();
      }
    } finally {
      await store.close();
    }
  });
});
