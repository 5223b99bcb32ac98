// Request ids travel in and out and tag every log line of their request; /metrics carries
// requests by model, route and status, latency histograms, load time and readiness.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;

before(async () => {
  srv = await startInProcess({ modelPath: join(await testModels(), "churn-tree.onnx") });
});
after(() => srv.close());

describe("request ids and logs", () => {
  it("keeps a client's X-Request-Id, returns it, and tags the request's log line", async () => {
    const res = await postJson(
      `${srv.url}/v1/models/churn-tree/predict`,
      { rows: [[1, 2, 3, 1, 0, 4]] },
      { "x-request-id": "client-id-7" },
    );
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-request-id"), "client-id-7");
    const lines = srv.logs.filter((l) => l.reqId === "client-id-7");
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.msg, "request completed");
    assert.equal(lines[0]!.status, 200);
    assert.equal(lines[0]!.url, "/v1/models/churn-tree/predict");
  });

  it("makes an id when none (or an unsafe one) is sent, and errors carry it too", async () => {
    const res = await postJson(
      `${srv.url}/v1/models/churn-tree/predict`,
      { rows: [[1]] },
      { "x-request-id": "bad id\twith tab" },
    );
    assert.equal(res.status, 400);
    const id = res.headers.get("x-request-id")!;
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.ok(srv.logs.some((l) => l.reqId === id && l.status === 400));
  });
});

describe("metrics", () => {
  it("exposes requests, latency, inference time, load time and readiness", async () => {
    await postJson(`${srv.url}/v1/models/churn-tree/predict`, { rows: [[1, 2, 3, 1, 0, 4]] });
    await postJson(`${srv.url}/v1/models/churn-tree/predict`, { rows: [[1]] });
    const res = await fetch(`${srv.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type")!, /text\/plain/);
    const text = await res.text();
    assert.match(
      text,
      /modelport_requests_total\{model="churn-tree",route="\/v1\/models\/:model\/predict",status="200"\} [1-9]/,
    );
    assert.match(
      text,
      /modelport_requests_total\{model="churn-tree",route="\/v1\/models\/:model\/predict",status="400"\} [1-9]/,
    );
    assert.match(
      text,
      /modelport_request_duration_seconds_bucket\{le="0.005",model="churn-tree",route="\/v1\/models\/:model\/predict"\}/,
    );
    assert.match(text, /modelport_inference_duration_seconds_count\{model="churn-tree"\} [1-9]/);
    assert.match(text, /modelport_model_load_seconds\{model="churn-tree"\} 0\.\d+/);
    assert.match(text, /modelport_model_ready\{model="churn-tree"\} 1/);
    assert.match(text, /modelport_process_resident_memory_bytes/);
  });
});
