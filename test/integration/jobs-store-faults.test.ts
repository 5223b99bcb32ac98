// Job-store and blob-store outages through a real listening server: the real SQLite store (and
// the filesystem blob store) wrapped so chosen methods reject, as an unreachable Redis or S3 would.
// Each case asserts the process sees no unhandled rejection, clients get MP_ERR answers, and the
// job still completes once the store is back.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { FsBlobStore } from "../../src/storage/fs-blob-store.js";
import { postJson } from "../helpers/server.js";
import {
  type FaultyJobStore,
  faultyBlobStore,
  faultyJobStore,
  type JobsServer,
  sleep,
  startJobsServer,
  tempSqliteStore,
  until,
  watchProcessFaults,
} from "./jobs-harness.js";

const ROW = [3, 95, 4, 1, 0, 20];

describe("job store and blob store outages", () => {
  let srv: JobsServer;
  let store: FaultyJobStore;
  let blobs: ReturnType<typeof faultyBlobStore>;
  let faults: ReturnType<typeof watchProcessFaults>;
  let receiver: Server;
  let hookUrl: string;
  const deliveries: string[] = [];

  before(async () => {
    faults = watchProcessFaults();
    receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        deliveries.push(body);
        res.writeHead(200).end("ok");
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    store = faultyJobStore(await tempSqliteStore());
    blobs = faultyBlobStore(new FsBlobStore(mkdtempSync(join(tmpdir(), "modelport-blobs-"))));
    srv = await startJobsServer({
      jobStore: store,
      blobStore: blobs,
      jobs: [
        "  concurrency: 1",
        "  leaseMs: 5000",
        "  backoffBaseMs: 50",
        "  inlineResultMaxBytes: 300",
        '  webhooks: {secret: "test-webhook-secret-0123456789", allowPrivate: ["127.0.0.1"]}',
      ],
    });
  });

  after(async () => {
    await srv.close();
    receiver.close();
    faults.remove();
  });

  const job = async (id: string) => (await (await fetch(`${srv.url}/v1/jobs/${id}`)).json()) as any;

  it("complete and fail both rejecting mid-job: no crash, and the job succeeds once the store is back", async () => {
    store.failing.add("complete");
    store.failing.add("fail");
    const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] });
    assert.equal(sub.status, 202);
    assert.ok(await until(async () => (store.rejected.get("complete") ?? 0) >= 2), "complete was retried");
    store.failing.clear();
    const done = (await (await fetch(`${srv.url}/v1/jobs/${sub.body.id}?wait=20`)).json()) as any;
    assert.equal(done.status, "succeeded", JSON.stringify(done));
    assert.equal(done.attempts, 1);
    await sleep(100);
    faults.check();
  });

  it("submit while the store is down: 503 MP_ERR_JOB_STORE_UNAVAILABLE with Retry-After", async () => {
    store.failing.add("queuedCount");
    store.failing.add("create");
    const res = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] });
    store.failing.clear();
    assert.equal(res.status, 503);
    assert.equal(res.body.error.code, "MP_ERR_JOB_STORE_UNAVAILABLE");
    assert.ok(res.headers.get("retry-after"));
    faults.check();
  });

  it("get rejecting during a WebSocket subscribe: an MP_ERR_JOB_STORE_UNAVAILABLE frame, then it works", async () => {
    store.pausedClaims = true;
    const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] });
    const ws = new WebSocket(`${srv.url.replace("http", "ws")}/v1/jobs/ws`);
    const frames: any[] = [];
    ws.on("message", (d) => frames.push(JSON.parse(String(d))));
    await new Promise((r) => ws.once("open", r));
    store.failing.add("get");
    ws.send(JSON.stringify({ subscribe: [sub.body.id] }));
    assert.ok(await until(async () => frames.length >= 1));
    assert.equal(frames[0].type, "error");
    assert.equal(frames[0].code, "MP_ERR_JOB_STORE_UNAVAILABLE");
    assert.equal(frames[0].id, sub.body.id);
    store.failing.clear();
    store.pausedClaims = false;
    ws.send(JSON.stringify({ subscribe: [sub.body.id] }));
    const final = await until(async () =>
      frames.find((f) => f.type === "job" && f.job.status === "succeeded"),
    );
    assert.ok(final, JSON.stringify(frames));
    ws.close();
    faults.check();
  });

  it("a presign failing while preparing the webhook: delivered without result_url, no crash", async () => {
    blobs.failing.add("url");
    const rows = Array.from({ length: 20 }, (_, i) => [i % 72, 50, 1, 12, 1, 10]);
    const before = deliveries.length;
    const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows, callback_url: hookUrl });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    const done = (await (await fetch(`${srv.url}/v1/jobs/${sub.body.id}?wait=20`)).json()) as any;
    assert.equal(done.status, "succeeded");
    assert.ok(done.result_bytes > 300, "the result went to the blob store");
    assert.ok(await until(async () => deliveries.length > before));
    blobs.failing.clear();
    const payload = JSON.parse(deliveries.at(-1)!);
    assert.equal(payload.job.id, sub.body.id);
    assert.equal(payload.job.status, "succeeded");
    assert.equal(payload.job.result_url, undefined);
    assert.equal(payload.job.links.result, `/v1/jobs/${sub.body.id}/result`);
    faults.check();
  });

  it("the store failing under an event stream: the stream ends with an MP_ERR error event, not `end`", async () => {
    store.pausedClaims = true;
    try {
      const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] });
      const res = await fetch(`${srv.url}/v1/jobs/${sub.body.id}/events`, {
        signal: AbortSignal.timeout(30_000),
      });
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      assert.match(first, /^event: status$/m);
      store.failing.add("state");
      store.failing.add("states");
      store.failing.add("get");
      let text = first;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      store.failing.clear();
      assert.match(text, /^event: error$/m);
      assert.match(text, /"code":"MP_ERR_JOB_STORE_UNAVAILABLE"/);
      assert.doesNotMatch(text, /^event: end$/m);
      assert.equal(srv.server.context.streams.held(), 0);
    } finally {
      store.failing.clear();
      store.pausedClaims = false;
    }
    faults.check();
  });

  it("the blob store failing to take a result: the attempt is retried and the job succeeds", async () => {
    blobs.failing.add("put");
    const rows = Array.from({ length: 20 }, (_, i) => [i % 72, 40, 1, 12, 1, 10]);
    const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows });
    assert.ok(await until(async () => (await job(sub.body.id)).last_error !== undefined));
    blobs.failing.clear();
    const done = (await (await fetch(`${srv.url}/v1/jobs/${sub.body.id}?wait=20`)).json()) as any;
    assert.equal(done.status, "succeeded", JSON.stringify(done));
    assert.ok(done.attempts >= 2);
    assert.equal(done.last_error.code, "MP_ERR_JOB_STORE_UNAVAILABLE");
    faults.check();
  });
});
