// Payload capture end to end (docs/Capture.md): a real listening server whose models have
// `capture` writes request/response pairs as JSON lines, to rotated files or to S3 objects (the
// in-repo S3 protocol server). Sampling is seeded, so counts are exact; a stalled or failing
// destination is shown by behaviour (answers, counters), never by timing.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import type { CaptureLine, CaptureSink } from "../../src/capture/sink.js";
import { S3BlobStore } from "../../src/storage/s3-blob-store.js";
import { metricValue } from "../helpers/metrics.js";
import { testModels } from "../helpers/models.js";
import { BUCKET, CREDENTIALS, startS3, stopS3 } from "../helpers/s3.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const ROW = [1, 2, 3, 1, 0, 4];

type Rec = Record<string, any>;

let models: string;

before(async () => {
  models = await testModels();
});

/** Writes `config` as YAML in a fresh folder and starts a server from it. */
async function serve(
  config: Record<string, unknown>,
  build: Parameters<typeof startInProcess>[1] = {},
): Promise<{ server: InProcessServer; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), "modelport-capture-"));
  const file = join(dir, "modelport.yaml");
  writeFileSync(file, stringify(config));
  const server = await startInProcess({ file, cwd: dir, env: {} }, build);
  return { server, dir };
}

function churn(name: string, capture?: Record<string, unknown>) {
  return { name, path: join(models, "churn-tree.onnx"), ...(capture ? { capture } : {}) };
}

/** Every record in the capture files of `dir`, in file order. */
function records(dir: string): Rec[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".jsonl"));
  } catch {
    return [];
  }
  return names
    .sort()
    .flatMap((n) => readFileSync(join(dir, n), "utf8").split("\n").filter(Boolean))
    .map((l) => JSON.parse(l) as Rec);
}

const predict = (srv: InProcessServer, model: string, body: unknown, headers: Record<string, string> = {}) =>
  postJson(`${srv.url}/v1/models/${model}/predict`, body, headers);

