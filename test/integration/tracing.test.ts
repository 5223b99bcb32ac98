// OpenTelemetry traces (docs/Tracing.md) from a server in this process, exported over OTLP/HTTP
// protobuf to a real receiver (helpers/otlp-receiver.ts): the span tree of a predict, of two
// requests joined in one batch (the batch links to both), of a job (its attempt links to the
// submit), a caller's traceparent honoured, trace ids on the request's log line, and the export
// worker's low scheduling priority.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type OpenAiStub, startOpenAiStub } from "../helpers/openai-stub.js";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../helpers/otlp-receiver.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

let receiver: OtlpReceiver;
let srv: InProcessServer;
let stub: OpenAiStub;
const ROW = [1, 2, 3, 1, 0, 4];

before(async () => {
  receiver = await startOtlpReceiver();
  stub = await startOpenAiStub();
  // The SDK reads the environment once, when the first app is built.
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
  process.env.OTEL_SERVICE_NAME = "modelport-test";
  process.env.OTEL_BSP_SCHEDULE_DELAY = "50";
  // Every decode, queue and encode as a span, however short (the default makes the ones under
  // 10 ms attributes of the request's span; tracing-tiers.test.ts checks that shape).
  process.env.MODELPORT_TRACE_STAGE_MS = "0";
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-tracing-"));
  const config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      '  webhooks: {allowPrivate: ["127.0.0.1"]}',
      "models:",
      `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}, batching: {inlineMaxMs: 0}}`,
      // Two single-row requests make a full batch; one alone waits up to 5 s for a partner.
      `  - name: pair`,
      `    path: ${join(models, "churn-tree.onnx")}`,
      "    batching: {adaptive: false, maxDelayMs: 5000, maxBatchRows: 2, inlineMaxMs: 0}",
      `  - {name: chat, backend: upstream, upstream: {url: "${stub.url}", model: stub-model, retries: 0}}`,
    ].join("\n"),
  );
  srv = await startInProcess({ file: config });
});

after(async () => {
  await srv?.close();
  await stub?.close();
  await receiver?.close();
});

const server = (spans: ReceivedSpan[], requestId: string) =>
  spans.find((s) => s.kind === 2 && s.attributes["modelport.request_id"] === requestId);
const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) =>
  spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);

describe("a predict", () => {
  it("is a server span with decode, queue, batch (with infer) and encode under it", async () => {
    const res = await postJson(
      `${srv.url}/v1/models/churn-tree/predict`,
      { rows: [ROW] },
      { "x-request-id": "p-1" },
    );
    assert.equal(res.status, 200);
    const spans = await receiver.waitFor((s) => {
      const root = server(s, "p-1");
      return root !== undefined && s.some((x) => x.name === "modelport.infer" && x.traceId === root.traceId);
    });
    const root = server(spans, "p-1")!;
    assert.equal(root.name, "POST /v1/models/{model}/predict");
    assert.equal(root.parentSpanId, undefined);
    assert.equal(root.service, "modelport-test");
    assert.equal(root.attributes["http.route"], "/v1/models/{model}/predict");
    assert.equal(root.attributes["http.request.method"], "POST");
    assert.equal(root.attributes["http.response.status_code"], 200);
    assert.equal(root.attributes["modelport.model"], "churn-tree");
    const names = childrenOf(spans, root)
      .map((s) => s.name)
      .sort();
    assert.deepEqual(names, ["modelport.batch", "modelport.decode", "modelport.encode", "modelport.queue"]);
    const batch = childrenOf(spans, root).find((s) => s.name === "modelport.batch")!;
    assert.equal(batch.attributes["modelport.batch.rows"], 1);
    assert.deepEqual(batch.links, [{ traceId: root.traceId, spanId: root.spanId }]);
    const infer = childrenOf(spans, batch);
    assert.deepEqual(
      infer.map((s) => s.name),
      ["modelport.infer"],
    );
    assert.equal(infer[0]!.attributes["modelport.model"], "churn-tree");
  });

  it("puts trace_id and span_id of the server span on the request's log line", async () => {
    const res = await postJson(
      `${srv.url}/v1/models/churn-tree/predict`,
      { rows: [ROW] },
      { "x-request-id": "p-log" },
    );
    assert.equal(res.status, 200);
    const spans = await receiver.waitFor((s) => server(s, "p-log") !== undefined);
    const root = server(spans, "p-log")!;
    const line = srv.logs.find((l) => l.reqId === "p-log" && l.msg === "request completed");
    assert.ok(line, "the request's log line");
    assert.equal(line.trace_id, root.traceId);
    assert.equal(line.span_id, root.spanId);
  });

  it("continues the caller's trace: same trace id, the caller's span as parent", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parent = "00f067aa0ba902b7";
    const res = await postJson(
      `${srv.url}/v1/models/churn-tree/predict`,
      { rows: [ROW] },
      { "x-request-id": "p-parent", traceparent: `00-${traceId}-${parent}-01`, tracestate: "vendor=abc" },
    );
    assert.equal(res.status, 200);
    const spans = await receiver.waitFor((s) => server(s, "p-parent") !== undefined);
    const root = server(spans, "p-parent")!;
    assert.equal(root.traceId, traceId);
    assert.equal(root.parentSpanId, parent);
  });

  it("marks a refused request's server span with its status, and a 5xx as an error", async () => {
    const res = await postJson(
      `${srv.url}/v1/models/churn-tree/predict`,
      { rows: [[1]] },
      { "x-request-id": "p-400" },
    );
    assert.equal(res.status, 400);
    const spans = await receiver.waitFor((s) => server(s, "p-400") !== undefined);
    const root = server(spans, "p-400")!;
    assert.equal(root.attributes["http.response.status_code"], 400);
    assert.equal(root.status, 0, "a 4xx is the client's error, not the server's");
    const decode = childrenOf(spans, root).find((s) => s.name === "modelport.decode");
    assert.equal(decode?.status, 2, "the decode span failed");
  });
});

