// Documented job behaviours through a real listening server, with a handler the test holds at a
// gate so states are certain rather than timed: `?wait=N` on an unfinished job, `409
// MP_ERR_JOB_NOT_FINISHED`, `priority` (higher first while the worker is busy), WebSocket
// `unsubscribe`, retry only of a failed or canceled job (409 MP_ERR_JOB_RETRY_REFUSED otherwise), a
// webhook for a result in the filesystem blob store (links.result, no result or result_url); and,
// for synchronous predicts, `MP_ERR_HANDLER_FAILED` and `requestLogging`.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { writeControlHandler } from "../fixtures/handlers.js";
import { type InProcessServer, postJson, REPO_ROOT, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;
let dir: string;
let calls: string;

function writeConfig(name: string, extra: string[] = []): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    [
      "server:",
      "  drainTimeoutMs: 1000",
      ...extra,
      "jobs:",
      `  sqlitePath: ${join(dir, `${name}.db`)}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "  concurrency: 1",
      "  maxAttempts: 1",
      "models:",
      `  - {name: ctl, backend: custom, path: ${join(dir, "control-handler.mjs")}, options: {dir: ${dir}, log: ${calls}}}`,
    ].join("\n"),
  );
  return file;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-jobs-api-"));
  calls = join(dir, "calls.log");
  writeControlHandler(dir);
  srv = await startInProcess({ file: writeConfig("main.yaml") });
});

after(async () => {
  for (let i = 1; i <= 9; i++) writeFileSync(join(dir, `gate-${i}`), "");
  await srv.close();
});

const get = async (path: string) => {
  const res = await fetch(`${srv.url}${path}`);
  return { status: res.status, body: (await res.json()) as any };
};
const submit = async (x: number, extra: Record<string, unknown> = {}) => {
  const r = await postJson(`${srv.url}/v1/models/ctl/jobs`, { rows: [[x]], ...extra });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.id as string;
};
async function waitStatus(id: string, statuses: string[]): Promise<any> {
  const deadline = Date.now() + 60_000;
  let job: any;
  while (Date.now() < deadline) {
    job = (await get(`/v1/jobs/${id}?wait=2`)).body;
    if (statuses.includes(job.status)) return job;
  }
  assert.fail(`job ${id} never reached ${statuses}: ${JSON.stringify(job)}`);
}
const release = (gate: number) => writeFileSync(join(dir, `gate-${gate}`), "");
const callOrder = () => readFileSync(calls, "utf8").split("\n").filter(Boolean).map(Number);

describe("jobs API: waiting, results of unfinished jobs, priority", () => {
  it("?wait=N returns the job still queued or running after about N seconds; /result is 409 MP_ERR_JOB_NOT_FINISHED", async () => {
    const blocker = await submit(-1);
    await waitStatus(blocker, ["running"]);
    const queued = await submit(5);

    for (const [id, status] of [
      [blocker, "running"],
      [queued, "queued"],
    ] as const) {
      const t0 = performance.now();
      const res = await get(`/v1/jobs/${id}?wait=1`);
      const ms = performance.now() - t0;
      assert.equal(res.status, 200);
      assert.equal(res.body.status, status);
      // It waited (not an immediate answer) and came back without the job finishing. The upper
      // bound only guards against waiting for the job itself; it is far above 1 s on purpose.
      assert.ok(ms >= 900, `returned after ${ms.toFixed(0)} ms`);
      assert.ok(ms < 20_000, `returned after ${ms.toFixed(0)} ms`);

      const result = await get(`/v1/jobs/${id}/result`);
      assert.equal(result.status, 409);
      assert.equal(result.body.error.code, "MP_ERR_JOB_NOT_FINISHED");
      assert.equal(result.body.error.retryable, true);
    }
    assert.equal((await get(`/v1/jobs/${queued}?wait=61`)).status, 400, "wait is 0..60 s");

    release(1);
    assert.equal((await waitStatus(queued, ["succeeded", "failed"])).status, "succeeded");
    assert.deepEqual((await get(`/v1/jobs/${queued}/result`)).body.outputs.y, [[10]]);
  });

  it("priority: while the only worker is busy, higher priority runs first, equal priorities oldest first", async () => {
    const blocker = await submit(-2);
    await waitStatus(blocker, ["running"]);
    const low = await submit(11, { priority: -5 });
    const normal = await submit(12);
    const high = await submit(13, { priority: 10 });
    const high2 = await submit(14, { priority: 10 });
    const top = await submit(15, { priority: 1000 });
    assert.equal((await get(`/v1/jobs/${high}`)).body.priority, 10);
    const refused = await postJson(`${srv.url}/v1/models/ctl/jobs`, { rows: [[1]], priority: 1001 });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, "MP_ERR_REQUEST_INVALID");

    release(2);
    for (const id of [low, normal, high, high2, top])
      assert.equal((await waitStatus(id, ["succeeded", "failed"])).status, "succeeded");
    const order = callOrder().filter((x) => x >= 11 && x <= 15);
    assert.deepEqual(order, [15, 13, 14, 12, 11]);
  });

  it("WebSocket unsubscribe: no more messages for that job, while a job still subscribed keeps arriving", async () => {
    const blocker = await submit(-3);
    await waitStatus(blocker, ["running"]);
    const a = await submit(21);
    const b = await submit(22);
    const ws = new WebSocket(`${srv.url.replace("http", "ws")}/v1/jobs/ws`);
    const seen: { id: string; status: string; afterUnsubscribe: boolean }[] = [];
    let unsubscribed = false;
    const bFinal = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out: ${JSON.stringify(seen)}`)), 60_000);
      ws.on("open", () => ws.send(JSON.stringify({ subscribe: [a] })));
      ws.on("message", (data) => {
        const msg = JSON.parse(String(data));
        if (msg.type !== "job") return reject(new Error(`unexpected ${String(data)}`));
        seen.push({ id: msg.job.id, status: msg.job.status, afterUnsubscribe: unsubscribed });
        if (msg.job.id === a && !unsubscribed) {
          // The server handles one connection's messages in order: once b's first message
          // arrives, the unsubscribe of a has been applied.
          ws.send(JSON.stringify({ unsubscribe: [a] }));
          ws.send(JSON.stringify({ subscribe: [b] }));
        }
        if (msg.job.id === b) unsubscribed = true;
        if (msg.job.id === b && msg.job.status === "succeeded") {
          clearTimeout(timer);
          resolve();
        }
      });
      ws.on("error", reject);
    });
    // a must change state after the unsubscribe, or the test would prove nothing.
    assert.equal((await get(`/v1/jobs/${a}`)).body.status, "queued");
    await new Promise((r) => setTimeout(r, 200));
    release(3);
    await bFinal;
    assert.equal((await waitStatus(a, ["succeeded"])).status, "succeeded");
    // Longer than the route's 1 s poll of subscribed jobs, so a lingering subscription would show.
    await new Promise((r) => setTimeout(r, 2500));
    ws.close();
    assert.deepEqual(
      seen.filter((m) => m.id === a),
      [{ id: a, status: "queued", afterUnsubscribe: false }],
      JSON.stringify(seen),
    );
    assert.deepEqual(
      seen.filter((m) => m.id === b).map((m) => m.status),
      ["queued", "running", "succeeded"],
    );
  });
});

