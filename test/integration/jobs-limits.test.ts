// Bounds on jobs and their streams through a real listening server: input and metadata sizes,
// keys that are not the input are not stored, queued jobs per model, list pages of summaries,
// long-polls and event streams that do not re-read the whole job every second, stream slots
// (total and per API key) and the longest life of an event stream.
import assert from "node:assert/strict";
import { get as httpGet } from "node:http";
import { after, before, describe, it } from "node:test";
import { postJson } from "../helpers/server.js";
import {
  type FaultyJobStore,
  faultyJobStore,
  type JobsServer,
  startJobsServer,
  tempSqliteStore,
  until,
} from "./jobs-harness.js";

const ROW = [3, 95, 4, 1, 0, 20];
const KEY_A = "key-a-0123456789";
const KEY_B = "key-b-0123456789";
const auth = (k: string) => ({ authorization: `Bearer ${k}` });

describe("job limits", () => {
  let srv: JobsServer;
  let store: FaultyJobStore;

  before(async () => {
    store = faultyJobStore(await tempSqliteStore());
    srv = await startJobsServer({
      jobStore: store,
      apiKeys: [KEY_A, KEY_B],
      limits: ["  maxStreams: 3", "  maxStreamsPerKey: 2"],
      jobs: [
        "  maxInputBytes: 2000",
        "  maxMetadataBytes: 1024",
        "  maxQueuedPerModel: 3",
        "  concurrency: 1",
      ],
    });
  });

  after(async () => {
    await srv.close();
  });

  const submit = (body: unknown, model = "tree", key = KEY_A) =>
    postJson(`${srv.url}/v1/models/${model}/jobs`, body, auth(key));
  const get = async (path: string) => {
    const res = await fetch(`${srv.url}${path}`, { headers: auth(KEY_A) });
    const text = await res.text();
    return { status: res.status, bytes: Buffer.byteLength(text), body: JSON.parse(text) as any };
  };
  /** Cancels whatever is queued, so each test starts with an empty queue. */
  const drainQueue = async () => {
    for (const j of (await get("/v1/jobs?status=queued&limit=1000")).body.jobs)
      await fetch(`${srv.url}/v1/jobs/${j.id}`, { method: "DELETE", headers: auth(KEY_A) });
  };

  it("an input over jobs.maxInputBytes is 413 MP_ERR_JOB_PAYLOAD_TOO_LARGE; keys that are not the input do not count and are not stored", async () => {
    const big = await submit({ rows: Array.from({ length: 300 }, () => ROW) });
    assert.equal(big.status, 413, JSON.stringify(big.body));
    assert.equal(big.body.error.code, "MP_ERR_JOB_PAYLOAD_TOO_LARGE");
    assert.match(big.body.error.message, /jobs\.maxInputBytes/);
    const junk = await submit({ rows: [ROW], junk: "x".repeat(50_000), nested: { a: "y".repeat(10_000) } });
    assert.equal(junk.status, 202, JSON.stringify(junk.body));
    const stored = await srv.server.jobs.get(junk.body.id);
    assert.equal(stored?.input, JSON.stringify({ rows: [ROW] }));
  });

  it("metadata over jobs.maxMetadataBytes is 413; a long callback_url is 413", async () => {
    const big = await submit({ rows: [ROW], metadata: { note: "m".repeat(2000) } });
    assert.equal(big.status, 413);
    assert.equal(big.body.error.code, "MP_ERR_JOB_PAYLOAD_TOO_LARGE");
    assert.match(big.body.error.message, /jobs\.maxMetadataBytes/);
    const url = await submit({ rows: [ROW], callback_url: `https://example.com/${"u".repeat(3000)}` });
    assert.equal(url.status, 413);
    const ok = await submit({ rows: [ROW], metadata: { note: "m".repeat(900) } });
    assert.equal(ok.status, 202);
  });

  it("a model with jobs.maxQueuedPerModel jobs queued refuses more with 503 MP_ERR_JOB_QUEUE_FULL and Retry-After", async () => {
    store.pausedClaims = true;
    try {
      await drainQueue();
      for (let i = 0; i < 3; i++) assert.equal((await submit({ rows: [ROW] })).status, 202);
      const full = await submit({ rows: [ROW] });
      assert.equal(full.status, 503);
      assert.equal(full.body.error.code, "MP_ERR_JOB_QUEUE_FULL");
      assert.ok(Number(full.headers.get("retry-after")) >= 1);
      // Per model: another model still takes jobs.
      assert.equal((await submit({ rows: [[1, 1, 1, 1, 1, 1, 1, 1]] }, "slow")).status, 202);
    } finally {
      store.pausedClaims = false;
    }
    // Once the queue drains, jobs are accepted again.
    assert.ok(
      await until(async () => (await get("/v1/jobs?status=queued&model=tree")).body.jobs.length === 0),
    );
    assert.equal((await submit({ rows: [ROW] })).status, 202);
  });

  it("the list is a page of summaries: bounded by the metadata limit, no inputs or results", async () => {
    for (let i = 0; i < 5; i++) {
      // An input near jobs.maxInputBytes: a page that carried inputs would be far over the bound.
      const rows = Array.from({ length: 100 }, () => ROW);
      const sub = await submit({ rows, metadata: { note: "m".repeat(1000) } });
      assert.equal(sub.status, 202, JSON.stringify(sub.body));
      // Finished, so each has a stored result (inline) that the list must leave out.
      assert.equal((await get(`/v1/jobs/${sub.body.id}?wait=20`)).body.status, "succeeded");
    }
    const page = await get("/v1/jobs?limit=5");
    assert.equal(page.body.jobs.length, 5);
    for (const j of page.body.jobs) {
      assert.equal(j.input, undefined);
      assert.equal(j.result, undefined);
      assert.equal(j.outputs, undefined);
    }
    // Each entry: its metadata (≤ 1 KiB) plus about 1 KiB of fields.
    assert.ok(page.bytes < 5 * (1024 + 1024), `${page.bytes} bytes`);
  });

  it("long-polls on waiting jobs read their statuses together each second, not the whole jobs, not one read per waiter", async () => {
    store.pausedClaims = true;
    try {
      await drainQueue();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await submit({ rows: [ROW] })).body.id as string);
      const before = {
        gets: ids.map((id) => store.callsFor("get", id)),
        states: ids.map((id) => store.callsFor("states", id)),
        rounds: store.calls.get("states") ?? 0,
        state: store.calls.get("state") ?? 0,
      };
      const answers = await Promise.all(ids.map((id) => get(`/v1/jobs/${id}?wait=3`)));
      for (const res of answers) assert.equal(res.body.status, "queued");
      const rounds = (store.calls.get("states") ?? 0) - before.rounds;
      const perJob = ids.map((id, i) => store.callsFor("states", id) - before.states[i]!);
      for (const [i, id] of ids.entries()) {
        assert.ok(perJob[i]! >= 2, `status reads of ${id}: ${perJob[i]}`);
        assert.ok(store.callsFor("get", id) - before.gets[i]! <= 1, "whole-job reads");
      }
      // Each round read the three together: fewer store calls than statuses read.
      assert.ok(rounds < perJob.reduce((a, b) => a + b, 0), `rounds ${rounds}, statuses ${perJob}`);
      assert.equal((store.calls.get("state") ?? 0) - before.state, 0, "no status read of its own per waiter");
    } finally {
      store.pausedClaims = false;
    }
  });

  it("event streams take stream slots: per key 429, in total 503; a closed stream frees its slot", async () => {
    store.pausedClaims = true;
    // Each open stream's request, so the test can close its connection for certain.
    const controllers: { abort(): void }[] = [];
    const open = (id: string, key: string) =>
      new Promise<{ status: number; code: string | undefined }>((resolve, reject) => {
        const req = httpGet(`${srv.url}/v1/jobs/${id}/events`, { headers: auth(key) }, (res) => {
          if (res.statusCode === 200) {
            controllers.push({ abort: () => req.destroy() });
            resolve({ status: 200, code: undefined });
            return;
          }
          let text = "";
          res.on("data", (d) => {
            text += d;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, code: JSON.parse(text).error?.code }));
        });
        req.on("error", reject);
      });
    try {
      await drainQueue();
      const id = (await submit({ rows: [ROW] })).body.id;
      // A client key follows only its own jobs: key B streams one of its own.
      const idB = (await submit({ rows: [ROW] }, "tree", KEY_B)).body.id;
      assert.equal((await open(id, KEY_A)).status, 200);
      assert.equal((await open(id, KEY_A)).status, 200);
      assert.deepEqual(await open(id, KEY_A), { status: 429, code: "MP_ERR_STREAM_KEY_LIMIT_REACHED" });
      assert.equal((await open(idB, KEY_B)).status, 200);
      assert.deepEqual(await open(idB, KEY_B), { status: 503, code: "MP_ERR_STREAM_LIMIT_REACHED" });
      assert.equal(srv.server.context.streams.held(), 3);
      controllers.shift()!.abort();
      assert.ok(await until(async () => srv.server.context.streams.held() === 2));
      assert.equal((await open(idB, KEY_B)).status, 200);
    } finally {
      for (const c of controllers) c.abort();
      store.pausedClaims = false;
    }
    assert.ok(await until(async () => srv.server.context.streams.held() === 0));
  });
});

