// A running job's lease lapsing under a live worker (a process stalled longer than leaseMs), through
// a real listening server and the real SQLite store: the store's renewals are held back, another
// worker loop of the same process claims the job, and when the first loop's renewal finally
// arrives it is refused. The first run is abandoned (its outcome is not written; the log says the
// lease was lost), the second run's result is the one stored.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import { writeControlHandler } from "../fixtures/handlers.js";
import { postJson } from "../helpers/server.js";
import {
  type FaultyJobStore,
  faultyJobStore,
  type JobsServer,
  startJobsServer,
  tempSqliteStore,
  until,
} from "./jobs-harness.js";

describe("a lease lapsing under a live worker", () => {
  let srv: JobsServer;
  let store: FaultyJobStore;
  let dir: string;
  const logs: { msg: string; jobId?: string }[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "modelport-jobs-lease-"));
    writeControlHandler(dir);
    store = faultyJobStore(await tempSqliteStore());
    srv = await startJobsServer({
      jobStore: store,
      jobs: ["  concurrency: 2", "  leaseMs: 1000", "  maxAttempts: 3"],
      models: [
        `  - {name: ctl, backend: custom, path: ${join(dir, "control-handler.mjs")}, options: {dir: ${dir}, log: ${join(dir, "calls.log")}}}`,
      ],
      logger: pino({ level: "warn" }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
    });
  });

  after(async () => {
    writeFileSync(join(dir, "gate-1"), "");
    await srv.close();
  });

  it("the other run takes over: the first one's renewal and outcome are refused and the lease loss is logged", async () => {
    store.heldRenewals = true;
    const sub = await postJson(`${srv.url}/v1/models/ctl/jobs`, { rows: [[-1]] });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    const id = sub.body.id as string;
    const job = async () => (await (await fetch(`${srv.url}/v1/jobs/${id}`)).json()) as any;

    // The first loop runs it (held at the gate) without renewing; once the lease lapses the
    // second loop claims it: attempt 2, while attempt 1 is still running.
    assert.ok(await until(async () => (await job()).attempts === 2, 60_000), JSON.stringify(await job()));
    store.heldRenewals = false;
    assert.ok(
      await until(async () => logs.some((l) => l.jobId === id && /lost the lease/.test(l.msg)), 60_000),
      "the first run reports its lost lease",
    );

    writeFileSync(join(dir, "gate-1"), "");
    const done = (await (await fetch(`${srv.url}/v1/jobs/${id}?wait=30`)).json()) as any;
    assert.equal(done.status, "succeeded", JSON.stringify(done));
    assert.equal(done.attempts, 2);
    const result = (await (await fetch(`${srv.url}/v1/jobs/${id}/result`)).json()) as any;
    assert.deepEqual(result.outputs.y, [[-2]]);
    // One outcome written: the second run's result. The first run's cancellation was refused,
    // and it never wrote a result over the second one's. Both runs left the gate together, so the
    // first one's refused cancellation may come after the job reads as succeeded: wait for it.
    assert.ok(
      await until(async () => store.calls.get("markCanceled") !== undefined, 30_000),
      "the first run tried to record its cancellation",
    );
    assert.equal(store.calls.get("complete"), 1);
    assert.equal(store.calls.get("markCanceled"), 1);
    assert.equal(logs.filter((l) => /lost the lease/.test(l.msg)).length, 1);
  });
});
