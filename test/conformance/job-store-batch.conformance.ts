// The JobStore conformance suite for the batch methods (createMany, claimMany, completeMany):
// they keep the guarantees of create, claim and complete (idempotency, claim order, runAt,
// leases and fencing) while many jobs go in one store call. Run beside job-store.conformance.ts
// against a fresh, empty store per test; time is always passed in, never read.
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import type { Job, NewJob } from "../../src/jobs/job.js";
import type { CreateResult, JobStore } from "../../src/jobs/job-store.js";
import { newJob, T0 } from "./job-store.conformance.js";

const LEASE = 30_000;

function created(result: unknown): CreateResult {
  assert.ok(result && typeof result === "object" && "job" in result, `expected a job, got ${String(result)}`);
  return result as CreateResult;
}

export function jobStoreBatchConformance(name: string, open: () => Promise<JobStore>): void {
  describe(`JobStore batch conformance: ${name}`, () => {
    let store: JobStore;

    beforeEach(async () => {
      store = await open();
    });

    afterEach(async () => {
      await store.close();
    });

    async function add(now: number, over: Partial<NewJob> = {}): Promise<Job> {
      const { job } = await store.create(newJob(over), now);
      return job;
    }

    describe("createMany", () => {
      it("stores every job, in order, as create would", async () => {
        const jobs = [newJob({ priority: 2 }), newJob({ metadata: { n: 1 } }), newJob({ model: "x" })];
        const results = await store.createMany(jobs, T0);
        assert.equal(results.length, 3);
        for (const [i, r] of results.entries()) {
          const { job, created: isNew } = created(r);
          assert.equal(isNew, true);
          assert.equal(job.id, jobs[i]!.id);
          assert.equal(job.status, "queued");
          assert.deepEqual(await store.get(job.id), job);
        }
        assert.equal(await store.queuedCount("m"), 2);
        assert.deepEqual(await store.createMany([], T0), []);
      });

      it("idempotency per item: a replay answers the first job, a conflict fails only its item", async () => {
        const first = await add(T0, { idempotencyKey: "k1", requestHash: "h1" });
        const a = newJob({ idempotencyKey: "k1", requestHash: "h1" });
        const b = newJob({ idempotencyKey: "k1", requestHash: "other" });
        const c = newJob({ idempotencyKey: "k2", requestHash: "h2" });
        const d = newJob({ idempotencyKey: "k2", requestHash: "h2" });
        const results = await store.createMany([a, b, c, d], T0 + 1);
        const ra = created(results[0]);
        assert.equal(ra.created, false);
        assert.equal(ra.job.id, first.id);
        const rb = results[1]!;
        assert.ok("error" in rb);
        assert.equal(rb.error.code, "MP_ERR_JOB_IDEMPOTENCY_CONFLICT");
        const rc = created(results[2]);
        assert.equal(rc.created, true);
        assert.equal(rc.job.id, c.id);
        // A key set by an earlier item of the same call protects the later one.
        const rd = created(results[3]);
        assert.equal(rd.created, false);
        assert.equal(rd.job.id, c.id);
        assert.equal(await store.get(a.id), undefined);
        assert.equal(await store.get(b.id), undefined);
        assert.equal(await store.get(d.id), undefined);
        assert.equal(await store.queuedCount("m"), 2);
      });
    });

    describe("states", () => {
      it("answers the status and updatedAt of each job that exists, in one call", async () => {
        const a = await add(T0);
        const b = await add(T0 + 1);
        const [claimed] = await store.claimMany("w", ["m"], 1, LEASE, T0 + 5);
        assert.equal(claimed?.id, a.id);
        const many = Array.from({ length: 450 }, (_, i) => `missing-${i}`);
        const states = await store.states([a.id, "nope", b.id, ...many]);
        assert.equal(states.size, 2);
        assert.deepEqual(states.get(a.id), { status: "running", updatedAt: T0 + 5 });
        assert.deepEqual(states.get(b.id), { status: "queued", updatedAt: T0 + 1 });
        assert.equal((await store.states([])).size, 0);
      });
    });

    describe("claimMany", () => {
      it("hands out up to max jobs in claim order: priority, then age; runAt respected", async () => {
        const low1 = await add(T0 + 1);
        const high = await add(T0 + 2, { priority: 5 });
        const low0 = await add(T0 + 0);
        const waiting = await add(T0 - 10, { priority: 9 });
        const w = await store.claim("w0", ["m"], LEASE, T0 + 3);
        assert.equal(w?.id, waiting.id);
        assert.ok(await store.fail(waiting.id, "w0", { code: "E", message: "e" }, T0 + 1000, T0 + 4));
        const other = await add(T0, { model: "x" });
        const first = await store.claimMany("w", ["m"], 2, 5000, T0 + 10);
        assert.deepEqual(
          first.map((j) => j.id),
          [high.id, low0.id],
        );
        for (const job of first) {
          assert.equal(job.status, "running");
          assert.equal(job.leaseOwner, "w");
          assert.equal(job.leaseExpiresAt, T0 + 10 + 5000);
          assert.equal(job.attempts, 1);
          assert.deepEqual(await store.get(job.id), job);
        }
        const rest = await store.claimMany("w", ["m"], 10, 5000, T0 + 11);
        assert.deepEqual(
          rest.map((j) => j.id),
          [low1.id],
          "the job waiting out its backoff is not handed out before its runAt",
        );
        assert.deepEqual(await store.claimMany("w", ["m"], 10, 5000, T0 + 12), []);
        assert.deepEqual(await store.claimMany("w", [], 10, 5000, T0 + 12), []);
        assert.equal((await store.get(other.id))?.status, "queued");
        const due = await store.claimMany("w", ["m", "x"], 10, 5000, T0 + 1000);
        assert.deepEqual(
          due.map((j) => j.id),
          [waiting.id, other.id],
        );
        assert.equal(due[0]!.attempts, 2);
      });

      it("never hands one job to two workers, however many claim at once", async () => {
        const ids = new Set<string>();
        const jobs = Array.from({ length: 60 }, (_, i) => newJob({ priority: i % 3 }));
        for (const r of await store.createMany(jobs, T0)) ids.add(created(r).job.id);
        const claimer = async (worker: string): Promise<string[]> => {
          const mine: string[] = [];
          for (;;) {
            const batch = await store.claimMany(worker, ["m"], 7, LEASE, T0 + 100);
            if (batch.length === 0) return mine;
            for (const job of batch) assert.equal(job.leaseOwner, worker);
            mine.push(...batch.map((j) => j.id));
          }
        };
        const all = (await Promise.all(["a", "b", "c", "d"].map(claimer))).flat();
        assert.equal(all.length, 60);
        assert.deepEqual(new Set(all), ids);
      });

      it("takes back jobs whose lease lapsed, and their old worker's outcome is refused", async () => {
        await add(T0);
        await add(T0 + 1);
        const [lapsing] = await store.claimMany("old", ["m"], 1, 1000, T0 + 2);
        assert.ok(lapsing);
        const taken = await store.claimMany("new", ["m"], 5, LEASE, T0 + 5000);
        assert.deepEqual(new Set(taken.map((j) => j.id)).has(lapsing.id), true);
        assert.equal(taken.length, 2);
        const again = taken.find((j) => j.id === lapsing.id)!;
        assert.equal(again.attempts, 2);
        const outcome = await store.completeMany(
          [
            { id: lapsing.id, worker: "old", result: { result: '"old"', resultBytes: 5 } },
            ...taken.map((j) => ({ id: j.id, worker: "new", result: { result: '"new"', resultBytes: 5 } })),
          ],
          T0 + 5001,
        );
        assert.deepEqual(outcome, [false, true, true]);
        for (const job of taken) assert.equal((await store.get(job.id))?.result, '"new"');
      });
    });

    describe("completeMany", () => {
      it("records each result as complete would, and refuses those whose lease is not held", async () => {
        for (let i = 0; i < 4; i++) await add(T0 + i);
        const jobs = await store.claimMany("w", ["m"], 4, LEASE, T0 + 10);
        assert.equal(jobs.length, 4);
        const [a, b, c, d] = jobs as [Job, Job, Job, Job];
        assert.ok(await store.complete(d.id, "w", { result: "1", resultBytes: 1 }, T0 + 11));
        const answers = await store.completeMany(
          [
            { id: a.id, worker: "w", result: { result: '{"a":1}', resultBytes: 7 } },
            { id: b.id, worker: "someone-else", result: { result: "2", resultBytes: 1 } },
            { id: c.id, worker: "w", result: { resultKey: "results/c.json", resultBytes: 1000 } },
            { id: d.id, worker: "w", result: { result: "again", resultBytes: 5 } },
            { id: "no-such-job", worker: "w", result: { result: "x", resultBytes: 1 } },
          ],
          T0 + 20,
        );
        assert.deepEqual(answers, [true, false, true, false, false]);
        const ga = await store.get(a.id);
        assert.equal(ga?.status, "succeeded");
        assert.equal(ga?.result, '{"a":1}');
        assert.equal(ga?.finishedAt, T0 + 20);
        assert.equal(ga?.leaseOwner, undefined);
        assert.equal((await store.get(b.id))?.status, "running");
        const gc = await store.get(c.id);
        assert.equal(gc?.resultKey, "results/c.json");
        assert.equal(gc?.result, undefined);
        assert.equal((await store.get(d.id))?.result, "1", "a final job is not written twice");
        assert.deepEqual(await store.completeMany([], T0), []);
        const counts = await store.counts();
        assert.equal(counts.succeeded, 3);
        assert.equal(counts.running, 1);
      });
    });
  });
}