describe("capture to files", () => {
  let srv: InProcessServer;
  let out: string;
  // Alternates below and above 0.5: a rate of 0.5 takes exactly every other request.
  let draws = 0;

  before(async () => {
    const started = await serve(
      {
        server: { allowOversubscription: true, capture: { dir: "captured" } },
        models: [
          churn("churn", { redact: ["rows.*.3", "inputs.*.data.0", "secret"] }),
          churn("churn-half", { sampleRate: 0.5 }),
          churn("churn-small", { maxBytes: 1024 }),
          churn("churn-off"),
          // On the model's thread only (no copy in the server's thread), as a larger model runs.
          { ...churn("churn-thread", {}), batching: { inlineMaxMs: 0, maxBatchRows: 1000 } },
        ],
      },
      { build: { capture: { random: () => (draws++ % 2 === 0 ? 0.25 : 0.75) } } },
    );
    srv = started.server;
    out = join(started.dir, "captured");
  });
  after(() => srv.close());

  it("writes exactly the pairs of a model with capture: ids, version, latency, bodies, errors", async () => {
    const ok = await predict(srv, "churn", { rows: [ROW], secret: "s3cr3t" }, { "x-request-id": "cap-1" });
    assert.equal(ok.status, 200);
    const oip = await postJson(`${srv.url}/v2/models/churn/infer`, {
      id: "oip-1",
      inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", data: ROW }],
    });
    assert.equal(oip.status, 200);
    const bad = await predict(srv, "churn", { rows: [[1]] }, { "x-request-id": "cap-bad" });
    assert.equal(bad.status, 400);
    // Not captured: a model without capture, and a model that is not served.
    assert.equal((await predict(srv, "churn-off", { rows: [ROW] })).status, 200);
    assert.equal((await predict(srv, "nope", { rows: [ROW] })).status, 404);

    await until("three records", () => records(out).filter((r) => r.model === "churn").length === 3);
    const recs = records(out);
    assert.deepEqual(recs.map((r) => r.model).sort(), ["churn", "churn", "churn"]);
    const [first, second, third] = recs;
    assert.equal(first!.requestId, "cap-1");
    assert.equal(first!.version, "1");
    // A server without keys: every caller is the anonymous key.
    assert.equal(first!.key, "anonymous");
    assert.equal(first!.protocol, "native");
    assert.equal(first!.route, "/v1/models/:model/predict");
    assert.equal(first!.status, 200);
    assert.ok(typeof first!.latencyMs === "number" && first!.latencyMs >= 0);
    assert.ok(!Number.isNaN(Date.parse(first!.time)));
    // Redacted: the fourth value of every row and the secret; the rest as sent.
    assert.deepEqual(first!.request, { rows: [[1, 2, 3, "[redacted]", 0, 4]], secret: "[redacted]" });
    assert.deepEqual(first!.response, ok.body);
    assert.equal(first!.truncated, undefined);

    assert.equal(second!.protocol, "oip");
    assert.equal(second!.route, "/v2/models/:model/infer");
    assert.equal(second!.requestId, oip.headers.get("x-request-id"));
    assert.deepEqual(second!.request.inputs[0].data, ["[redacted]", 2, 3, 1, 0, 4]);
    assert.deepEqual(second!.response, oip.body);

    assert.equal(third!.requestId, "cap-bad");
    assert.equal(third!.status, 400);
    assert.equal(third!.response, null);
    assert.equal(third!.error.code, bad.body.error.code);
    assert.equal(third!.error.message, bad.body.error.message);
    assert.equal(await metricValue(srv.url, "modelport_capture_records_total", { model: "churn" }), 3);
  });

  it("describes binary tensor bodies instead of copying their bytes", async () => {
    // 1,000 rows (24 KB): large enough that the model's thread is given the body's memory, so the
    // record must be made from the body before the call.
    const data = Buffer.from(new Float32Array(Array.from({ length: 1000 }, () => ROW).flat()).buffer);
    const header = Buffer.from(
      JSON.stringify({
        inputs: [
          { name: "features", shape: [1000, 6], datatype: "FP32", parameters: { binary_data_size: 24_000 } },
        ],
      }),
    );
    const res = await fetch(`${srv.url}/v2/models/churn-thread/infer`, {
      method: "POST",
      headers: {
        "content-type": "application/octet-stream",
        "inference-header-content-length": String(header.length),
        "x-request-id": "cap-bin",
      },
      body: Buffer.concat([header, data]),
    });
    assert.equal(res.status, 200);
    await until("the binary record", () => records(out).some((r) => r.requestId === "cap-bin"));
    const rec = records(out).find((r) => r.requestId === "cap-bin")!;
    assert.equal(rec.request.inputs[0].name, "features");
    assert.equal(rec.request.binary_data_bytes, 24_000);
    assert.match(rec.request.note, /not captured/);
  });

  it("samples: a rate of 0.5 with the seeded sampler takes exactly every other request", async () => {
    for (let i = 0; i < 20; i++)
      assert.equal((await predict(srv, "churn-half", { rows: [ROW] })).status, 200);
    await until("ten records", () => records(out).filter((r) => r.model === "churn-half").length === 10);
    assert.equal(await metricValue(srv.url, "modelport_capture_records_total", { model: "churn-half" }), 10);
  });

  it("holds a record within maxBytes: the bodies are cut and marked", async () => {
    const rows = Array.from({ length: 100 }, () => ROW);
    const res = await predict(srv, "churn-small", { rows }, { "x-request-id": "cap-big" });
    assert.equal(res.status, 200);
    await until("the big record", () => records(out).some((r) => r.requestId === "cap-big"));
    const line = readdirSync(out)
      .flatMap((n) => readFileSync(join(out, n), "utf8").split("\n"))
      .find((l) => l.includes('"cap-big"'))!;
    assert.ok(Buffer.byteLength(line) <= 1024, `${Buffer.byteLength(line)} bytes`);
    const rec = JSON.parse(line) as Rec;
    assert.equal(rec.truncated, true);
    assert.equal(rec.request.truncated, true);
    assert.equal(rec.request.bytes, JSON.stringify({ rows }).length);
    assert.ok(JSON.stringify({ rows }).startsWith(rec.request.prefix));
    assert.equal(rec.model, "churn-small");
    assert.equal(rec.status, 200);
  });
});

