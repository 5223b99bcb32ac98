// Both UsageStores through the conformance suite (test/conformance/usage-store.conformance.ts):
// SQLite in a fresh file of a temp folder per test, and Redis against the real server (REDIS_URL,
// default redis://127.0.0.1:6379) under a fresh random key prefix per test, all deleted after.
// Passing proves GET /v1/usage and `modelport cost --by key` answer the same from either store.
// Then groupUsage, which sums what a store returns: by key, model, hour, day, several at once, or
// into one total, sorted by time then name, with day and hour groups as UTC ISO times.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { RedisUsageStore } from "../../src/tenants/redis-usage-store.js";
import { groupUsage, HOUR_MS, SqliteUsageStore, type UsageRow } from "../../src/tenants/usage-store.js";
import { usageRow, usageStoreConformance } from "../conformance/usage-store.conformance.js";
import { deletePrefix, REDIS_URL, redisUrl, uniquePrefix } from "../helpers/redis.js";

const dir = mkdtempSync(join(tmpdir(), "modelport-usage-"));
const prefixes: string[] = [];

// The environment's Redis; one is started only when none answers there.
before(() => redisUrl());
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await deletePrefix(REDIS_URL, prefix);
});

usageStoreConformance("SqliteUsageStore", async () => ({
  // A folder not made yet: the store makes it.
  store: new SqliteUsageStore(join(dir, randomUUID(), "jobs.db")),
  close: async () => {},
}));

usageStoreConformance("RedisUsageStore", async () => {
  const prefix = uniquePrefix("usage");
  prefixes.push(prefix);
  const redis = new Redis(await redisUrl());
  return {
    store: new RedisUsageStore(redis, prefix),
    close: async () => {
      await redis.quit();
    },
  };
});

describe("SqliteUsageStore", () => {
  it("keeps usage across a reopen of its file", async () => {
    const file = join(dir, "reopen.db");
    const hour = Math.floor(Date.now() / HOUR_MS) * HOUR_MS;
    const first = new SqliteUsageStore(file);
    await first.add([usageRow(hour, "k", "m", { requests: 2, dollars: 0.25 })]);
    await first.close();
    const second = new SqliteUsageStore(file);
    await second.add([usageRow(hour, "k", "m", { requests: 1, dollars: 0.5 })]);
    const rows = await second.query(hour, hour + HOUR_MS);
    await second.close();
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.requests, 3);
    assert.equal(rows[0]!.dollars, 0.75);
  });
});

describe("groupUsage", () => {
  // 2024-03-09T22:00Z, 23:00Z and the next day's 00:00Z: two days, three hours.
  const D1 = Date.UTC(2024, 2, 9, 22);
  const rows: UsageRow[] = [
    usageRow(D1, "bob", "iris", { requests: 1, rows: 1, computeMs: 1, dollars: 0.1 }),
    usageRow(D1, "alice", "iris", { requests: 2, rows: 4, computeMs: 2, dollars: 0.2 }),
    usageRow(D1 + HOUR_MS, "alice", "chat", {
      requests: 3,
      promptTokens: 30,
      completionTokens: 3,
      dollars: 0.3,
    }),
    usageRow(D1 + 2 * HOUR_MS, "alice", "iris", { requests: 4, rows: 8, computeMs: 4, dollars: 0.4 }),
    usageRow(D1 + 2 * HOUR_MS, "bob", "chat", { requests: 5, promptTokens: 50, completionTokens: 5 }),
  ];
  const totals = (g: Record<string, unknown>) =>
    `${g["requests"]}/${g["rows"]}/${g["promptTokens"]}/${g["completionTokens"]}/${g["computeMs"]}`;

  it("with no groups: one total of every figure", () => {
    const [total, ...rest] = groupUsage(rows, []);
    assert.deepEqual(rest, []);
    assert.ok(total);
    assert.deepEqual(Object.keys(total).sort(), [
      "completionTokens",
      "computeMs",
      "dollars",
      "promptTokens",
      "requests",
      "rows",
    ]);
    assert.equal(totals(total), "15/13/80/8/7");
    assert.ok(Math.abs(total.dollars - 1.0) < 1e-9);
  });

  it("with no rows: no groups", () => {
    assert.deepEqual(groupUsage([], []), []);
    assert.deepEqual(groupUsage([], ["key", "day"]), []);
  });

  it("by key, sorted by name", () => {
    const groups = groupUsage(rows, ["key"]);
    assert.deepEqual(
      groups.map((g) => [g["key"], totals(g)]),
      [
        ["alice", "9/12/30/3/6"],
        ["bob", "6/1/50/5/1"],
      ],
    );
    assert.ok(Math.abs(groups[0]!.dollars - 0.9) < 1e-9);
    assert.ok(Math.abs(groups[1]!.dollars - 0.1) < 1e-9);
    assert.equal("model" in groups[0]!, false, "only the grouped fields label a group");
  });

  it("by model", () => {
    assert.deepEqual(
      groupUsage(rows, ["model"]).map((g) => [g["model"], totals(g)]),
      [
        ["chat", "8/0/80/8/0"],
        ["iris", "7/13/0/0/7"],
      ],
    );
  });

  it("by day (UTC): hours before and after midnight fall on their own days", () => {
    assert.deepEqual(
      groupUsage(rows, ["day"]).map((g) => [g["day"], totals(g)]),
      [
        ["2024-03-09", "6/5/30/3/3"],
        ["2024-03-10", "9/8/50/5/4"],
      ],
    );
  });

  it("by hour: ISO times of the hour's start", () => {
    assert.deepEqual(
      groupUsage(rows, ["hour"]).map((g) => [g["hour"], g["requests"]]),
      [
        ["2024-03-09T22:00:00.000Z", 3],
        ["2024-03-09T23:00:00.000Z", 3],
        ["2024-03-10T00:00:00.000Z", 9],
      ],
    );
  });

  it("by key and model, and by day and key: time first, then key, then model", () => {
    assert.deepEqual(
      groupUsage(rows, ["key", "model"]).map((g) => `${g["key"]} ${g["model"]} ${g["requests"]}`),
      ["alice chat 3", "alice iris 6", "bob chat 5", "bob iris 1"],
    );
    // The order of groupBy does not change the order of the groups: days come first.
    assert.deepEqual(
      groupUsage(rows, ["key", "day"]).map((g) => `${g["day"]} ${g["key"]} ${g["requests"]}`),
      ["2024-03-09 alice 5", "2024-03-09 bob 1", "2024-03-10 alice 4", "2024-03-10 bob 5"],
    );
  });

  it("leaves the rows it is given unchanged", () => {
    const before = JSON.stringify(rows);
    groupUsage(rows, ["key"]);
    groupUsage(rows, []);
    assert.equal(JSON.stringify(rows), before);
  });
});