describe("two requests in one batch", () => {
  it("makes one batch span of 2 rows, linked to both requests' spans", async () => {
    const [a, b] = await Promise.all([
      postJson(`${srv.url}/v1/models/pair/predict`, { rows: [ROW] }, { "x-request-id": "b-1" }),
      postJson(`${srv.url}/v1/models/pair/predict`, { rows: [ROW] }, { "x-request-id": "b-2" }),
    ]);
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    const spans = await receiver.waitFor(
      (s) =>
        server(s, "b-1") !== undefined &&
        server(s, "b-2") !== undefined &&
        s.some((x) => x.name === "modelport.batch" && x.attributes["modelport.model"] === "pair"),
    );
    const one = server(spans, "b-1")!;
    const two = server(spans, "b-2")!;
    assert.notEqual(one.traceId, two.traceId);
    const batches = spans.filter(
      (s) => s.name === "modelport.batch" && s.attributes["modelport.model"] === "pair",
    );
    assert.equal(batches.length, 1, "one batch for both");
    const batch = batches[0]!;
    assert.equal(batch.attributes["modelport.batch.rows"], 2);
    assert.equal(batch.attributes["modelport.batch.requests"], 2);
    const linked = batch.links.map((l) => `${l.traceId}/${l.spanId}`).sort();
    assert.deepEqual(linked, [`${one.traceId}/${one.spanId}`, `${two.traceId}/${two.spanId}`].sort());
    // Its parent is one of the two requests; each request has its own queue span.
    assert.ok([one.spanId, two.spanId].includes(batch.parentSpanId!));
    for (const root of [one, two])
      assert.equal(childrenOf(spans, root).filter((s) => s.name === "modelport.queue").length, 1);
    assert.equal(childrenOf(spans, batch)[0]?.attributes["modelport.rows"], 2);
  });
});

