// Asynchronous jobs through a real listening server: accept, job id at once, compute in the
// background, learn the result by long-poll, result route, SSE or webhook; idempotency, cancel,
// retries, large results in the blob store.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { verifyWebhook } from "../../src/notify/webhook.js";
import { createGate } from "../helpers/gate.js";
import { testModels } from "../helpers/models.js";
import { BUCKET, CREDENTIALS, startS3, stopS3 } from "../helpers/s3.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

const SECRET = "test-webhook-secret-0123456789";
let srv: InProcessServer;
let dir: string;
let receiver: Server;
let receiverUrl: string;
const deliveries: { headers: Record<string, unknown>; body: string }[] = [];
// A model whose jobs stay running until the test opens their gate.
const gate = createGate();

before(async () => {
  const models = await testModels();
  dir = mkdtempSync(join(tmpdir(), "modelport-jobs-"));
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      deliveries.push({ headers: req.headers, body });
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  const file = join(dir, "jobs.yaml");
  writeFileSync(
    file,
    [
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "  concurrency: 1",
      "  maxAttempts: 2",
      "  backoffBaseMs: 50",
      "  inlineResultMaxBytes: 2000",
      `  webhooks: {secret: ${SECRET}, allowPrivate: ["127.0.0.1"]}`,
      "models:",
      `  - {name: tree, path: ${join(models, "churn-tree.onnx")}}`,
      `  - {name: slow, path: ${join(models, "slow.onnx")}}`,
      gate.modelYaml("gate"),
    ].join("\n"),
  );
  srv = await startInProcess({ file });
});

after(async () => {
  gate.openAll();
  await srv.close();
  receiver.close();
});

const ROW = [3, 95, 4, 1, 0, 20];
const get = async (path: string) => {
  const res = await fetch(`${srv.url}${path}`);
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
};

