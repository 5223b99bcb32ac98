// The SQLite JobStore: the JobStore conformance suite on a fresh temp file per test, then what
// only a file-backed store has: the file and folder made on first use, WAL mode, jobs kept across
// restarts and process crashes, and two processes sharing one file never claiming a job twice.
//
// This file is also the child process of the multi-process tests: forked with
// MP_SQLITE_STORE_CHILD set, it runs one worker (see child()) instead of the tests.
import assert from "node:assert/strict";
import { fork } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { isModelportError } from "../../src/errors.js";
import { SqliteJobStore } from "../../src/jobs/stores/sqlite-job-store.js";
import { openSqlite } from "../../src/sqlite.js";
import { jobStoreConformance, newJob, T0 } from "../conformance/job-store.conformance.js";
import { jobStoreBatchConformance } from "../conformance/job-store-batch.conformance.js";

const CHILD_ENV = "MP_SQLITE_STORE_CHILD";

type ParentMessage = { kind: "claim"; worker: string; now: number } | { kind: "create"; n: number };
type ChildMessage =
  | { kind: "ready" }
  | { kind: "claimed"; ids: string[] }
  | { kind: "created"; ids: string[] };

/** One worker in its own process: waits for the parent's order, then claims or creates. */
async function child(path: string): Promise<void> {
  const store = await SqliteJobStore.open(path);
  const send = (m: ChildMessage) => process.send!(m);
  process.on("message", async (m: ParentMessage) => {
    if (m.kind === "claim") {
      const ids: string[] = [];
      for (;;) {
        const job = await store.claim(m.worker, ["m"], 60_000, m.now);
        if (!job) break;
        ids.push(job.id);
        const ok = await store.complete(job.id, m.worker, { result: "1", resultBytes: 1 }, m.now + 1);
        if (!ok) throw new Error(`${m.worker} lost job ${job.id}`);
      }
      await store.close();
      send({ kind: "claimed", ids });
      process.disconnect();
    } else {
      const ids: string[] = [];
      for (let i = 0; i < m.n; i++) ids.push((await store.create(newJob(), T0 + i)).job.id);
      // No close: the parent kills this process as it stands (a crash).
      send({ kind: "created", ids });
    }
  });
  send({ kind: "ready" });
}

interface Child {
  send(m: ParentMessage): void;
  next(): Promise<ChildMessage>;
  exited: Promise<number | null>;
  kill(): void;
}