describe("jobs API: retry and webhooks as docs/Jobs.md says", () => {
  it("retry: a succeeded, queued or running job is refused with 409 MP_ERR_JOB_RETRY_REFUSED and left as it was", async () => {
    const done = await submit(21);
    await waitStatus(done, ["succeeded"]);
    const before = (await get(`/v1/jobs/${done}`)).body;
    const res = await postJson(`${srv.url}/v1/jobs/${done}/retry`, {});
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.equal(res.body.error.code, "MP_ERR_JOB_RETRY_REFUSED");
    assert.equal(res.body.error.retryable, false);
    assert.equal(res.headers.get("retry-after"), null);
    assert.match(res.body.error.message, /succeeded; its result is at GET \/v1\/jobs\/.*\/result/);
    assert.deepEqual((await get(`/v1/jobs/${done}`)).body, before, "the job is untouched");
    assert.equal((await get(`/v1/jobs/${done}/result`)).status, 200, "its result is still there");

    const running = await submit(-4);
    await waitStatus(running, ["running"]);
    const queued = await submit(22);
    for (const [id, status] of [
      [running, "running"],
      [queued, "queued"],
    ] as const) {
      const r = await postJson(`${srv.url}/v1/jobs/${id}/retry`, {});
      assert.equal(r.status, 409, `${status}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, "MP_ERR_JOB_RETRY_REFUSED");
      assert.equal(r.body.error.details.status, status);
    }
    release(4);
    await waitStatus(queued, ["succeeded"]);
    // A canceled job still goes back to the queue.
    const blocker = await submit(-5);
    await waitStatus(blocker, ["running"]);
    const canceled = await submit(23);
    assert.equal((await fetch(`${srv.url}/v1/jobs/${canceled}`, { method: "DELETE" })).status, 200);
    const retried = await postJson(`${srv.url}/v1/jobs/${canceled}/retry`, {});
    assert.equal(retried.status, 200, JSON.stringify(retried.body));
    assert.equal(retried.body.status, "queued");
    release(5);
    await waitStatus(canceled, ["succeeded"]);
  });

  it("webhook for a result in the filesystem blob store: links.result fetches it; neither result nor result_url", async () => {
    const deliveries: string[] = [];
    const receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        deliveries.push(body);
        res.writeHead(200).end("ok");
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    const file = join(dir, "blobs.yaml");
    writeFileSync(
      file,
      [
        "jobs:",
        `  sqlitePath: ${join(dir, "blobs.db")}`,
        `  blobs: {backend: fs, dir: ${join(dir, "fs-blobs")}}`,
        "  inlineResultMaxBytes: 16",
        '  webhooks: {allowPrivate: ["127.0.0.1"]}',
        "models:",
        `  - {name: ctl, backend: custom, path: ${join(dir, "control-handler.mjs")}, options: {dir: ${dir}, log: ${calls}}}`,
      ].join("\n"),
    );
    const blobs = await startInProcess({ file });
    try {
      const sub = await postJson(`${blobs.url}/v1/models/ctl/jobs`, { rows: [[31]], callback_url: hook });
      assert.equal(sub.status, 202, JSON.stringify(sub.body));
      // Bounded by count, generously: a busy machine may take seconds to deliver.
      for (let i = 0; i < 3000 && deliveries.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      assert.equal(deliveries.length, 1, "one webhook delivery");
      const payload = JSON.parse(deliveries[0]!);
      assert.equal(payload.job.status, "succeeded");
      assert.ok(payload.job.result_bytes > 16, "the result went to the blob store");
      assert.equal(payload.job.result, undefined);
      assert.equal(payload.job.result_url, undefined);
      assert.equal(payload.job.links.result, `/v1/jobs/${sub.body.id}/result`);
      const result = await fetch(`${blobs.url}${payload.job.links.result}`);
      assert.equal(result.status, 200);
      assert.deepEqual(((await result.json()) as any).outputs, { y: [[62]] });
      // docs/Jobs.md says so, where the payload is described.
      const doc = readFileSync(join(REPO_ROOT, "docs", "Jobs.md"), "utf8");
      const payloadDoc = doc.slice(doc.indexOf("### Payload"), doc.indexOf("### Headers"));
      assert.match(payloadDoc, /filesystem blob store[\s\S]*links\.result/);
    } finally {
      await blobs.close();
      receiver.close();
    }
  });
});

describe("synchronous predicts: handler failures and request logging", () => {
  it("a handler that throws: 500 MP_ERR_HANDLER_FAILED with its message; the model keeps serving", async () => {
    writeFileSync(join(dir, "fail"), "");
    const res = await postJson(`${srv.url}/v1/models/ctl/predict`, { rows: [[666]] });
    assert.equal(res.status, 500);
    assert.equal(res.body.error.code, "MP_ERR_HANDLER_FAILED");
    assert.equal(res.body.error.retryable, false);
    assert.match(res.body.error.message, /the control handler failed on purpose/);
    const ok = await postJson(`${srv.url}/v1/models/ctl/predict`, { rows: [[3]] });
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.body.outputs.y, [[6]]);
    assert.equal((await get("/readyz")).status, 200);
  });

  it("requestLogging: false writes no per-request line; true (the default) writes one per request", async () => {
    const quiet = await startInProcess({ file: writeConfig("quiet.yaml", ["  requestLogging: false"]) });
    try {
      const perRequest = (logs: Record<string, unknown>[]) =>
        logs.filter((l) => l.msg === "request completed" || l.msg === "request failed");
      for (const s of [srv, quiet]) {
        for (let i = 0; i < 3; i++) {
          const r = await postJson(`${s.url}/v1/models/ctl/predict`, { rows: [[i]] });
          assert.equal(r.status, 200);
        }
        await fetch(`${s.url}/v1/models`);
      }
      assert.ok(perRequest(srv.logs).length >= 4, "the default logs each request");
      assert.ok(
        perRequest(srv.logs).some((l) => l.url === "/v1/models" && l.status === 200),
        JSON.stringify(perRequest(srv.logs).slice(-2)),
      );
      assert.deepEqual(perRequest(quiet.logs), []);
      // The quiet server still logs everything else (start-up, the model load).
      assert.ok(quiet.logs.some((l) => /ctl/.test(String(l.msg))));
    } finally {
      await quiet.close();
    }
  });
});