describe("a job", () => {
  it("runs its attempt as a span linked to the submitting request, and its webhook carries the attempt's trace", async () => {
    const hooks: IncomingHttpHeaders[] = [];
    const hookServer = createServer((req, res) => {
      hooks.push(req.headers);
      req.resume();
      req.on("end", () => res.writeHead(204).end());
    });
    hookServer.listen(0, "127.0.0.1");
    await new Promise((r) => hookServer.once("listening", r));
    try {
      const hookUrl = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}/hook`;
      const sub = await postJson(
        `${srv.url}/v1/models/churn-tree/jobs`,
        { rows: [ROW], callback_url: hookUrl },
        { "x-request-id": "job-submit" },
      );
      assert.equal(sub.status, 202, JSON.stringify(sub.body));
      const id = sub.body.id as string;
      const spans = await receiver.waitFor(
        (s) =>
          server(s, "job-submit") !== undefined &&
          s.some((x) => x.name === "modelport.job.attempt" && x.attributes["modelport.job.id"] === id) &&
          s.some((x) => x.name === "modelport.webhook"),
      );
      const submit = server(spans, "job-submit")!;
      assert.equal(submit.name, "POST /v1/models/{model}/jobs");
      const attempt = spans.find(
        (x) => x.name === "modelport.job.attempt" && x.attributes["modelport.job.id"] === id,
      )!;
      // Its own trace, linked to the submit's span (kept with the job in the store).
      assert.equal(attempt.parentSpanId, undefined);
      assert.notEqual(attempt.traceId, submit.traceId);
      assert.deepEqual(attempt.links, [{ traceId: submit.traceId, spanId: submit.spanId }]);
      assert.equal(attempt.attributes["modelport.job.attempt"], 1);
      assert.equal(attempt.attributes["modelport.model"], "churn-tree");
      // The job's inference runs under the attempt.
      const queue = childrenOf(spans, attempt).find((x) => x.name === "modelport.queue");
      assert.ok(queue, "the job's queue span is the attempt's child");
      const batch = spans.find(
        (x) => x.name === "modelport.batch" && x.links.some((l) => l.spanId === attempt.spanId),
      );
      assert.ok(batch, "a batch linked to the attempt");
      // The webhook delivery: a client span under the attempt, and its traceparent on the request.
      const webhook = spans.find((x) => x.name === "modelport.webhook" && x.traceId === attempt.traceId)!;
      assert.equal(webhook.parentSpanId, attempt.spanId);
      assert.equal(webhook.attributes["http.response.status_code"], 204);
      assert.equal(hooks.length, 1);
      assert.equal(hooks[0]!.traceparent, `00-${webhook.traceId}-${webhook.spanId}-01`);
    } finally {
      await new Promise((r) => hookServer.close(r));
    }
  });
});

describe("an upstream call", () => {
  it("is a client span under the request's server span, and the upstream gets its traceparent", async () => {
    const res = await postJson(
      `${srv.url}/v1/chat/completions`,
      { model: "chat", messages: [{ role: "user", content: "hi" }] },
      { "x-request-id": "up-1" },
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const spans = await receiver.waitFor((s) => {
      const root = server(s, "up-1");
      return root !== undefined && s.some((x) => x.kind === 3 && x.parentSpanId === root.spanId);
    });
    const root = server(spans, "up-1")!;
    assert.equal(root.name, "POST /v1/chat/completions");
    const client = spans.find((x) => x.kind === 3 && x.parentSpanId === root.spanId)!;
    assert.equal(client.name, "POST");
    assert.equal(client.attributes["http.response.status_code"], 200);
    const sent = stub.requests.filter((r) => r.path.endsWith("/chat/completions")).at(-1)!;
    assert.equal(sent.headers.traceparent, `00-${client.traceId}-${client.spanId}-01`);
  });
});

describe("the export worker", () => {
  it("sends spans from a thread at the lowest scheduling priority, the serving thread's unchanged (Linux)", {
    skip: process.platform !== "linux" && "thread priorities are read from /proc",
  }, async () => {
    // A span exported proves the worker has started (it lowers its priority first thing).
    const res = await postJson(
      `${srv.url}/v1/models/churn-tree/predict`,
      { rows: [ROW] },
      { "x-request-id": "nice-1" },
    );
    assert.equal(res.status, 200);
    await receiver.waitFor((s) => server(s, "nice-1") !== undefined);
    // /proc/<pid>/task/<tid>/stat: the 19th field is the thread's nice value.
    const niceOf = (tid: string): number | undefined => {
      try {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
      } catch {
        return undefined; // the thread ended meanwhile
      }
    };
    const serving = niceOf(String(process.pid));
    if (serving === 19) return; // the whole process already runs at the lowest priority
    const threads = readdirSync("/proc/self/task")
      .map((tid) => ({ tid, nice: niceOf(tid) }))
      .filter((t) => t.nice !== undefined);
    assert.equal(threads.filter((t) => t.nice === 19).length, 1, JSON.stringify(threads));
    assert.ok(
      threads.filter((t) => t.nice !== 19).every((t) => t.nice === serving),
      JSON.stringify(threads),
    );
  });
});