function spawnChild(path: string): Child {
  // A plain script, not a test file: no test-runner flags or context, and its stdout stays out of
  // the runner's report.
  const env: NodeJS.ProcessEnv = { ...process.env, [CHILD_ENV]: path };
  delete env["NODE_TEST_CONTEXT"];
  const proc = fork(fileURLToPath(import.meta.url), [], {
    env,
    execArgv: [],
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const queue: ChildMessage[] = [];
  const waiting: ((m: ChildMessage) => void)[] = [];
  proc.on("message", (m: ChildMessage) => {
    const w = waiting.shift();
    if (w) w(m);
    else queue.push(m);
  });
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  return {
    send: (m) => proc.send(m),
    next: () => {
      const m = queue.shift();
      if (m) return Promise.resolve(m);
      return new Promise<ChildMessage>((resolve, reject) => {
        waiting.push(resolve);
        void exited.then((code) => reject(new Error(`the child exited (${code}) before answering`)));
      });
    },
    exited,
    kill: () => proc.kill("SIGKILL"),
  };
}

if (process.env[CHILD_ENV]) {
  await child(process.env[CHILD_ENV]);
} else {
  let dir: string;
  let n = 0;
  const tempFile = () => join(dir, `jobs-${++n}.db`);

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "modelport-sqlite-store-"));
  });

  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  jobStoreConformance("sqlite", () => SqliteJobStore.open(tempFile()));
  jobStoreBatchConformance("sqlite", () => SqliteJobStore.open(tempFile()));

  describe("SqliteJobStore", () => {
    it("creates the folder and the file on first use", async () => {
      const path = join(dir, "missing", "deeper", "jobs.db");
      assert.equal(existsSync(join(dir, "missing")), false);
      const store = await SqliteJobStore.open(path);
      await store.create(newJob(), T0);
      assert.ok(existsSync(path));
      await store.close();
    });

    it("runs in WAL mode", async () => {
      const path = tempFile();
      const store = await SqliteJobStore.open(path);
      await store.create(newJob(), T0);
      const db = openSqlite(path, { timeout: 1000, readonly: true });
      try {
        assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
      } finally {
        db.close();
      }
      assert.ok(existsSync(`${path}-wal`));
      await store.close();
    });

    it("keeps its jobs across a restart: reopening the file finds them as they were", async () => {
      const path = tempFile();
      const first = await SqliteJobStore.open(path);
      const keyed = (
        await first.create(newJob({ metadata: { k: 1 }, idempotencyKey: "k", requestHash: "h" }), T0)
      ).job;
      const waiting = (await first.create(newJob(), T0 + 1)).job;
      const running = await first.claim("w", ["m"], 60_000, T0 + 2);
      assert.equal(running?.id, keyed.id);
      await first.close();

      const second = await SqliteJobStore.open(path);
      assert.deepEqual(await second.get(keyed.id), running);
      assert.deepEqual(await second.get(waiting.id), waiting);
      assert.equal((await second.list({})).jobs.length, 2);
      assert.deepEqual(await second.counts(), {
        queued: 1,
        running: 1,
        succeeded: 0,
        failed: 0,
        canceled: 0,
      });
      // The idempotency key is still in force after the restart.
      const again = await second.create(newJob({ idempotencyKey: "k", requestHash: "h" }), T0 + 3);
      assert.equal(again.created, false);
      assert.equal(again.job.id, keyed.id);
      // The lease survives too: the running job is reclaimed only once it lapses.
      assert.equal((await second.claim("w2", ["m"], 60_000, T0 + 4))?.id, waiting.id);
      assert.equal(await second.claim("w3", ["m"], 60_000, T0 + 5), undefined);
      const reclaimed = await second.claim("w3", ["m"], 60_000, T0 + 2 + 60_000);
      assert.equal(reclaimed?.id, keyed.id);
      assert.equal(reclaimed?.attempts, 2);
      await second.close();
    });

    it("keeps every committed job when its process is killed without closing", async () => {
      const path = tempFile();
      const c = spawnChild(path);
      assert.equal((await c.next()).kind, "ready");
      c.send({ kind: "create", n: 50 });
      const created = await c.next();
      assert.equal(created.kind, "created");
      c.kill();
      await c.exited;
      const store = await SqliteJobStore.open(path);
      const ids = (await store.list({})).jobs.map((j) => j.id).sort();
      assert.deepEqual(ids, created.kind === "created" ? [...created.ids].sort() : []);
      await store.close();
    });

    it("two processes claiming from one file: each of 200 jobs claimed and completed exactly once", async () => {
      const path = tempFile();
      const store = await SqliteJobStore.open(path);
      const ids = new Set<string>();
      for (let i = 0; i < 200; i++) ids.add((await store.create(newJob({ priority: i % 4 }), T0 + i)).job.id);

      const children = [spawnChild(path), spawnChild(path)];
      for (const c of children) assert.equal((await c.next()).kind, "ready");
      children.forEach((c, i) => {
        c.send({ kind: "claim", worker: `proc-${i}`, now: T0 + 1000 });
      });
      // This process claims too, at the same time.
      const mine: string[] = [];
      for (;;) {
        const job = await store.claim("parent", ["m"], 60_000, T0 + 1000);
        if (!job) break;
        mine.push(job.id);
        assert.ok(await store.complete(job.id, "parent", { result: "1", resultBytes: 1 }, T0 + 1001));
      }
      const all = [...mine];
      const perProcess = [mine.length];
      for (const c of children) {
        const m = await c.next();
        assert.equal(m.kind, "claimed");
        if (m.kind === "claimed") {
          all.push(...m.ids);
          perProcess.push(m.ids.length);
        }
        assert.equal(await c.exited, 0);
      }
      assert.equal(all.length, 200, `claims per process: ${perProcess.join(", ")}`);
      assert.equal(new Set(all).size, 200, "no job claimed twice");
      for (const id of all) assert.ok(ids.has(id));
      assert.deepEqual(await store.counts(), {
        queued: 0,
        running: 0,
        succeeded: 200,
        failed: 0,
        canceled: 0,
      });
      await store.close();
    });

    it("opens a database written before jobs kept a trace and a version: adds the columns, old jobs read without them", async () => {
      const path = tempFile();
      const first = await SqliteJobStore.open(path);
      await first.create(newJob({ id: "old" }), T0);
      await first.close();
      // As an earlier modelport left it: no trace or version column.
      const db = openSqlite(path, { timeout: 1000 });
      db.exec("ALTER TABLE jobs DROP COLUMN trace");
      db.exec("ALTER TABLE jobs DROP COLUMN version");
      db.close();
      const store = await SqliteJobStore.open(path);
      try {
        assert.equal((await store.get("old"))?.trace, undefined);
        assert.equal((await store.get("old"))?.version, undefined);
        const trace = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" };
        await store.create(newJob({ id: "new", trace, version: "3" }), T0 + 1);
        assert.deepEqual((await store.get("new"))?.trace, trace);
        assert.equal((await store.get("new"))?.version, "3");
        assert.equal((await store.claim("w", ["m"], 60_000, T0 + 2))?.id, "old");
      } finally {
        await store.close();
      }
    });

    it("a path that cannot be opened is MP_ERR_JOB_STORE_UNAVAILABLE", async () => {
      const file = join(dir, "a-file");
      writeFileSync(file, "not a folder");
      await assert.rejects(SqliteJobStore.open(join(file, "jobs.db")), (err) => {
        assert.ok(isModelportError(err));
        assert.equal(err.code, "MP_ERR_JOB_STORE_UNAVAILABLE");
        assert.match(err.message, /a-file/);
        return true;
      });
      const garbage = join(dir, "garbage.db");
      writeFileSync(
        garbage,
        "this is not a database, just some text long enough to have a header".repeat(20),
      );
      await assert.rejects(SqliteJobStore.open(garbage), (err) => {
        assert.ok(isModelportError(err));
        assert.equal(err.code, "MP_ERR_JOB_STORE_UNAVAILABLE");
        return true;
      });
    });

    it("purges in short transactions yet returns every purged job", async () => {
      const store = await SqliteJobStore.open(tempFile());
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
      await store.close();
    });
  });
}