describe("a destination that fails or stalls", () => {
  it("a folder that cannot be created: requests still answer 200, the records are counted as dropped", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelport-capture-file-"));
    writeFileSync(join(dir, "not-a-folder"), "");
    const { server } = await serve({
      server: { capture: { dir: join(dir, "not-a-folder", "captured") } },
      models: [churn("churn", {})],
    });
    try {
      for (let i = 0; i < 5; i++) assert.equal((await predict(server, "churn", { rows: [ROW] })).status, 200);
      await until(
        "five drops",
        async () =>
          (await metricValue(server.url, "modelport_capture_dropped_total", {
            model: "churn",
            reason: "sink_failed",
          })) === 5,
      );
      // Warned, at a bounded rate: one line for the first failure (the next ones within 10 s are summed).
      const warnings = server.logs.filter((l) => String(l.msg).startsWith("payload capture dropped"));
      assert.ok(warnings.length >= 1 && warnings.length < 5, `${warnings.length} warnings`);
    } finally {
      await server.close();
    }
  });

  it("a stalled destination: the queue fills, later records are dropped, requests are not held", async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((r) => {
      release = r;
    });
    const written: CaptureLine[] = [];
    let writes = 0;
    const stalled: CaptureSink = {
      batching: "immediate",
      async write(lines) {
        writes++;
        await released;
        written.push(...lines);
      },
      async close() {},
    };
    const { server } = await serve(
      { server: { capture: { dir: "unused", queueRecords: 3 } }, models: [churn("churn", {})] },
      { build: { capture: { sink: stalled } } },
    );
    try {
      // The first record goes to the stalled write; three wait; the other six are dropped. Every
      // request still answers (none waits on the destination).
      for (let i = 0; i < 10; i++)
        assert.equal((await predict(server, "churn", { rows: [ROW] })).status, 200);
      await until(
        "six drops",
        async () =>
          (await metricValue(server.url, "modelport_capture_dropped_total", {
            model: "churn",
            reason: "queue_full",
          })) === 6,
      );
      assert.equal(writes, 1);
      release();
      await until("four written", () => written.length === 4);
      assert.equal(await metricValue(server.url, "modelport_capture_records_total", { model: "churn" }), 4);
    } finally {
      release();
      await server.close();
    }
  });

  it("a blob store that throws: requests answer 200, the batch is counted as dropped", async () => {
    const failing = {
      put: async () => {
        throw new Error("S3 is down");
      },
      get: async () => undefined,
      url: async () => undefined,
      check: async () => {},
      delete: async () => {},
      close: async () => {},
    };
    const { server } = await serve(
      {
        server: { capture: { s3: { bucket: "unused" }, flushMs: 50 } },
        models: [churn("churn", {})],
      },
      { build: { capture: { blobStore: failing } } },
    );
    try {
      for (let i = 0; i < 3; i++) assert.equal((await predict(server, "churn", { rows: [ROW] })).status, 200);
      await until(
        "three drops",
        async () =>
          (await metricValue(server.url, "modelport_capture_dropped_total", {
            model: "churn",
            reason: "sink_failed",
          })) === 3,
      );
    } finally {
      await server.close();
    }
  });
});

describe("capture to S3", () => {
  after(() => stopS3());

  it("writes JSONL objects under the prefix, and what waits is written on shutdown", async () => {
    const s3 = await startS3();
    process.env.AWS_ACCESS_KEY_ID = CREDENTIALS.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = CREDENTIALS.secretAccessKey;
    const { server } = await serve({
      server: {
        capture: {
          // A batch is written every 60 s, or on shutdown: the shutdown writes it here.
          s3: { bucket: BUCKET, prefix: "audit/churn", endpoint: s3.endpoint, forcePathStyle: true },
          flushMs: 60_000,
        },
      },
      models: [churn("churn", {})],
    });
    const ids: string[] = [];
    try {
      for (let i = 0; i < 4; i++) {
        const res = await predict(server, "churn", { rows: [ROW] }, { "x-request-id": `s3-${i}` });
        assert.equal(res.status, 200);
        ids.push(`s3-${i}`);
      }
    } finally {
      await server.close();
    }
    const store = new S3BlobStore({
      bucket: BUCKET,
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: CREDENTIALS,
    });
    try {
      const { S3Client, ListObjectsV2Command } = await import("@aws-sdk/client-s3");
      const client = new S3Client({
        endpoint: s3.endpoint,
        forcePathStyle: true,
        region: "us-east-1",
        credentials: CREDENTIALS,
      });
      const listed = await client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "audit/churn/" }));
      const keys = (listed.Contents ?? []).map((o) => o.Key!);
      assert.equal(keys.length, 1, JSON.stringify(keys));
      assert.match(keys[0]!, /^audit\/churn\/\d{4}\/\d{2}\/\d{2}\/capture-.*\.jsonl$/);
      const blob = await store.get(keys[0]!);
      assert.equal(blob?.contentType, "application/x-ndjson");
      const recs = blob!.data
        .toString("utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Rec);
      assert.deepEqual(
        recs.map((r) => r.requestId),
        ids,
      );
      assert.ok(recs.every((r) => r.model === "churn" && r.status === 200 && r.version === "1"));
      client.destroy();
    } finally {
      await store.close();
    }
  });
});