describe("jobs", () => {
  it("202 with id, Location and links; long-poll to succeeded; the result equals a synchronous predict", async () => {
    const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW], metadata: { ticket: 7 } });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    assert.equal(sub.headers.get("location"), `/v1/jobs/${sub.body.id}`);
    assert.deepEqual(sub.body.links, {
      self: `/v1/jobs/${sub.body.id}`,
      result: `/v1/jobs/${sub.body.id}/result`,
      events: `/v1/jobs/${sub.body.id}/events`,
    });
    assert.ok(["queued", "running", "succeeded"].includes(sub.body.status));
    const done = await get(`/v1/jobs/${sub.body.id}?wait=10`);
    assert.equal(done.body.status, "succeeded");
    assert.equal(done.body.attempts, 1);
    assert.deepEqual(done.body.metadata, { ticket: 7 });
    assert.ok(done.body.finished_at);
    const result = await get(`/v1/jobs/${sub.body.id}/result`);
    const sync = await postJson(`${srv.url}/v1/models/tree/predict`, { rows: [ROW] });
    assert.deepEqual(result.body.outputs, sync.body.outputs);
  });

  it("predict with Prefer: respond-async becomes a job", async () => {
    const res = await postJson(
      `${srv.url}/v1/models/tree/predict`,
      { rows: [ROW] },
      { prefer: "respond-async" },
    );
    assert.equal(res.status, 202);
    assert.equal(res.headers.get("preference-applied"), "respond-async");
    assert.equal((await get(`/v1/jobs/${res.body.id}?wait=10`)).body.status, "succeeded");
  });

  it("Idempotency-Key: same body → same job; another body → 409", async () => {
    const h = { "idempotency-key": "order-42" };
    const a = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] }, h);
    const b = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] }, h);
    assert.equal(a.status, 202);
    assert.equal(b.status, 200);
    assert.equal(b.body.id, a.body.id);
    assert.equal(b.headers.get("idempotent-replayed"), "true");
    const c = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [[1, 2, 3, 1, 0, 4]] }, h);
    assert.equal(c.status, 409);
    assert.equal(c.body.error.code, "MP_ERR_JOB_IDEMPOTENCY_CONFLICT");
  });

  it("bad input is refused at submission, nothing is queued", async () => {
    const bad = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [[1, 2]] });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, "MP_ERR_INPUT_SHAPE");
    const missing = await postJson(`${srv.url}/v1/models/nope/jobs`, { rows: [ROW] });
    assert.equal(missing.status, 404);
    assert.equal(
      (await get("/v1/jobs/00000000-0000-0000-0000-000000000000")).body.error.code,
      "MP_ERR_JOB_NOT_FOUND",
    );
  });

  it("cancel: a queued job ends canceled at once; a running one is stopped and ends canceled", async () => {
    // One job at a time per model (concurrency 1): the first holds the worker until its gate opens.
    const first = await postJson(`${srv.url}/v1/models/gate/jobs`, { rows: [[101]] });
    assert.equal(first.status, 202, JSON.stringify(first.body));
    await gate.started(101);
    assert.equal((await get(`/v1/jobs/${first.body.id}`)).body.status, "running");
    const second = await postJson(`${srv.url}/v1/models/gate/jobs`, { rows: [[102]] });
    assert.equal(second.body.status, "queued");
    const queued = await fetch(`${srv.url}/v1/jobs/${second.body.id}`, { method: "DELETE" });
    assert.equal(((await queued.json()) as any).status, "canceled");
    // The first is certainly running (its handler waits for the gate): it is asked to stop.
    const del = await fetch(`${srv.url}/v1/jobs/${first.body.id}`, { method: "DELETE" });
    const view = (await del.json()) as any;
    assert.equal(view.status, "running", JSON.stringify(view));
    assert.equal(view.cancel_requested, true, JSON.stringify(view));
    gate.open(101);
    const final = await get(`/v1/jobs/${first.body.id}?wait=30`);
    assert.equal(final.body.status, "canceled");
    for (const id of [first.body.id, second.body.id]) {
      const result = await get(`/v1/jobs/${id}/result`);
      assert.equal(result.status, 409);
      assert.equal(result.body.error.code, "MP_ERR_JOB_NOT_SUCCEEDED");
    }
    // The canceled queued job never reached the model.
    gate.open(102);
    assert.equal((await get(`/v1/jobs/${second.body.id}`)).body.attempts, 0);
  });

  it("a large result goes to the blob store and the result route serves it", async () => {
    const rows = Array.from({ length: 100 }, (_, i) => [i % 72, 50, 1, 12, 1, 10]);
    const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows });
    const done = await get(`/v1/jobs/${sub.body.id}?wait=10`);
    assert.equal(done.body.status, "succeeded");
    assert.ok(done.body.result_bytes > 2000);
    const result = await get(`/v1/jobs/${sub.body.id}/result`);
    assert.equal(result.status, 200);
    const sync = await postJson(`${srv.url}/v1/models/tree/predict`, { rows });
    assert.deepEqual(result.body.outputs, sync.body.outputs);
  });

  it("webhook: signed, verifiable, attempts recorded on the job", async () => {
    const before = deliveries.length;
    const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW], callback_url: receiverUrl });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    await get(`/v1/jobs/${sub.body.id}?wait=10`);
    // Bounded by count, generously: a busy machine may take seconds to deliver.
    for (let i = 0; i < 1500 && deliveries.length === before; i++)
      await new Promise((r) => setTimeout(r, 20));
    assert.equal(deliveries.length, before + 1, "one webhook delivery");
    const d = deliveries.at(-1)!;
    const payload = JSON.parse(d.body);
    assert.equal(payload.job.id, sub.body.id);
    assert.equal(payload.job.status, "succeeded");
    assert.ok(payload.job.result.outputs.label);
    assert.ok(verifyWebhook(SECRET, String(d.headers["x-modelport-signature"]), d.body));
    assert.ok(
      !verifyWebhook("another-secret-0123456789", String(d.headers["x-modelport-signature"]), d.body),
    );
    let job = (await get(`/v1/jobs/${sub.body.id}`)).body;
    for (let i = 0; i < 1500 && !job.webhook?.delivered_at; i++) {
      await new Promise((r) => setTimeout(r, 20));
      job = (await get(`/v1/jobs/${sub.body.id}`)).body;
    }
    assert.equal(job.webhook.attempts, 1);
    assert.equal(job.webhook.last_status, 200);
  });

  it("a callback URL on a private address is refused unless allow-listed", async () => {
    const res = await postJson(`${srv.url}/v1/models/tree/jobs`, {
      rows: [ROW],
      callback_url: "http://10.1.2.3/hook",
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, "MP_ERR_JOB_CALLBACK_REFUSED");
  });

  it("retries with backoff, then failed with the last error", async () => {
    // A server whose job timeout (5 ms) no attempt on the slow model (~50 ms) can meet.
    const models = await testModels();
    const other = mkdtempSync(join(tmpdir(), "modelport-jobs-retry-"));
    const file = join(other, "retry.yaml");
    writeFileSync(
      file,
      [
        "jobs:",
        `  sqlitePath: ${join(other, "jobs.db")}`,
        "  timeoutMs: 5",
        "  maxAttempts: 3",
        "  backoffBaseMs: 100",
        "models:",
        `  - {name: slow, path: ${join(models, "slow.onnx")}}`,
      ].join("\n"),
    );
    const s2 = await startInProcess({ file });
    try {
      const sub = await postJson(`${s2.url}/v1/models/slow/jobs`, { rows: [[1, 1, 1, 1, 1, 1, 1, 1]] });
      assert.equal(sub.status, 202);
      const started = Date.now();
      let job: any;
      for (let i = 0; i < 40; i++) {
        job = (await (await fetch(`${s2.url}/v1/jobs/${sub.body.id}?wait=5`)).json()) as any;
        if (job.status === "failed") break;
      }
      assert.equal(job.status, "failed");
      assert.equal(job.attempts, 3);
      assert.equal(job.last_error.code, "MP_ERR_JOB_TIMEOUT");
      // Backoff: 100 ms then 200 ms between the three attempts.
      assert.ok(Date.now() - started >= 300, `took ${Date.now() - started} ms`);
      const retried = (await (
        await fetch(`${s2.url}/v1/jobs/${sub.body.id}/retry`, { method: "POST" })
      ).json()) as any;
      assert.equal(retried.status, "queued");
      assert.equal(retried.attempts, 0);
    } finally {
      await s2.close();
    }
  });

  it("SSE streams each state change as it happens, until the final one", async () => {
    const sub = await postJson(`${srv.url}/v1/models/gate/jobs`, { rows: [[103]] });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    const res = await fetch(`${srv.url}/v1/jobs/${sub.body.id}/events`, {
      signal: AbortSignal.timeout(60_000),
    });
    assert.equal(res.headers.get("content-type"), "text/event-stream; charset=utf-8");
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const states = () =>
      [...text.matchAll(/^data: (\{.*\})$/gm)].map((m) => JSON.parse(m[1]!).status).filter(Boolean);
    // Read until the "running" event: the handler holds the job, so it has not finished yet.
    while (!states().includes("running")) {
      const chunk = await reader.read();
      assert.ok(!chunk.done, `the stream ended before "running": ${text}`);
      text += chunk.value;
    }
    assert.ok(!states().includes("succeeded"), text);
    assert.equal((await get(`/v1/jobs/${sub.body.id}`)).body.status, "running");
    gate.open(103);
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += chunk.value;
    const all = states();
    assert.equal(all.at(-1), "succeeded");
    assert.ok(all.indexOf("running") < all.indexOf("succeeded"), all.join(","));
    assert.match(text, /event: end/);
  });

  it("lists with filters and cursor pagination", async () => {
    const page1 = await get("/v1/jobs?model=tree&limit=2");
    assert.equal(page1.body.jobs.length, 2);
    assert.ok(page1.body.next_cursor);
    const page2 = await get(
      `/v1/jobs?model=tree&limit=2&cursor=${encodeURIComponent(page1.body.next_cursor)}`,
    );
    const ids = new Set([...page1.body.jobs, ...page2.body.jobs].map((j: any) => j.id));
    assert.equal(ids.size, page1.body.jobs.length + page2.body.jobs.length);
    const succeeded = await get("/v1/jobs?status=succeeded");
    assert.ok(succeeded.body.jobs.every((j: any) => j.status === "succeeded"));
    assert.equal((await get("/v1/jobs?status=nope")).status, 400);
  });

  it("WebSocket: one connection follows many jobs to their final state", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(
        (await postJson(`${srv.url}/v1/models/slow/jobs`, { rows: [[i, 1, 1, 1, 1, 1, 1, 1]] })).body.id,
      );
    const ws = new WebSocket(`${srv.url.replace("http", "ws")}/v1/jobs/ws`);
    const finals = new Map<string, string>();
    const errors: unknown[] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out; finals ${JSON.stringify([...finals])}`)),
        20_000,
      );
      ws.on("open", () => ws.send(JSON.stringify({ subscribe: [...ids, "no-such-job"] })));
      ws.on("message", (data) => {
        const msg = JSON.parse(String(data));
        if (msg.type === "error") errors.push(msg);
        if (msg.type === "job" && ["succeeded", "failed", "canceled"].includes(msg.job.status))
          finals.set(msg.job.id, msg.job.status);
        if (finals.size === ids.length) {
          clearTimeout(timer);
          resolve();
        }
      });
      ws.on("error", reject);
    });
    ws.close();
    assert.deepEqual([...finals.values()], ["succeeded", "succeeded", "succeeded"]);
    assert.equal((errors[0] as any).code, "MP_ERR_JOB_NOT_FOUND");
  });

  it("with S3 blobs, a large result is a redirect to a presigned URL that downloads", async () => {
    const models = await testModels();
    const { endpoint } = await startS3();
    process.env.AWS_ACCESS_KEY_ID = CREDENTIALS.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = CREDENTIALS.secretAccessKey;
    const other = mkdtempSync(join(tmpdir(), "modelport-jobs-s3-"));
    const file = join(other, "s3.yaml");
    writeFileSync(
      file,
      [
        "jobs:",
        `  sqlitePath: ${join(other, "jobs.db")}`,
        "  inlineResultMaxBytes: 1000",
        `  blobs: {backend: s3, bucket: ${BUCKET}, endpoint: "${endpoint}", forcePathStyle: true, urlTtlSeconds: 60}`,
        "models:",
        `  - {name: tree, path: ${join(models, "churn-tree.onnx")}}`,
      ].join("\n"),
    );
    const s3srv = await startInProcess({ file });
    try {
      const rows = Array.from({ length: 50 }, (_, i) => [i % 72, 60, 2, 1, 0, 30]);
      const sub = await postJson(`${s3srv.url}/v1/models/tree/jobs`, { rows });
      const done = (await (await fetch(`${s3srv.url}/v1/jobs/${sub.body.id}?wait=10`)).json()) as any;
      assert.equal(done.status, "succeeded");
      const redirect = await fetch(`${s3srv.url}/v1/jobs/${sub.body.id}/result`, { redirect: "manual" });
      assert.equal(redirect.status, 302);
      const location = redirect.headers.get("location")!;
      assert.ok(location.startsWith(endpoint), location);
      assert.match(location, /X-Amz-Signature=/);
      const downloaded = (await (await fetch(location)).json()) as any;
      const sync = await postJson(`${s3srv.url}/v1/models/tree/predict`, { rows });
      assert.deepEqual(downloaded.outputs, sync.body.outputs);
    } finally {
      await s3srv.close();
      await stopS3();
    }
  });
});
