// The JobStore conformance suite: every JobStore implementation (SQLite today, Redis next) runs
// it against a fresh, empty store per test. It checks the contracts written in
// src/jobs/job-store.ts through the interface alone; time is always passed in, never read.
//
//   jobStoreConformance("sqlite", () => SqliteJobStore.open(tempFile()));
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, it } from "node:test";
import { isModelportError } from "../../src/errors.js";
import type { FinishedJob, Job, JobStatus, NewJob } from "../../src/jobs/job.js";
import type { JobStore, JobSummary } from "../../src/jobs/job-store.js";

/** A fixed epoch for the suite's clock. */
export const T0 = 1_700_000_000_000;
const LEASE = 30_000;

export function newJob(over: Partial<NewJob> = {}): NewJob {
  return {
    id: `job-${randomUUID()}`,
    model: "m",
    input: JSON.stringify({ rows: [[1, 2, 3]] }),
    maxAttempts: 3,
    timeoutMs: 10_000,
    ...over,
  };
}

function isCode(code: string): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(isModelportError(err), `expected a ModelportError ${code}, got ${String(err)}`);
    assert.equal(err.code, code);
    return true;
  };
}

export function jobStoreConformance(name: string, open: () => Promise<JobStore>): void {
  describe(`JobStore conformance: ${name}`, () => {
    let store: JobStore;

    beforeEach(async () => {
      store = await open();
    });

    afterEach(async () => {
      await store.close();
    });

    /** Creates a job at `now` and returns it. */
    async function add(now: number, over: Partial<NewJob> = {}): Promise<Job> {
      const { job, created } = await store.create(newJob(over), now);
      assert.equal(created, true);
      return job;
    }

    async function mustGet(id: string): Promise<Job> {
      const job = await store.get(id);
      assert.ok(job, `job ${id} should exist`);
      return job;
    }

    async function mustClaim(worker: string, now: number, models: readonly string[] = ["m"]): Promise<Job> {
      const job = await store.claim(worker, models, LEASE, now);
      assert.ok(job, `${worker} should claim a job at ${now}`);
      return job;
    }

    describe("create and get", () => {
      it("creates a queued job with every field given, runnable at once", async () => {
        const input = JSON.stringify({ rows: [[0.5, 1]] });
        const nj = newJob({
          model: "churn",
          input,
          priority: 7,
          metadata: { customer: "c-1", tags: ["a", "b"], nested: { n: 1 } },
          maxAttempts: 5,
          timeoutMs: 1234,
          callbackUrl: "https://example.com/hook",
        });
        const { job, created } = await store.create(nj, T0);
        assert.equal(created, true);
        assert.equal(job.id, nj.id);
        assert.equal(job.model, "churn");
        assert.equal(job.status, "queued");
        assert.equal(job.priority, 7);
        assert.equal(job.input, input);
        assert.deepEqual(job.metadata, { customer: "c-1", tags: ["a", "b"], nested: { n: 1 } });
        assert.equal(job.createdAt, T0);
        assert.equal(job.updatedAt, T0);
        assert.equal(job.runAt, T0);
        assert.equal(job.attempts, 0);
        assert.equal(job.maxAttempts, 5);
        assert.equal(job.timeoutMs, 1234);
        assert.deepEqual(job.webhook, { url: "https://example.com/hook", attempts: 0 });
        assert.equal(job.startedAt, undefined);
        assert.equal(job.finishedAt, undefined);
        assert.equal(job.leaseOwner, undefined);
        assert.equal(job.result, undefined);
        assert.ok(!job.cancelRequested);
        assert.deepEqual(await store.get(nj.id), job);
      });

      it("defaults the priority to 0 and leaves absent optional fields absent", async () => {
        const job = await add(T0);
        assert.equal(job.priority, 0);
        assert.equal(job.metadata, undefined);
        assert.equal(job.webhook, undefined);
        assert.equal(job.idempotencyKey, undefined);
      });

      it("keeps the submitter's trace headers with the job, through claim and get; none when not given", async () => {
        const trace = {
          traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
          tracestate: "vendor=abc",
        };
        const traced = await add(T0, { trace });
        assert.deepEqual(traced.trace, trace);
        assert.deepEqual((await mustGet(traced.id)).trace, trace);
        const claimed = await mustClaim("w1", T0 + 1);
        assert.equal(claimed.id, traced.id);
        assert.deepEqual(claimed.trace, trace);
        const plain = await add(T0 + 2);
        assert.equal(plain.trace, undefined);
        assert.equal((await mustGet(plain.id)).trace, undefined);
      });

      it("keeps a pinned version with the job, through claim, get, list and retry; none when not given", async () => {
        const pinned = await add(T0, { model: "m", version: "2" });
        assert.equal(pinned.version, "2");
        assert.equal(pinned.model, "m", "the model stays the name its workers claim by");
        assert.equal((await mustGet(pinned.id)).version, "2");
        const listed = (await store.list({ model: "m" })).jobs.find((j) => j.id === pinned.id);
        assert.equal(listed?.version, "2");
        const claimed = await mustClaim("w1", T0 + 1);
        assert.equal(claimed.id, pinned.id);
        assert.equal(claimed.version, "2");
        assert.ok(await store.fail(claimed.id, "w1", { code: "E", message: "e" }, undefined, T0 + 2));
        assert.equal((await store.retry(claimed.id, T0 + 3))?.version, "2");
        const plain = await add(T0 + 4);
        assert.equal(plain.version, undefined);
        assert.equal((await mustGet(plain.id)).version, undefined);
      });

      it("get of an unknown id is undefined", async () => {
        assert.equal(await store.get("no-such-job"), undefined);
      });
    });

    describe("idempotency keys", () => {
      it("the same key and request hash returns the existing job (created: false), whatever its state", async () => {
        const first = await store.create(
          newJob({ idempotencyKey: "k1", requestHash: "h1", idempotencyTtlMs: 60_000 }),
          T0,
        );
        assert.equal(first.created, true);
        assert.equal(first.job.idempotencyKey, "k1");
        assert.equal(first.job.requestHash, "h1");
        assert.equal(first.job.idempotencyExpiresAt, T0 + 60_000);

        const again = await store.create(
          newJob({ idempotencyKey: "k1", requestHash: "h1", idempotencyTtlMs: 60_000 }),
          T0 + 10,
        );
        assert.equal(again.created, false);
        assert.equal(again.job.id, first.job.id);

        const claimed = await mustClaim("w", T0 + 20);
        assert.ok(await store.complete(claimed.id, "w", { result: '{"ok":1}', resultBytes: 8 }, T0 + 30));
        const later = await store.create(
          newJob({ idempotencyKey: "k1", requestHash: "h1", idempotencyTtlMs: 60_000 }),
          T0 + 40,
        );
        assert.equal(later.created, false);
        assert.equal(later.job.id, first.job.id);
        assert.equal(later.job.status, "succeeded");
        assert.equal(later.job.result, '{"ok":1}');
        assert.equal((await store.list({})).jobs.length, 1);
      });

      it("the same key with another request hash is MP_ERR_JOB_IDEMPOTENCY_CONFLICT and creates nothing", async () => {
        await store.create(newJob({ idempotencyKey: "k2", requestHash: "h1", idempotencyTtlMs: 60_000 }), T0);
        await assert.rejects(
          store.create(newJob({ idempotencyKey: "k2", requestHash: "h2", idempotencyTtlMs: 60_000 }), T0 + 1),
          isCode("MP_ERR_JOB_IDEMPOTENCY_CONFLICT"),
        );
        assert.equal((await store.list({})).jobs.length, 1);
        assert.equal((await store.counts()).queued, 1);
      });

      it("after idempotencyTtlMs the key no longer matches: a new job is created, even with another hash", async () => {
        const first = await store.create(
          newJob({ idempotencyKey: "k3", requestHash: "h1", idempotencyTtlMs: 1000 }),
          T0,
        );
        const inForce = await store.create(
          newJob({ idempotencyKey: "k3", requestHash: "h1", idempotencyTtlMs: 1000 }),
          T0 + 999,
        );
        assert.equal(inForce.created, false);

        const expired = await store.create(
          newJob({ idempotencyKey: "k3", requestHash: "h1", idempotencyTtlMs: 1000 }),
          T0 + 1000,
        );
        assert.equal(expired.created, true);
        assert.notEqual(expired.job.id, first.job.id);
        assert.equal(expired.job.idempotencyExpiresAt, T0 + 2000);

        // The key now protects the new job.
        const same = await store.create(
          newJob({ idempotencyKey: "k3", requestHash: "h1", idempotencyTtlMs: 1000 }),
          T0 + 1500,
        );
        assert.equal(same.created, false);
        assert.equal(same.job.id, expired.job.id);

        const otherHash = await store.create(
          newJob({ idempotencyKey: "k3", requestHash: "h9", idempotencyTtlMs: 1000 }),
          T0 + 5000,
        );
        assert.equal(otherHash.created, true);
      });

      it("different keys never interfere, and jobs without a key are never deduplicated", async () => {
        const a = await store.create(newJob({ idempotencyKey: "ka", requestHash: "h" }), T0);
        const b = await store.create(newJob({ idempotencyKey: "kb", requestHash: "h" }), T0);
        assert.notEqual(a.job.id, b.job.id);
        const c = await store.create(newJob(), T0);
        const d = await store.create(newJob(), T0);
        assert.ok(c.created && d.created);
        assert.equal((await store.counts()).queued, 4);
      });

      it("purge drops expired keys: a key whose job was purged matches nothing", async () => {
        const first = await store.create(
          newJob({ idempotencyKey: "k4", requestHash: "h1", idempotencyTtlMs: 1000 }),
          T0,
        );
        const job = await mustClaim("w", T0 + 1);
        assert.ok(await store.complete(job.id, "w", { result: "{}", resultBytes: 2 }, T0 + 2));
        const purged = await store.purge(T0 + 10_000);
        assert.deepEqual(
          purged.map((j) => j.id),
          [first.job.id],
        );
        const again = await store.create(
          newJob({ idempotencyKey: "k4", requestHash: "h2", idempotencyTtlMs: 1000 }),
          T0 + 20_000,
        );
        assert.equal(again.created, true);
      });
    });

    describe("list", () => {
      it("is newest first and filters by status and model", async () => {
        const ids: string[] = [];
        for (let i = 0; i < 12; i++) ids.push((await add(T0 + i, { model: i % 3 === 0 ? "a" : "b" })).id);
        const all = await store.list({});
        assert.deepEqual(
          all.jobs.map((j) => j.id),
          [...ids].reverse(),
        );
        assert.equal(all.nextCursor, undefined);

        const a = await store.list({ model: "a" });
        assert.deepEqual(
          a.jobs.map((j) => j.id),
          [ids[9], ids[6], ids[3], ids[0]],
        );

        const running = await mustClaim("w", T0 + 100, ["b"]);
        assert.equal(running.id, ids[1]);
        const failed = await mustClaim("w", T0 + 100, ["a"]);
        assert.ok(await store.fail(failed.id, "w", { code: "X", message: "x" }, undefined, T0 + 101));

        assert.deepEqual(
          (await store.list({ status: "running" })).jobs.map((j) => j.id),
          [ids[1]],
        );
        assert.deepEqual(
          (await store.list({ status: "failed", model: "a" })).jobs.map((j) => j.id),
          [ids[0]],
        );
        assert.deepEqual((await store.list({ status: "failed", model: "b" })).jobs, []);
        assert.equal((await store.list({ status: "queued" })).jobs.length, 10);
        assert.equal((await store.list({ status: "queued", model: "b" })).jobs.length, 7);
        assert.deepEqual((await store.list({ model: "nope" })).jobs, []);
      });

      it("pages with a cursor across pages without duplicates or gaps while new jobs arrive", async () => {
        const original = new Set<string>();
        // 45 jobs, three created in each millisecond: ties on createdAt must not lose or repeat jobs.
        for (let i = 0; i < 45; i++) original.add((await add(T0 + Math.floor(i / 3), { model: "m" })).id);

        const seen: JobSummary[] = [];
        let cursor: string | undefined;
        let pages = 0;
        let t = T0 + 10_000;
        do {
          const page = await store.list({ limit: 10, ...(cursor ? { cursor } : {}) });
          assert.ok(page.jobs.length <= 10);
          seen.push(...page.jobs);
          cursor = page.nextCursor;
          pages++;
          // New jobs arrive between page fetches (some in the same millisecond as each other).
          await add(t);
          await add(t);
          t++;
          assert.ok(pages < 20, "pagination must end");
        } while (cursor);

        const ids = seen.map((j) => j.id);
        assert.equal(new Set(ids).size, ids.length, "no job is listed twice");
        for (const id of original) assert.ok(ids.includes(id), `job ${id} missing from the pages`);
        for (let i = 1; i < seen.length; i++) {
          assert.ok(seen[i - 1]!.createdAt >= seen[i]!.createdAt, "pages are newest first");
        }
        assert.equal(pages, 5);
      });

      it("pages through a filtered list, and the page size is bounded 1..1000 with default 100", async () => {
        for (let i = 0; i < 130; i++) await add(T0 + i, { model: i % 2 ? "odd" : "even" });
        const first = await store.list({});
        assert.equal(first.jobs.length, 100);
        assert.ok(first.nextCursor);
        const rest = await store.list({ cursor: first.nextCursor });
        assert.equal(rest.jobs.length, 30);
        assert.equal(rest.nextCursor, undefined);

        const odd: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await store.list({ model: "odd", limit: 7, ...(cursor ? { cursor } : {}) });
          for (const j of page.jobs) assert.equal(j.model, "odd");
          odd.push(...page.jobs.map((j) => j.id));
          cursor = page.nextCursor;
        } while (cursor);
        assert.equal(odd.length, 65);
        assert.equal(new Set(odd).size, 65);

        assert.equal((await store.list({ limit: 1 })).jobs.length, 1);
        assert.equal((await store.list({ limit: 5000 })).jobs.length, 130);
      });

      it("an exact page ends without a next cursor or with an empty last page", async () => {
        for (let i = 0; i < 10; i++) await add(T0 + i);
        const page = await store.list({ limit: 10 });
        assert.equal(page.jobs.length, 10);
        if (page.nextCursor) assert.deepEqual((await store.list({ cursor: page.nextCursor })).jobs, []);
        assert.deepEqual(await store.list({}), { jobs: (await store.list({})).jobs });
      });
    });

    describe("cheap reads for pollers and limits", () => {
      it("state is the status and updatedAt alone, following every change; undefined for an unknown id", async () => {
        assert.equal(await store.state("no-such-job"), undefined);
        const job = await add(T0);
        assert.deepEqual(await store.state(job.id), { status: "queued", updatedAt: T0 });
        await mustClaim("w", T0 + 5);
        assert.deepEqual(await store.state(job.id), { status: "running", updatedAt: T0 + 5 });
        assert.ok(await store.renew(job.id, "w", LEASE, T0 + 6));
        assert.deepEqual(await store.state(job.id), { status: "running", updatedAt: T0 + 6 });
        assert.ok(await store.complete(job.id, "w", { result: "{}", resultBytes: 2 }, T0 + 9));
        assert.deepEqual(await store.state(job.id), { status: "succeeded", updatedAt: T0 + 9 });
      });

      it("queuedCount counts one model's queued jobs, including those waiting out a backoff", async () => {
        assert.equal(await store.queuedCount("m"), 0);
        for (let i = 0; i < 3; i++) await add(T0 + i);
        await add(T0, { model: "other" });
        assert.equal(await store.queuedCount("m"), 3);
        assert.equal(await store.queuedCount("other"), 1);
        const job = await mustClaim("w", T0 + 10);
        assert.equal(await store.queuedCount("m"), 2);
        assert.ok(await store.fail(job.id, "w", { code: "X", message: "x" }, T0 + 60_000, T0 + 11));
        assert.equal(await store.queuedCount("m"), 3);
        const queued = (await store.list({ status: "queued", model: "m" })).jobs;
        for (const j of queued) await store.cancel(j.id, T0 + 12);
        assert.equal(await store.queuedCount("m"), 0);
      });

      it("list pages are summaries: no input and no result, the rest as get returns it", async () => {
        const job = await add(T0, {
          input: JSON.stringify({ rows: [["x".repeat(1000)]] }),
          metadata: { k: 1 },
        });
        await mustClaim("w", T0 + 1);
        assert.ok(await store.complete(job.id, "w", { result: "y".repeat(1000), resultBytes: 1000 }, T0 + 2));
        const [listed] = (await store.list({})).jobs;
        assert.ok(listed);
        assert.equal("input" in listed, false);
        assert.equal("result" in listed, false);
        const { input: _input, result: _result, ...full } = await mustGet(job.id);
        assert.deepEqual(listed, full);
      });
    });

    describe("claim", () => {
      it("leases the job: running, attempts + 1, owner, lease expiry, startedAt", async () => {
        const job = await add(T0);
        const claimed = await store.claim("w1", ["m"], 5000, T0 + 10);
        assert.ok(claimed);
        assert.equal(claimed.id, job.id);
        assert.equal(claimed.status, "running");
        assert.equal(claimed.attempts, 1);
        assert.equal(claimed.leaseOwner, "w1");
        assert.equal(claimed.leaseExpiresAt, T0 + 10 + 5000);
        assert.equal(claimed.startedAt, T0 + 10);
        assert.deepEqual(await store.get(job.id), claimed);
        assert.equal(await store.claim("w2", ["m"], 5000, T0 + 11), undefined, "one job, claimed once");
      });

      it("goes by priority, then age", async () => {
        const low1 = await add(T0 + 1, { priority: 0 });
        const high2 = await add(T0 + 2, { priority: 5 });
        const high3 = await add(T0 + 3, { priority: 5 });
        const low0 = await add(T0 + 0, { priority: 0 });
        const neg = await add(T0 - 100, { priority: -1 });
        const order: string[] = [];
        for (let i = 0; i < 5; i++) order.push((await mustClaim("w", T0 + 10)).id);
        assert.deepEqual(order, [high2.id, high3.id, low0.id, low1.id, neg.id]);
        assert.equal(await store.claim("w", ["m"], LEASE, T0 + 10), undefined);
      });

      it("claims only the requested models, across several models in claim order", async () => {
        const x = await add(T0, { model: "x" });
        const y = await add(T0 + 1, { model: "y", priority: 1 });
        const z = await add(T0 + 2, { model: "z", priority: 2 });
        assert.equal(await store.claim("w", ["m"], LEASE, T0 + 10), undefined);
        assert.equal(await store.claim("w", [], LEASE, T0 + 10), undefined);
        assert.equal((await mustClaim("w", T0 + 10, ["x", "y"])).id, y.id);
        assert.equal((await mustClaim("w", T0 + 10, ["x", "y"])).id, x.id);
        assert.equal(await store.claim("w", ["x", "y"], LEASE, T0 + 10), undefined);
        assert.equal((await mustGet(z.id)).status, "queued");
      });

      it("respects runAt: a job failed with retryAt is not claimed before it", async () => {
        await add(T0);
        const job = await mustClaim("w", T0);
        assert.ok(await store.fail(job.id, "w", { code: "E", message: "boom" }, T0 + 1000, T0 + 5));
        assert.equal(await store.claim("w", ["m"], LEASE, T0 + 999), undefined);
        const again = await mustClaim("w", T0 + 1000);
        assert.equal(again.id, job.id);
        assert.equal(again.attempts, 2);
      });

      it("a job waiting out its backoff does not block others behind it", async () => {
        const first = await add(T0, { priority: 9 });
        const job = await mustClaim("w", T0 + 1);
        assert.equal(job.id, first.id);
        assert.ok(await store.fail(job.id, "w", { code: "E", message: "e" }, T0 + 60_000, T0 + 2));
        const second = await add(T0 + 3);
        assert.equal((await mustClaim("w", T0 + 4)).id, second.id);
      });
    });

    describe("leases", () => {
      it("renew extends the lease for its owner only", async () => {
        await add(T0);
        const job = await mustClaim("A", T0);
        assert.equal(await store.renew(job.id, "B", 10_000, T0 + 100), false);
        assert.equal((await mustGet(job.id)).leaseExpiresAt, T0 + LEASE);
        assert.equal(await store.renew(job.id, "A", 20_000, T0 + 20_000), true);
        const renewed = await mustGet(job.id);
        assert.equal(renewed.leaseExpiresAt, T0 + 40_000);
        assert.equal(renewed.leaseOwner, "A");
        // Renewed in time, the lease is not lapsed at the original expiry.
        assert.equal(await store.claim("B", ["m"], LEASE, T0 + LEASE + 1), undefined);
        assert.equal(await store.renew("no-such-job", "A", 10_000, T0), false);
      });

      it("a lapsed lease is reclaimed by another worker; the dead worker's calls then change nothing", async () => {
        await add(T0);
        const a = await mustClaim("A", T0);
        assert.equal(a.attempts, 1);
        assert.equal(await store.claim("B", ["m"], LEASE, T0 + LEASE - 1), undefined, "lease still held");

        const b = await mustClaim("B", T0 + LEASE + 1);
        assert.equal(b.id, a.id);
        assert.equal(b.attempts, 2, "the lost attempt counts");
        assert.equal(b.leaseOwner, "B");
        assert.equal(b.status, "running");

        const snapshot = await mustGet(a.id);
        const t = T0 + LEASE + 2;
        assert.equal(await store.complete(a.id, "A", { result: "{}", resultBytes: 2 }, t), false);
        assert.equal(await store.fail(a.id, "A", { code: "E", message: "late" }, undefined, t), false);
        assert.equal(await store.fail(a.id, "A", { code: "E", message: "late" }, t + 10, t), false);
        assert.equal(await store.renew(a.id, "A", LEASE, t), false);
        assert.equal(await store.release(a.id, "A", t), false);
        assert.equal(await store.markCanceled(a.id, "A", t), false);
        assert.deepEqual(await store.get(a.id), snapshot);

        assert.equal(await store.complete(b.id, "B", { result: '"b"', resultBytes: 3 }, t), true);
        const done = await mustGet(a.id);
        assert.equal(done.status, "succeeded");
        assert.equal(done.result, '"b"');
      });

      it("ends a job failed with MP_ERR_RUNNER_CRASHED when its lease lapses with no attempt left", async () => {
        const job = await add(T0, { maxAttempts: 2 });
        await mustClaim("A", T0);
        await mustClaim("B", T0 + LEASE + 1);
        const t = T0 + 2 * LEASE + 2;
        assert.equal(await store.claim("C", ["m"], LEASE, t), undefined);
        const failed = await mustGet(job.id);
        assert.equal(failed.status, "failed");
        assert.equal(failed.attempts, 2);
        assert.equal(failed.finishedAt, t);
        assert.equal(failed.leaseOwner, undefined);
        assert.equal(failed.lastError?.code, "MP_ERR_RUNNER_CRASHED");
        assert.match(failed.lastError?.message ?? "", /attempt 2 of 2/);
        assert.equal(await store.complete(job.id, "B", { result: "{}", resultBytes: 2 }, t + 1), false);
        assert.equal((await store.counts()).failed, 1);
      });

      it("a job exhausted on reclaim does not hide the next runnable job", async () => {
        const dead = await add(T0, { maxAttempts: 1, priority: 5 });
        await mustClaim("A", T0);
        const next = await add(T0 + 1);
        const got = await mustClaim("B", T0 + LEASE + 1);
        assert.equal(got.id, next.id);
        assert.equal((await mustGet(dead.id)).status, "failed");
      });
    });

    describe("results and failures", () => {
      it("complete records exactly one final result", async () => {
        await add(T0);
        const job = await mustClaim("w", T0);
        assert.equal(
          await store.complete(job.id, "w", { result: '{"y":[1]}', resultBytes: 9 }, T0 + 50),
          true,
        );
        const done = await mustGet(job.id);
        assert.equal(done.status, "succeeded");
        assert.equal(done.result, '{"y":[1]}');
        assert.equal(done.resultBytes, 9);
        assert.equal(done.finishedAt, T0 + 50);
        assert.equal(done.updatedAt, T0 + 50);
        assert.equal(done.leaseOwner, undefined);

        assert.equal(
          await store.complete(job.id, "w", { result: '"other"', resultBytes: 7 }, T0 + 60),
          false,
        );
        assert.equal(await store.fail(job.id, "w", { code: "E", message: "e" }, undefined, T0 + 60), false);
        assert.equal(await store.release(job.id, "w", T0 + 60), false);
        assert.deepEqual(await store.get(job.id), done);
        assert.equal(await store.complete("no-such-job", "w", { resultBytes: 0 }, T0), false);
      });

      it("complete with a blob key keeps the key and size, no inline result", async () => {
        await add(T0);
        const job = await mustClaim("w", T0);
        assert.ok(
          await store.complete(job.id, "w", { resultKey: "results/x", resultBytes: 10_000_000 }, T0 + 1),
        );
        const done = await mustGet(job.id);
        assert.equal(done.resultKey, "results/x");
        assert.equal(done.resultBytes, 10_000_000);
        assert.equal(done.result, undefined);
      });

      it("fail with retryAt puts the job back in the queue with the error and its backoff", async () => {
        await add(T0);
        const job = await mustClaim("w", T0);
        const error = { code: "MP_ERR_JOB_TIMEOUT", message: "ran longer than 10000 ms" };
        assert.equal(await store.fail(job.id, "w", error, T0 + 2000, T0 + 100), true);
        const queued = await mustGet(job.id);
        assert.equal(queued.status, "queued");
        assert.deepEqual(queued.lastError, error);
        assert.equal(queued.runAt, T0 + 2000);
        assert.equal(queued.attempts, 1);
        assert.equal(queued.leaseOwner, undefined);
        assert.equal(queued.finishedAt, undefined);
      });

      it("fail without retryAt ends the job failed with the error", async () => {
        await add(T0);
        const job = await mustClaim("w", T0);
        const error = { code: "MP_ERR_INFERENCE_FAILED", message: "bad dim" };
        assert.equal(await store.fail(job.id, "w", error, undefined, T0 + 100), true);
        const failed = await mustGet(job.id);
        assert.equal(failed.status, "failed");
        assert.deepEqual(failed.lastError, error);
        assert.equal(failed.finishedAt, T0 + 100);
        assert.equal(await store.claim("w", ["m"], LEASE, T0 + 200), undefined);
      });

      it("release gives the job back without counting the attempt", async () => {
        await add(T0);
        const job = await mustClaim("w", T0);
        assert.equal(await store.release(job.id, "other", T0 + 1), false);
        assert.equal(await store.release(job.id, "w", T0 + 1), true);
        const queued = await mustGet(job.id);
        assert.equal(queued.status, "queued");
        assert.equal(queued.attempts, 0);
        assert.equal(queued.leaseOwner, undefined);
        const again = await mustClaim("w2", T0 + 2);
        assert.equal(again.id, job.id);
        assert.equal(again.attempts, 1);
      });
    });

    describe("cancel and retry", () => {
      it("cancel of a queued job ends it canceled at once", async () => {
        const job = await add(T0);
        const canceled = await store.cancel(job.id, T0 + 5);
        assert.equal(canceled?.status, "canceled");
        assert.equal(canceled?.finishedAt, T0 + 5);
        assert.deepEqual(await store.get(job.id), canceled);
        assert.equal(await store.claim("w", ["m"], LEASE, T0 + 6), undefined);
      });

      it("cancel of a running job asks its worker, which ends it canceled", async () => {
        await add(T0);
        const job = await mustClaim("w", T0);
        const asked = await store.cancel(job.id, T0 + 5);
        assert.equal(asked?.status, "running");
        assert.equal(asked?.cancelRequested, true);
        assert.equal(asked?.leaseOwner, "w");
        assert.equal((await mustGet(job.id)).cancelRequested, true);
        assert.equal(await store.markCanceled(job.id, "other", T0 + 6), false);
        assert.equal(await store.markCanceled(job.id, "w", T0 + 7), true);
        const canceled = await mustGet(job.id);
        assert.equal(canceled.status, "canceled");
        assert.equal(canceled.finishedAt, T0 + 7);
        assert.equal(await store.complete(job.id, "w", { resultBytes: 0 }, T0 + 8), false);
      });

      it("cancel of a final job returns it unchanged; of an unknown job, undefined", async () => {
        await add(T0);
        const job = await mustClaim("w", T0);
        assert.ok(await store.complete(job.id, "w", { result: "1", resultBytes: 1 }, T0 + 1));
        const done = await mustGet(job.id);
        assert.deepEqual(await store.cancel(job.id, T0 + 2), done);
        assert.deepEqual(await store.get(job.id), done);
        assert.equal(await store.cancel("no-such-job", T0), undefined);

        const queued = await add(T0 + 3);
        await store.cancel(queued.id, T0 + 4);
        const canceled = await mustGet(queued.id);
        assert.deepEqual(await store.cancel(queued.id, T0 + 5), canceled);
      });

      it("retry puts a failed or canceled job back in the queue with fresh attempts", async () => {
        const a = await add(T0, { maxAttempts: 1 });
        const claimed = await mustClaim("w", T0);
        assert.ok(await store.fail(claimed.id, "w", { code: "E", message: "e" }, undefined, T0 + 1));
        const retried = await store.retry(a.id, T0 + 10);
        assert.equal(retried?.status, "queued");
        assert.equal(retried?.attempts, 0);
        assert.equal(retried?.finishedAt, undefined);
        assert.ok((retried?.runAt ?? Number.POSITIVE_INFINITY) <= T0 + 10);
        const again = await mustClaim("w", T0 + 10);
        assert.equal(again.id, a.id);
        assert.equal(again.attempts, 1);

        const b = await add(T0 + 20);
        await store.cancel(b.id, T0 + 21);
        const back = await store.retry(b.id, T0 + 22);
        assert.equal(back?.status, "queued");
        assert.equal(back?.attempts, 0);
        assert.equal((await mustClaim("w", T0 + 23)).id, b.id);
      });

      it("retry leaves other jobs unchanged and is undefined for an unknown id", async () => {
        const q = await add(T0);
        assert.deepEqual(await store.retry(q.id, T0 + 1), q);
        const job = await mustClaim("w", T0 + 2);
        assert.deepEqual(await store.retry(job.id, T0 + 3), job);
        assert.ok(await store.complete(job.id, "w", { result: "1", resultBytes: 1 }, T0 + 4));
        const done = await mustGet(job.id);
        assert.deepEqual(await store.retry(job.id, T0 + 5), done);
        assert.equal(await store.retry("no-such-job", T0), undefined);
      });
    });

    describe("records of finished work, and removal", () => {
      const finished = (over: Partial<FinishedJob> = {}): FinishedJob => ({
        id: `resp_${randomUUID().replaceAll("-", "")}`,
        model: "llm",
        input: JSON.stringify({ input: "hi" }),
        result: JSON.stringify({ object: "response", output: [] }),
        ...over,
      });

      it("record keeps a succeeded job with its result, listed by owner and model, never claimed", async () => {
        const rec = finished({ owner: "team-a", metadata: { k: "v" } });
        const job = await store.record(rec, T0 + 5);
        const got = await mustGet(rec.id);
        assert.deepEqual(got, job);
        assert.equal(got.status, "succeeded");
        assert.equal(got.result, rec.result);
        assert.equal(got.input, rec.input);
        assert.equal(got.owner, "team-a");
        assert.deepEqual(got.metadata, { k: "v" });
        assert.equal(got.resultBytes, Buffer.byteLength(rec.result));
        assert.equal(got.createdAt, T0 + 5);
        assert.equal(got.finishedAt, T0 + 5);
        assert.equal(got.attempts, 1);
        assert.equal(await store.claim("w", ["llm"], LEASE, T0 + 10), undefined);
        assert.equal(await store.queuedCount("llm"), 0);
        assert.equal(await store.activeCount("team-a"), 0);
        const mine = (await store.list({ owner: "team-a" })).jobs.map((j) => j.id);
        assert.deepEqual(mine, [rec.id]);
        assert.deepEqual(
          (await store.list({ model: "llm", status: "succeeded" })).jobs.map((j) => j.id),
          [rec.id],
        );
        assert.equal((await store.counts()).succeeded, 1);
        await assert.rejects(store.record(rec, T0 + 6), isCode("MP_ERR_SERVER_INTERNAL"));
      });

      it("a record is purged after its time as finished jobs are", async () => {
        const old = await store.record(finished(), T0 + 100);
        const recent = await store.record(finished(), T0 + 2000);
        const purged = await store.purge(T0 + 1000);
        assert.deepEqual(
          purged.map((j) => j.id),
          [old.id],
        );
        assert.equal(await store.get(old.id), undefined);
        assert.ok(await store.get(recent.id));
      });

      it("remove deletes a final job at once and returns it; queued, running and unknown ones stay", async () => {
        const rec = await store.record(finished({ owner: "team-a" }), T0);
        const removed = await store.remove(rec.id);
        assert.deepEqual(removed, rec);
        assert.equal(await store.get(rec.id), undefined);
        assert.deepEqual((await store.list({ owner: "team-a" })).jobs, []);
        assert.equal((await store.counts()).succeeded, 0);
        assert.deepEqual(await store.purge(T0 + 10_000), []);
        assert.equal(await store.remove(rec.id), undefined);
        assert.equal(await store.remove("no-such-job"), undefined);

        const queued = await add(T0 + 1);
        const running = await add(T0 + 2);
        assert.equal((await mustClaim("w", T0 + 3)).id, queued.id);
        assert.equal(await store.remove(queued.id), undefined);
        assert.equal(await store.remove(running.id), undefined);
        assert.equal((await mustGet(queued.id)).status, "running");
        assert.equal((await mustGet(running.id)).status, "queued");

        // A failed job with an idempotency key: removed, its key no longer answers with it.
        const keyed = await add(T0 + 4, { idempotencyKey: "k-1", requestHash: "h", maxAttempts: 1 });
        assert.equal((await mustClaim("w", T0 + 5)).id, running.id);
        assert.equal((await mustClaim("w", T0 + 5)).id, keyed.id);
        assert.ok(await store.fail(keyed.id, "w", { code: "E", message: "e" }, undefined, T0 + 6));
        assert.equal((await store.remove(keyed.id))?.status, "failed");
        const again = await store.create(newJob({ idempotencyKey: "k-1", requestHash: "h" }), T0 + 7);
        assert.equal(again.created, true);
      });
    });

    describe("webhooks, purge, counts", () => {
      it("recordWebhook persists each delivery attempt", async () => {
        const job = await add(T0, { callbackUrl: "https://example.com/cb" });
        await store.recordWebhook(job.id, {
          url: "https://example.com/cb",
          attempts: 1,
          lastStatus: 502,
          lastError: "bad gateway",
        });
        assert.deepEqual((await mustGet(job.id)).webhook, {
          url: "https://example.com/cb",
          attempts: 1,
          lastStatus: 502,
          lastError: "bad gateway",
        });
        await store.recordWebhook(job.id, {
          url: "https://example.com/cb",
          attempts: 2,
          lastStatus: 200,
          deliveredAt: T0 + 500,
        });
        assert.deepEqual((await mustGet(job.id)).webhook, {
          url: "https://example.com/cb",
          attempts: 2,
          lastStatus: 200,
          deliveredAt: T0 + 500,
        });
        await store.recordWebhook("no-such-job", { url: "https://example.com/cb", attempts: 1 });
      });

      it("purge removes only final jobs finished before the cutoff, and returns them", async () => {
        const finish = async (status: JobStatus, at: number): Promise<string> => {
          const job = await add(at - 1);
          if (status === "canceled") {
            await store.cancel(job.id, at);
            return job.id;
          }
          const claimed = await mustClaim("w", at - 1);
          assert.equal(claimed.id, job.id);
          if (status === "succeeded") {
            assert.ok(await store.complete(job.id, "w", { result: "1", resultBytes: 1 }, at));
          } else {
            assert.ok(await store.fail(job.id, "w", { code: "E", message: "e" }, undefined, at));
          }
          return job.id;
        };
        const oldOk = await finish("succeeded", T0 + 100);
        const oldFailed = await finish("failed", T0 + 200);
        const oldCanceled = await finish("canceled", T0 + 300);
        const atCutoff = await finish("succeeded", T0 + 1000);
        const recent = await finish("succeeded", T0 + 2000);
        const oldRunning = await add(T0);
        const oldQueued = await add(T0 + 1);
        assert.equal((await mustClaim("w", T0 + 3000)).id, oldRunning.id);

        const purged = await store.purge(T0 + 1000);
        assert.deepEqual(purged.map((j) => j.id).sort(), [oldOk, oldFailed, oldCanceled].sort());
        const ok = purged.find((j) => j.id === oldOk);
        assert.equal(ok?.result, "1");
        for (const id of [oldOk, oldFailed, oldCanceled]) assert.equal(await store.get(id), undefined);
        for (const id of [atCutoff, recent, oldQueued.id, oldRunning.id]) assert.ok(await store.get(id));
        assert.deepEqual(await store.purge(T0 + 1000), []);
      });

      it("counts jobs per status, every status present", async () => {
        assert.deepEqual(await store.counts(), {
          queued: 0,
          running: 0,
          succeeded: 0,
          failed: 0,
          canceled: 0,
        });
        for (let i = 0; i < 6; i++) await add(T0 + i);
        const a = await mustClaim("w", T0 + 10);
        const b = await mustClaim("w", T0 + 10);
        const c = await mustClaim("w", T0 + 10);
        await mustClaim("w", T0 + 10);
        assert.ok(await store.complete(a.id, "w", { result: "1", resultBytes: 1 }, T0 + 11));
        assert.ok(await store.fail(b.id, "w", { code: "E", message: "e" }, undefined, T0 + 11));
        assert.ok(await store.fail(c.id, "w", { code: "E", message: "e" }, T0 + 100, T0 + 11));
        const queued = (await store.list({ status: "queued" })).jobs;
        await store.cancel(queued[0]!.id, T0 + 12);
        assert.deepEqual(await store.counts(), {
          queued: 2,
          running: 1,
          succeeded: 1,
          failed: 1,
          canceled: 1,
        });
      });
    });

    describe("concurrency and lifecycle", () => {
      it("8 parallel claimers over 200 jobs: each job is claimed exactly once", async () => {
        const ids = new Set<string>();
        for (let i = 0; i < 200; i++) ids.add((await add(T0 + (i % 17), { priority: i % 3 })).id);
        const claimedBy = new Map<string, string[]>();
        const claimer = async (worker: string): Promise<number> => {
          let n = 0;
          for (;;) {
            const job = await store.claim(worker, ["m"], LEASE, T0 + 100);
            if (!job) return n;
            n++;
            claimedBy.set(job.id, [...(claimedBy.get(job.id) ?? []), worker]);
            if (n % 2 === 0) {
              assert.ok(await store.complete(job.id, worker, { result: "1", resultBytes: 1 }, T0 + 101));
            }
          }
        };
        const perWorker = await Promise.all(Array.from({ length: 8 }, (_, i) => claimer(`w${i}`)));
        assert.equal(
          perWorker.reduce((a, b) => a + b, 0),
          200,
        );
        assert.equal(claimedBy.size, 200);
        for (const [id, workers] of claimedBy) {
          assert.ok(ids.has(id));
          assert.equal(workers.length, 1, `job ${id} claimed by ${workers.join(", ")}`);
        }
        const counts = await store.counts();
        assert.equal(counts.running + counts.succeeded, 200);
        assert.equal(counts.queued, 0);
      });

      it("parallel creates with one idempotency key create one job", async () => {
        const results = await Promise.all(
          Array.from({ length: 8 }, () =>
            store.create(newJob({ idempotencyKey: "same", requestHash: "h", idempotencyTtlMs: 60_000 }), T0),
          ),
        );
        assert.equal(results.filter((r) => r.created).length, 1);
        assert.equal(new Set(results.map((r) => r.job.id)).size, 1);
      });

      it("after close, calls fail with MP_ERR_JOB_STORE_UNAVAILABLE", async () => {
        await store.close();
        await assert.rejects(store.get("x"), isCode("MP_ERR_JOB_STORE_UNAVAILABLE"));
        await assert.rejects(store.create(newJob(), T0), isCode("MP_ERR_JOB_STORE_UNAVAILABLE"));
      });

      it("a cursor it did not issue is refused as MP_ERR_REQUEST_INVALID", async () => {
        await assert.rejects(store.list({ cursor: "not-a-cursor" }), isCode("MP_ERR_REQUEST_INVALID"));
      });

      it("a lapsed lease on a job whose cancel was asked ends it canceled instead of rerunning it", async () => {
        const job = await add(T0);
        await store.claim("A", ["m"], 1000, T0);
        await store.cancel(job.id, T0 + 1);
        assert.equal(await store.claim("B", ["m"], 1000, T0 + 2000), undefined);
        const ended = await mustGet(job.id);
        assert.equal(ended.status, "canceled");
        assert.equal(ended.finishedAt, T0 + 2000);
      });

      it("close is idempotent", async () => {
        await add(T0);
        await assert.doesNotReject(store.close());
        await assert.doesNotReject(store.close());
      });
    });
  });
}
