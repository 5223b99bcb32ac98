// The contract every LimitStore keeps (src/tenants/limit-store.ts), as one suite any store can be
// run through: a key never seen has a full bucket; `take` refuses once it is empty and says how
// long to wait; buckets refill over real time up to their capacity; `charge` may go below zero,
// after which `peek` refuses until the bucket has refilled; `peek` takes nothing; keys (and bucket
// versus lease keys) are independent; leases allow `max` holders, `release` frees one (an unknown
// lease is harmless), and a lease frees its slot once its ttl lapses; and every step is atomic —
// 200 concurrent takes from a 50-token bucket allow exactly 50.
//
// The stores read their own clock (Redis: the server's), so time here is real time. Timing
// assertions are one-sided and load-proof: a wait guarantees at least so much refill, never at
// most; where a refusal depends on little time having passed, the bucket refills slowly enough
// (minutes or hours) that no plausible delay matters.
//
//   limitStoreConformance("memory", async () => ({ store: new MemoryLimitStore(), close: async () => {} }));
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { Bucket, LimitStore } from "../../src/tenants/limit-store.js";

export interface LimitStoreFixture {
  store: LimitStore;
  /** Frees what the fixture made (connections); the suite closes the store first. */
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A bucket that refills so slowly (one token per 100 s) that no test waits long enough to see it. */
const SLOW = 0.01;

/** retryAfterMs is rounded up to whole ms (of a figure with float error): allow that over the exact one. */
const ROUNDING_MS = 2;

/** Registers the conformance suite for the store `make` builds (once, before the tests). */
export function limitStoreConformance(name: string, make: () => Promise<LimitStoreFixture>): void {
  describe(`LimitStore conformance: ${name}`, () => {
    let fixture: LimitStoreFixture;
    let store: LimitStore;
    // Every test uses keys of its own, so one store serves the whole suite.
    const key = (tag: string) => `conf-${tag}-${randomUUID()}`;

    before(async () => {
      fixture = await make();
      store = fixture.store;
    });
    after(async () => {
      await store?.close();
      await fixture?.close();
    });

    it("a key never seen has a full bucket: capacity takes allowed, the next refused with a retry", async () => {
      const k = key("full");
      const bucket: Bucket = { capacity: 5, perSecond: SLOW };
      for (let i = 1; i <= 5; i++) {
        const r = await store.bucket(k, bucket, 1, "take");
        assert.equal(r.allowed, true, `take ${i} of 5`);
        assert.equal(r.retryAfterMs, 0, "an allowed call has nothing to wait for");
        assert.ok(r.tokens >= 5 - i && r.tokens < 5 - i + 0.5, `tokens after take ${i}: ${r.tokens}`);
      }
      const refused = await store.bucket(k, bucket, 1, "take");
      assert.equal(refused.allowed, false, "the sixth take is refused");
      assert.ok(refused.tokens >= 0 && refused.tokens < 1, `a refused take takes nothing: ${refused.tokens}`);
      assert.ok(refused.retryAfterMs > 0, `retryAfterMs ${refused.retryAfterMs} > 0`);
      assert.ok(
        refused.retryAfterMs <= (1000 / SLOW) * 1 + ROUNDING_MS,
        `retryAfterMs ${refused.retryAfterMs} ≤ the time one token takes`,
      );
      // Still refused: the refusal took nothing but gave nothing back either.
      assert.equal((await store.bucket(k, bucket, 1, "take")).allowed, false);
    });

    it("a take of several tokens: allowed while that many are there, its retry scaled by the cost", async () => {
      const k = key("cost");
      const bucket: Bucket = { capacity: 10, perSecond: 2 * SLOW };
      for (let i = 1; i <= 3; i++) assert.equal((await store.bucket(k, bucket, 3, "take")).allowed, true);
      // One token (and a sliver of refill) left: a take of 3 is refused, a take of 1 is not.
      const refused = await store.bucket(k, bucket, 3, "take");
      assert.equal(refused.allowed, false);
      assert.ok(refused.retryAfterMs > 0);
      assert.ok(
        refused.retryAfterMs <= (1000 / bucket.perSecond) * 3 + ROUNDING_MS,
        `retryAfterMs ${refused.retryAfterMs} ≤ the time three tokens take`,
      );
      assert.equal((await store.bucket(k, bucket, 1, "take")).allowed, true);
    });

    it("refills over real time, up to its capacity and no further", async () => {
      const k = key("refill");
      const bucket: Bucket = { capacity: 10, perSecond: 1000 };
      const drained = await store.bucket(k, bucket, 10, "charge");
      assert.equal(drained.allowed, true);
      assert.equal(drained.tokens, 0, "a charge of the whole capacity empties a fresh bucket");
      await sleep(30);
      // 30 ms at 1000/s is 30 tokens' worth; the bucket holds 10 at most. Assert only lower bounds.
      const one = await store.bucket(k, bucket, 1, "take");
      assert.equal(one.allowed, true, "at least one token is back after 30 ms");
      assert.ok(one.tokens >= 1, `tokens after the take: ${one.tokens}`);
      await sleep(30);
      const tooMany = await store.bucket(k, bucket, 11, "take");
      assert.equal(tooMany.allowed, false, "refill stops at capacity: 11 tokens are never there");
      assert.ok(tooMany.tokens <= 10, `tokens ${tooMany.tokens} ≤ capacity`);
      assert.equal((await store.bucket(k, bucket, 10, "take")).allowed, true, "the full 10 are back");
    });

    it("charge goes below zero; peek then refuses until the bucket has refilled", async () => {
      const slow = key("charge-slow");
      const bucket: Bucket = { capacity: 5, perSecond: SLOW };
      const charged = await store.bucket(slow, bucket, 8, "charge");
      assert.equal(charged.allowed, true, "a charge is always allowed");
      assert.equal(charged.tokens, -3, "a fresh bucket of 5 charged 8 holds -3");
      const again = await store.bucket(slow, bucket, 2, "charge");
      assert.equal(again.allowed, true, "a charge is allowed even below zero");
      assert.ok(again.tokens < -4.9 && again.tokens > -5.1, `tokens ${again.tokens} ≈ -5`);
      const peek = await store.bucket(slow, bucket, 1, "peek");
      assert.equal(peek.allowed, false, "peek refuses a bucket below zero");
      assert.ok(peek.tokens < 0);
      assert.ok(peek.retryAfterMs > 0, `retryAfterMs ${peek.retryAfterMs} > 0`);
      assert.ok(
        peek.retryAfterMs <= (1000 / SLOW) * 5 + ROUNDING_MS,
        `retryAfterMs ${peek.retryAfterMs} ≤ the time 5 tokens take`,
      );
      assert.equal((await store.bucket(slow, bucket, 1, "take")).allowed, false, "take refuses too");

      // A faster bucket, 20 tokens in debt at 200/s: refilled after its retryAfterMs (plus slack).
      const fast = key("charge-fast");
      const quick: Bucket = { capacity: 5, perSecond: 200 };
      assert.equal((await store.bucket(fast, quick, 25, "charge")).tokens, -20);
      const refused = await store.bucket(fast, quick, 1, "peek");
      assert.equal(refused.allowed, false, "20 tokens in debt refill in 100 ms: peek refuses now");
      await sleep(refused.retryAfterMs + 20);
      const later = await store.bucket(fast, quick, 1, "peek");
      assert.equal(later.allowed, true, `peek allows once refilled (tokens ${later.tokens})`);
      assert.ok(later.tokens > 0);
    });

    it("peek takes nothing", async () => {
      const k = key("peek");
      const bucket: Bucket = { capacity: 3, perSecond: SLOW };
      for (let i = 0; i < 10; i++) {
        const r = await store.bucket(k, bucket, 1, "peek");
        assert.equal(r.allowed, true);
        assert.equal(r.tokens, 3, "a full bucket stays full");
      }
      assert.equal((await store.bucket(k, bucket, 1, "take")).allowed, true);
      for (let i = 0; i < 5; i++) {
        const r = await store.bucket(k, bucket, 2, "peek");
        assert.equal(r.allowed, true);
        assert.ok(r.tokens >= 2 && r.tokens < 2.1, `tokens ${r.tokens} ≈ 2`);
      }
      assert.equal((await store.bucket(k, bucket, 2, "take")).allowed, true, "both tokens are still there");
      assert.equal((await store.bucket(k, bucket, 1, "take")).allowed, false, "and then none");
    });

    it("buckets of different keys are independent, and bucket keys do not touch lease keys", async () => {
      const a = key("a");
      const b = key("b");
      const bucket: Bucket = { capacity: 2, perSecond: SLOW };
      assert.equal((await store.bucket(a, bucket, 2, "take")).allowed, true);
      assert.equal((await store.bucket(a, bucket, 1, "take")).allowed, false, "a is empty");
      const fromB = await store.bucket(b, bucket, 2, "take");
      assert.equal(fromB.allowed, true, "b is still full");
      assert.equal(fromB.tokens, 0);
      await store.bucket(b, bucket, 100, "charge");
      assert.equal(
        (await store.bucket(a, bucket, 1, "take")).allowed,
        false,
        "a charge on b gives a nothing",
      );
      assert.equal((await store.bucket(key("c"), bucket, 1, "peek")).tokens, 2, "a third key is full");
      // The same name as a lease key: a separate thing.
      assert.equal(await store.acquire(a, 1, "lease-1", 60_000), true, "an empty bucket's name leases");
      assert.equal((await store.bucket(a, bucket, 1, "take")).allowed, false, "and the bucket is unchanged");
      await store.release(a, "lease-1");
    });

    it("acquire allows max leases then refuses; release frees one; an unknown lease is harmless", async () => {
      const k = key("lease");
      for (const lease of ["l1", "l2", "l3"]) assert.equal(await store.acquire(k, 3, lease, 60_000), true);
      assert.equal(await store.acquire(k, 3, "l4", 60_000), false, "all 3 held");
      assert.equal(await store.acquire(k, 3, "l4", 60_000), false, "a refusal holds nothing, still full");
      await store.release(k, "l2");
      assert.equal(await store.acquire(k, 3, "l4", 60_000), true, "released slot taken");
      assert.equal(await store.acquire(k, 3, "l5", 60_000), false, "full again");
      await store.release(k, "no-such-lease");
      await store.release(k, "l2"); // released already
      await store.release(key("never-seen"), "l1");
      assert.equal(await store.acquire(k, 3, "l5", 60_000), false, "releasing unknown leases freed nothing");
      for (const lease of ["l1", "l3", "l4"]) await store.release(k, lease);
      for (const lease of ["m1", "m2", "m3"]) {
        assert.equal(await store.acquire(k, 3, lease, 60_000), true, `after releasing all: ${lease}`);
      }
      for (const lease of ["m1", "m2", "m3"]) await store.release(k, lease);
      const other = key("lease-other");
      assert.equal(await store.acquire(other, 1, "x", 60_000), true, "another key has its own slots");
      await store.release(other, "x");
    });

    it("a lease that lapses (ttlMs 30) frees its slot", async () => {
      const k = key("ttl");
      const started = performance.now();
      assert.equal(await store.acquire(k, 1, "short", 30), true);
      const second = await store.acquire(k, 1, "other", 60_000);
      // Only when under 30 ms have passed is the short lease surely still held.
      if (performance.now() - started < 25) assert.equal(second, false, "held until it lapses");
      if (second) await store.release(k, "other");
      await sleep(60);
      assert.equal(await store.acquire(k, 1, "after", 60_000), true, "the lapsed lease's slot is free");
      assert.equal(await store.acquire(k, 1, "short", 60_000), false, "and taken by the new holder");
      await store.release(k, "after");
    });

    it("200 concurrent takes from a 50-token bucket: exactly 50 allowed", async () => {
      const k = key("atomic");
      const bucket: Bucket = { capacity: 50, perSecond: 0.001 };
      const results = await Promise.all(
        Array.from({ length: 200 }, () => store.bucket(k, bucket, 1, "take")),
      );
      const allowed = results.filter((r) => r.allowed).length;
      assert.equal(allowed, 50);
      for (const r of results) assert.ok(r.tokens >= 0 && r.tokens < 50, `tokens ${r.tokens}`);
    });

    it("100 concurrent acquires with max 10: exactly 10 held", async () => {
      const k = key("atomic-lease");
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) => store.acquire(k, 10, `lease-${i}`, 60_000)),
      );
      assert.equal(results.filter(Boolean).length, 10);
      await Promise.all(results.map((held, i) => (held ? store.release(k, `lease-${i}`) : undefined)));
      assert.equal(await store.acquire(k, 10, "after", 60_000), true);
      await store.release(k, "after");
    });
  });
}
