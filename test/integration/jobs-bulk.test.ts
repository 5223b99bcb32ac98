// Bulk submission through a real listening server: POST /v1/models/{m}/jobs with {"jobs": [...]}
// answers the jobs' ids in the items' order, replays each item by its own idempotency_key (per
// key: another key's same idempotency_key is its own job, and another key's job is a 404), and
// refuses whole what is malformed or over a limit (jobs.maxBulkJobs, jobs.maxQueuedPerModel),
// storing nothing of it.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { postJson } from "../helpers/server.js";
import {
  type FaultyJobStore,
  faultyJobStore,
  type JobsServer,
  startJobsServer,
  tempSqliteStore,
} from "./jobs-harness.js";

const ROW = [3, 95, 4, 1, 0, 20];
const KEY_A = "key-a-0123456789";
const KEY_B = "key-b-0123456789";
const auth = (k: string) => ({ authorization: `Bearer ${k}` });

describe("bulk job submission", () => {
  let srv: JobsServer;
  let store: FaultyJobStore;

  before(async () => {
    store = faultyJobStore(await tempSqliteStore());
    srv = await startJobsServer({
      jobStore: store,
      apiKeys: [KEY_A, KEY_B],
      jobs: ["  maxBulkJobs: 4", "  maxQueuedPerModel: 6", "  concurrency: 1"],
    });
  });

  after(async () => {
    await srv.close();
  });

  const bulk = (jobs: unknown, key = KEY_A, headers: Record<string, string> = {}) =>
    postJson(`${srv.url}/v1/models/tree/jobs`, { jobs }, { ...auth(key), ...headers });
  const get = async (path: string, key = KEY_A) => {
    const res = await fetch(`${srv.url}${path}`, { headers: auth(key) });
    return { status: res.status, body: (await res.json()) as any };
  };
  const count = async () => (await get("/v1/jobs?limit=1000")).body.jobs.length as number;

  it("answers the jobs in the items' order, each run with its own input", async () => {
    const rows = [ROW, [1, 20, 2, 0, 1, 5], ROW];
    const res = await bulk(rows.map((r, i) => ({ rows: [r], metadata: { i }, priority: i })));
    assert.equal(res.status, 202, JSON.stringify(res.body));
    assert.equal(res.body.jobs.length, 3);
    for (const [i, view] of res.body.jobs.entries()) {
      assert.equal(view.status, "queued");
      const done = await get(`/v1/jobs/${view.id}?wait=20`);
      assert.deepEqual(done.body.metadata, { i });
      assert.equal(done.body.priority, i);
      assert.ok(done.body.owner, "the job belongs to the submitting key");
      assert.equal(done.body.status, "succeeded", JSON.stringify(done.body));
      const result = await get(`/v1/jobs/${view.id}/result`);
      const sync = await postJson(`${srv.url}/v1/models/tree/predict`, { rows: [rows[i]] }, auth(KEY_A));
      assert.deepEqual(result.body.outputs, sync.body.outputs);
    }
  });

  it("replays each item by its own idempotency_key; a changed item conflicts alone; keys are per API key", async () => {
    const items = [
      { rows: [ROW], idempotency_key: "bulk-1" },
      { rows: [ROW], idempotency_key: "bulk-2" },
    ];
    const first = await bulk(items);
    assert.equal(first.status, 202);
    const ids = first.body.jobs.map((j: any) => j.id);
    const again = await bulk(items);
    assert.equal(again.status, 200, "nothing new: every item replayed");
    assert.deepEqual(
      again.body.jobs.map((j: any) => j.id),
      ids,
    );
    assert.ok(again.body.jobs.every((j: any) => j.idempotent_replayed === true));
    const mixed = await bulk([
      { rows: [ROW], idempotency_key: "bulk-1", metadata: { changed: true } },
      { rows: [ROW], idempotency_key: "bulk-3" },
    ]);
    assert.equal(mixed.status, 202);
    assert.equal(mixed.body.jobs[0].error.code, "MP_ERR_JOB_IDEMPOTENCY_CONFLICT");
    assert.equal(mixed.body.jobs[0].id, undefined);
    assert.ok(mixed.body.jobs[1].id);
    assert.equal(mixed.body.jobs[1].idempotent_replayed, undefined);
    // Key B: the same idempotency_key makes its own job; key A's jobs are not found for it.
    const other = await bulk([items[0]], KEY_B);
    assert.equal(other.status, 202);
    assert.notEqual(other.body.jobs[0].id, ids[0]);
    assert.equal((await get(`/v1/jobs/${ids[0]}`, KEY_B)).status, 404);
    assert.equal((await get(`/v1/jobs/${other.body.jobs[0].id}`, KEY_A)).status, 404);
    assert.equal((await get(`/v1/jobs/${ids[0]}`, KEY_A)).status, 200);
  });

  it("refuses whole, storing nothing: a malformed item (naming it), too many items, an empty list, an Idempotency-Key header", async () => {
    const before = await count();
    const bad = await bulk([{ rows: [ROW] }, { rows: [[1, 2]] }]);
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /^jobs\[1\]: /);
    assert.equal(bad.body.error.details.index, 1);
    const notObject = await bulk([{ rows: [ROW] }, 7]);
    assert.equal(notObject.status, 400);
    assert.match(notObject.body.error.message, /^jobs\[1\]: /);
    const badKey = await bulk([{ rows: [ROW], idempotency_key: "" }]);
    assert.equal(badKey.status, 400);
    assert.equal(badKey.body.error.details.param, "jobs[0].idempotency_key");
    const tooMany = await bulk(Array.from({ length: 5 }, () => ({ rows: [ROW] })));
    assert.equal(tooMany.status, 413);
    assert.equal(tooMany.body.error.code, "MP_ERR_JOB_BULK_TOO_LARGE");
    assert.equal((await bulk([])).status, 400);
    assert.equal((await postJson(`${srv.url}/v1/models/tree/jobs`, { jobs: "x" }, auth(KEY_A))).status, 400);
    const header = await bulk([{ rows: [ROW] }], KEY_A, { "idempotency-key": "k" });
    assert.equal(header.status, 400);
    assert.equal(await count(), before);
  });

  it("counts every item against jobs.maxQueuedPerModel: a bulk that would pass it is refused whole", async () => {
    // The earlier tests' jobs first finish, so the queue starts empty.
    for (const key of [KEY_A, KEY_B])
      for (const j of (await get("/v1/jobs?limit=1000", key)).body.jobs)
        assert.equal((await get(`/v1/jobs/${j.id}?wait=20`, key)).body.status, "succeeded");
    store.pausedClaims = true;
    try {
      const before = await count();
      assert.equal((await bulk(Array.from({ length: 4 }, () => ({ rows: [ROW] })))).status, 202);
      const full = await bulk(Array.from({ length: 3 }, () => ({ rows: [ROW] })));
      assert.equal(full.status, 503);
      assert.equal(full.body.error.code, "MP_ERR_JOB_QUEUE_FULL");
      assert.equal(await count(), before + 4);
      assert.equal((await bulk(Array.from({ length: 2 }, () => ({ rows: [ROW] })))).status, 202);
    } finally {
      store.pausedClaims = false;
    }
  });
});
