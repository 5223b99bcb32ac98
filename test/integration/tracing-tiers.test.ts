// Traces across the split tiers (docs/Tracing.md): a `--role api` process and a `--role runner`
// process, each exporting over OTLP/HTTP to one real receiver in this process. A predict through
// the API tier must be one trace: the API tier's server span, its client span to the runner, and
// the runner's server span as that client span's child.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp-receiver.js";
import { type ChildServer, postJson, startChild, waitReady } from "../helpers/server.js";

let receiver: OtlpReceiver;
const children: ChildServer[] = [];
let api: ChildServer;

before(async () => {
  receiver = await startOtlpReceiver();
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-tracing-tiers-"));
  const config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "server:",
      "  runnerPollMs: 300",
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      "models:",
      `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}}`,
    ].join("\n"),
  );
  const env = (service: string) => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: service,
    OTEL_BSP_SCHEDULE_DELAY: "50",
  });
  const runner = await startChild(["-c", config, "--role", "runner"], env("runner"));
  children.push(runner);
  assert.equal((await waitReady(runner.url, 90_000)).status, 200, runner.output().slice(-2000));
  api = await startChild(["-c", config, "--role", "api", "--runner", runner.url], env("api"));
  children.push(api);
  assert.equal((await waitReady(api.url, 90_000)).status, 200, api.output().slice(-2000));
});

after(async () => {
  for (const c of children) await c.stop("SIGKILL");
  await receiver?.close();
});

describe("a predict through both tiers", () => {
  it("is one trace: API server span → client span → runner server span (with the runner's own spans under it)", async () => {
    const res = await postJson(
      `${api.url}/v1/models/churn-tree/predict`,
      { rows: [[1, 2, 3, 1, 0, 4]] },
      { "x-request-id": "tiers-1" },
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const spans = await receiver.waitFor((s) => {
      const top = s.find(
        (x) => x.service === "api" && x.kind === 2 && x.attributes["modelport.request_id"] === "tiers-1",
      );
      return (
        top !== undefined &&
        s.some((x) => x.service === "runner" && x.kind === 2 && x.traceId === top.traceId) &&
        s.some((x) => x.service === "runner" && x.name === "modelport.infer" && x.traceId === top.traceId)
      );
    });
    const top = spans.find(
      (x) => x.service === "api" && x.kind === 2 && x.attributes["modelport.request_id"] === "tiers-1",
    )!;
    assert.equal(top.name, "POST /v1/models/{model}/predict");
    const client = spans.find((x) => x.service === "api" && x.kind === 3 && x.parentSpanId === top.spanId);
    assert.ok(client, "the API tier's client span to the runner");
    assert.equal(client.traceId, top.traceId);
    assert.equal(client.attributes["http.response.status_code"], 200);
    const runnerSpan = spans.find(
      (x) => x.service === "runner" && x.kind === 2 && x.traceId === top.traceId,
    )!;
    assert.equal(
      runnerSpan.parentSpanId,
      client.spanId,
      "the runner's server span is the client span's child",
    );
    assert.equal(runnerSpan.name, "POST /v2/models/{model}/infer");
    // The request id travels too, so both tiers' spans carry it.
    assert.equal(runnerSpan.attributes["modelport.request_id"], "tiers-1");
    const under = spans.filter((x) => x.parentSpanId === runnerSpan.spanId).map((x) => x.name);
    assert.ok(under.includes("modelport.batch"), under.join(", "));
    // The default MODELPORT_TRACE_STAGE_MS (10): a fast decode is an attribute of the server span,
    // a slow one (a loaded machine) its own span; one of the two, never neither.
    assert.ok(
      under.includes("modelport.decode") ||
        typeof runnerSpan.attributes["modelport.decode.duration_ms"] === "number",
      `decode as a span or an attribute: ${under.join(", ")} ${JSON.stringify(runnerSpan.attributes)}`,
    );
  });
});