describe("event stream life", () => {
  let srv: JobsServer;
  let store: FaultyJobStore;

  before(async () => {
    store = faultyJobStore(await tempSqliteStore());
    srv = await startJobsServer({
      jobStore: store,
      limits: ["  maxStreamMs: 1500", "  streamHeartbeatMs: 200"],
    });
  });

  after(async () => {
    await srv.close();
  });

  it("a stream on a job that never ends ends after limits.maxStreamMs with a reconnect event, with heartbeats before", async () => {
    store.pausedClaims = true;
    try {
      const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] });
      const id = sub.body.id as string;
      const before = store.callsFor("get", id);
      const res = await fetch(`${srv.url}/v1/jobs/${id}/events`, {
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      assert.match(text, /^event: status$/m);
      assert.ok((text.match(/^: keep-alive$/gm) ?? []).length >= 2, text);
      assert.match(text, /^event: reconnect$/m);
      assert.match(text, /^retry: \d+$/m);
      assert.doesNotMatch(text, /^event: end$/m);
      // The job is still queued; the stream read it whole once, then polled its status.
      const gets = store.callsFor("get", id) - before;
      assert.ok(gets <= 2, `gets: ${gets}`);
      assert.equal(srv.server.context.streams.held(), 0);
    } finally {
      store.pausedClaims = false;
    }
  });
});
