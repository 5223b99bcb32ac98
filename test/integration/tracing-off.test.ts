// Tracing off (docs/Tracing.md): nothing is exported, and modelport adds no traceparent of its own
// to the calls it makes; a traceparent the client sent is passed on as received (to runners and
// upstream APIs), so a trace that crosses an untraced modelport is not cut. Both tiers run in
// this process (tracing is per process), with a recording proxy in front of the runner.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { tracing } from "../../src/telemetry/spans.js";
import { testModels } from "../helpers/models.js";
import { type OpenAiStub, startOpenAiStub } from "../helpers/openai-stub.js";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp-receiver.js";
import { type InProcessServer, postJson, startInProcess, waitReady } from "../helpers/server.js";

let receiver: OtlpReceiver;
let stub: OpenAiStub;
let runner: InProcessServer;
let api: InProcessServer;
let up: InProcessServer;
const seen: IncomingHttpHeaders[] = [];
const proxy = createServer((req, res) => {
  if (req.url?.includes("/infer")) seen.push(req.headers);
  const target = new URL(runner.url);
  const out = request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  req.pipe(out);
});
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

before(async () => {
  receiver = await startOtlpReceiver();
  // An endpoint, but the exporter says none: off.
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
  process.env.OTEL_TRACES_EXPORTER = "none";
  stub = await startOpenAiStub();
  const model = join(await testModels(), "churn-tree.onnx");
  runner = await startInProcess({ modelPath: model, flags: { role: "runner" } });
  proxy.listen(0, "127.0.0.1");
  await new Promise((r) => proxy.once("listening", r));
  const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  api = await startInProcess({ modelPath: model, flags: { role: "api", runners: [proxyUrl] } });
  await waitReady(api.url, 30_000);
  const config = join(mkdtempSync(join(tmpdir(), "modelport-tracing-off-")), "modelport.yaml");
  writeFileSync(
    config,
    `models:\n  - {name: chat, backend: upstream, upstream: {url: "${stub.url}", model: stub-model, retries: 0}}\n`,
  );
  up = await startInProcess({ file: config });
  await waitReady(up.url, 30_000);
});

after(async () => {
  await up?.close();
  await api?.close();
  await runner?.close();
  proxy.closeAllConnections();
  await new Promise((r) => proxy.close(r));
  await stub?.close();
  await receiver?.close();
});

const ROWS = { rows: [[1, 2, 3, 1, 0, 4]] };
const CHAT = { model: "chat", messages: [{ role: "user", content: "hi" }] };
const completions = () => stub.requests.filter((r) => r.path.endsWith("/chat/completions"));

describe("tracing off", () => {
  it("sends no traceparent of its own to runners or upstreams", async () => {
    const res = await postJson(`${api.url}/v1/models/churn-tree/predict`, ROWS);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.traceparent, undefined);
    const chat = await postJson(`${up.url}/v1/chat/completions`, CHAT);
    assert.equal(chat.status, 200, JSON.stringify(chat.body));
    assert.equal(completions().length, 1);
    assert.equal(completions()[0]!.headers.traceparent, undefined);
  });

  it("passes the client's traceparent and tracestate on as received", async () => {
    const headers = { traceparent: TRACEPARENT, tracestate: "vendor=abc" };
    const res = await postJson(`${api.url}/v1/models/churn-tree/predict`, ROWS, headers);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(seen.at(-1)!.traceparent, TRACEPARENT);
    assert.equal(seen.at(-1)!.tracestate, "vendor=abc");
    const chat = await postJson(`${up.url}/v1/chat/completions`, CHAT, headers);
    assert.equal(chat.status, 200, JSON.stringify(chat.body));
    assert.equal(completions().at(-1)!.headers.traceparent, TRACEPARENT);
    assert.equal(completions().at(-1)!.headers.tracestate, "vendor=abc");
  });

  it("loads no SDK and exports nothing", async () => {
    assert.equal(tracing.on, false);
    assert.equal(tracing.factory, undefined);
    await Promise.all([up.close(), api.close(), runner.close()]);
    assert.equal(receiver.requests.length, 0);
    assert.equal(receiver.spans.length, 0);
  });
});
