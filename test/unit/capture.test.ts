// The parts of payload capture one at a time (docs/Capture.md): redaction paths, a record's
// line within maxBytes, file rotation with keepFiles, and the queue's shutdown flush, each
// without a server; the configuration's checks at load.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { pino } from "pino";
import { FileSink } from "../../src/capture/file-sink.js";
import { CaptureQueue } from "../../src/capture/queue.js";
import {
  capturePolicy,
  MESSAGE_WITHHELD,
  type PendingRecord,
  serializeRecord,
} from "../../src/capture/record.js";
import { parseRedactPath, REDACTED, redact, redactPathProblem } from "../../src/capture/redact.js";
import type { CaptureLine, CaptureSink } from "../../src/capture/sink.js";
import { ConfigError, loadConfig } from "../../src/config/load.js";
import { captureSchema } from "../../src/config/schema.js";
import { Metrics } from "../../src/metrics/metrics.js";
import { testModels } from "../helpers/models.js";

function record(over: Partial<PendingRecord> = {}): PendingRecord {
  return {
    time: Date.UTC(2024, 0, 2, 3, 4, 5),
    model: "m",
    version: "1",
    key: null,
    requestId: "r1",
    route: "/v1/models/:model/predict",
    protocol: "native",
    status: 200,
    latencyMs: 1.5,
    request: { kind: "value", value: { rows: [[1, 2]] } },
    response: { kind: "text", text: '{"outputs":{"y":[3]}}', json: true },
    policy: capturePolicy(captureSchema.parse({})),
    ...over,
  };
}

describe("redaction paths", () => {
  it("refuses empty paths, empty segments and partial wildcards", () => {
    assert.equal(redactPathProblem("inputs.ssn"), undefined);
    assert.equal(redactPathProblem("rows.*.3"), undefined);
    assert.match(redactPathProblem("")!, /empty/);
    assert.match(redactPathProblem("a..b")!, /empty segment/);
    assert.match(redactPathProblem("a.")!, /empty segment/);
    assert.match(redactPathProblem("a.b*")!, /whole segment/);
  });

  it("replaces keys, indexes and wildcards in a copy, leaving the body as it was", () => {
    const body = {
      inputs: { ssn: "123", name: "x" },
      rows: [[1, 2, 3, 4], [5, 6, 7, 8], [9]],
      m: { "0": "k" },
    };
    const before = JSON.stringify(body);
    const out = redact(body, ["inputs.ssn", "rows.*.3", "m.0", "absent.x", "rows.9"].map(parseRedactPath));
    assert.deepEqual(out, {
      inputs: { ssn: REDACTED, name: "x" },
      rows: [[1, 2, 3, REDACTED], [5, 6, 7, REDACTED], [9]],
      m: { "0": REDACTED },
    });
    assert.equal(JSON.stringify(body), before);
    // Parts no path touches are shared, not copied.
    assert.equal((out as typeof body).rows[2], body.rows[2]);
    assert.deepEqual(redact({ a: { b: 1, c: 2 } }, [parseRedactPath("a.*")]), {
      a: { b: REDACTED, c: REDACTED },
    });
    assert.equal(redact("text", [parseRedactPath("a")]), "text");
  });
});

describe("a record's line", () => {
  it("has the documented fields, and the response JSON as sent", () => {
    const line = serializeRecord(record());
    assert.deepEqual(JSON.parse(line), {
      time: "2024-01-02T03:04:05.000Z",
      model: "m",
      version: "1",
      key: null,
      requestId: "r1",
      route: "/v1/models/:model/predict",
      protocol: "native",
      status: 200,
      latencyMs: 1.5,
      request: { rows: [[1, 2]] },
      response: { outputs: { y: [3] } },
    });
  });

  it("a refused request with fields redacted keeps its error's code, not its message, which may quote them", () => {
    const policy = capturePolicy(captureSchema.parse({ redact: ["rows.*.3"] }));
    const refused = (rows: unknown[][], message: string) =>
      JSON.parse(
        serializeRecord(
          record({
            policy,
            status: 400,
            request: { kind: "value", value: { rows } },
            response: {
              kind: "text",
              text: JSON.stringify({ error: { code: "MP_ERR_INPUT_DATATYPE", message, retryable: false } }),
              json: true,
            },
          }),
        ),
      );
    const quoted = refused([[1, 2, 3, "SSN-123-45-6789", 5, 6]], 'element 3 is the string "SSN-123-45-6789"');
    assert.deepEqual(quoted.error, { code: "MP_ERR_INPUT_DATATYPE", message: MESSAGE_WITHHELD });
    assert.ok(!JSON.stringify(quoted).includes("SSN-123"));
    // Nothing redacted in this request: its message is kept as it was.
    const plain = refused([[1, 2]], "input 'features' has shape [1, 2]");
    assert.deepEqual(plain.error, {
      code: "MP_ERR_INPUT_DATATYPE",
      message: "input 'features' has shape [1, 2]",
    });
  });

  it("stays within maxBytes: a body that does not fit is cut to a marked prefix, redaction first", () => {
    const policy = capturePolicy(captureSchema.parse({ maxBytes: 1024, redact: ["secret"] }));
    const big = { secret: "hunter2", rows: Array.from({ length: 500 }, (_, i) => [i, "é"]) };
    const line = serializeRecord(record({ policy, request: { kind: "value", value: big } }));
    assert.ok(Buffer.byteLength(line) <= 1024, `${Buffer.byteLength(line)} bytes`);
    const rec = JSON.parse(line);
    assert.equal(rec.truncated, true);
    assert.equal(rec.request.truncated, true);
    assert.ok(!line.includes("hunter2"));
    assert.ok(rec.request.prefix.startsWith('{"secret":"[redacted]"'));
    // The small response fits whole beside it.
    assert.deepEqual(rec.response, { outputs: { y: [3] } });
  });

  it("a failure records the error, not the body; binary bodies are described, not copied", () => {
    const header = Buffer.from(JSON.stringify({ inputs: [{ name: "x", shape: [1], datatype: "FP32" }] }));
    const line = serializeRecord(
      record({
        status: 400,
        request: {
          kind: "binary",
          data: Buffer.concat([header, Buffer.alloc(4)]),
          headers: { "inference-header-content-length": String(header.length) },
        },
        response: { kind: "text", text: '{"error":{"code":"MP_ERR_X","message":"bad"}}', json: true },
      }),
    );
    const rec = JSON.parse(line);
    assert.deepEqual(rec.error, { code: "MP_ERR_X", message: "bad" });
    assert.equal(rec.response, null);
    assert.equal(rec.request.inputs[0].name, "x");
    assert.equal(rec.request.binary_data_bytes, 4);
    const raw = JSON.parse(
      serializeRecord(
        record({ request: { kind: "binary", data: Buffer.alloc(8), headers: { "x-tensor-shape": "2" } } }),
      ),
    );
    assert.deepEqual(raw.request.tensor, { shape: "2" });
    assert.equal(raw.request.binary_data_bytes, 8);
  });
});

describe("the file sink", () => {
  it("starts a new file at rotateBytes and keeps at most keepFiles", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "modelport-capture-sink-")), "out");
    const sink = new FileSink({ dir, rotateBytes: 1024, keepFiles: 3 });
    const line = (i: number): CaptureLine => ({
      model: "m",
      text: JSON.stringify({ i, pad: "x".repeat(180) }),
    });
    // 20 lines of ~200 bytes: five per file, so four files are made and the oldest deleted.
    for (let i = 0; i < 20; i += 2) await sink.write([line(i), line(i + 1)]);
    await sink.close();
    const names = readdirSync(dir).sort();
    assert.equal(names.length, 3);
    for (const n of names) assert.ok(statSync(join(dir, n)).size <= 1024);
    const kept = names.flatMap((n) =>
      readFileSync(join(dir, n), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { i: number }).i),
    );
    assert.deepEqual(kept, [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
  });

  it("rejects a write it cannot make (the folder's parent is a file)", async () => {
    const base = mkdtempSync(join(tmpdir(), "modelport-capture-sink-"));
    writeFileSync(join(base, "file"), "");
    const sink = new FileSink({ dir: join(base, "file", "out"), rotateBytes: 1024, keepFiles: 3 });
    await assert.rejects(sink.write([{ model: "m", text: "{}" }]));
  });
});

describe("the queue", () => {
  const make = (sink: CaptureSink, metrics = new Metrics({ processMetrics: false })) => ({
    metrics,
    queue: new CaptureQueue({
      sink,
      metrics,
      log: pino({ level: "silent" }),
      maxRecords: 100,
      maxBytes: 1 << 20,
      batchBytes: 1 << 20,
      flushMs: 3_600_000,
    }),
  });
  const counter = async (m: Metrics, name: string, labels: Record<string, string>) =>
    (await m.registry.getSingleMetric(name)!.get()).values.find((v) =>
      Object.entries(labels).every(([k, x]) => v.labels[k] === x),
    )?.value;

  it("a batched sink gets what waits at close, in one write", async () => {
    const writes: CaptureLine[][] = [];
    const { queue, metrics } = make({
      batching: "batched",
      write: async (lines) => {
        writes.push([...lines]);
      },
      close: async () => {},
    });
    for (let i = 0; i < 5; i++) assert.equal(queue.offer(record({ requestId: `r${i}` })), true);
    assert.equal(writes.length, 0);
    await queue.close(Date.now() + 5000);
    assert.equal(writes.length, 1);
    assert.deepEqual(
      writes[0]!.map((l) => JSON.parse(l.text).requestId),
      ["r0", "r1", "r2", "r3", "r4"],
    );
    assert.equal(await counter(metrics, "modelport_capture_records_total", { model: "m" }), 5);
    // Closed: later records are dropped as shutdown.
    assert.equal(queue.offer(record()), false);
    assert.equal(await counter(metrics, "modelport_capture_dropped_total", { reason: "shutdown" }), 1);
  });

  it("a write that never ends: close gives up at the deadline and counts it as dropped", async () => {
    const { queue, metrics } = make({
      batching: "immediate",
      write: () => new Promise(() => {}),
      close: async () => {},
    });
    queue.offer(record());
    queue.offer(record());
    await queue.close(Date.now() + 50);
    assert.equal(await counter(metrics, "modelport_capture_dropped_total", { reason: "shutdown" }), 2);
    assert.equal(await counter(metrics, "modelport_capture_records_total", { model: "m" }), undefined);
  });
});

describe("capture configuration", () => {
  const write = (text: string) => {
    const file = join(mkdtempSync(join(tmpdir(), "modelport-capture-config-")), "modelport.yaml");
    writeFileSync(file, text);
    return file;
  };
  const problems = (file: string): string[] => {
    try {
      loadConfig({ file, env: {} });
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      return err.problems;
    }
    assert.fail("expected a ConfigError");
  };

  it("fills in defaults and resolves the folder against the config file", async () => {
    const models = await testModels();
    const file = write(
      `server: { capture: { dir: captured } }\nmodels:\n  - { name: a, path: ${join(models, "churn-tree.onnx")}, capture: {} }\n`,
    );
    const c = loadConfig({ file, env: {} });
    assert.deepEqual(c.models[0]!.capture, { sampleRate: 1, redact: [], maxBytes: 65536 });
    assert.equal(c.server.capture!.dir, join(file, "..", "captured"));
    assert.equal(c.server.capture!.rotateBytes, 64 * 1024 * 1024);
    assert.equal(c.server.capture!.keepFiles, 10);
  });

  it("refuses bad rates, bad paths, capture without a destination and two destinations, at load", async () => {
    const models = await testModels();
    const path = join(models, "churn-tree.onnx");
    const bad = problems(
      write(
        `server: { capture: { dir: x } }\nmodels:\n  - { name: a, path: ${path}, capture: { sampleRate: 2, redact: ["a..b"], maxBytes: 10 } }\n`,
      ),
    ).join("\n");
    assert.match(bad, /models\[0\]\.capture\.sampleRate/);
    assert.match(bad, /models\[0\]\.capture\.redact\[0\]: .*empty segment/);
    assert.match(bad, /models\[0\]\.capture\.maxBytes/);
    assert.match(
      problems(write(`models:\n  - { name: a, path: ${path}, capture: {} }\n`)).join("\n"),
      /models\[0\]\.capture: needs a destination/,
    );
    assert.match(
      problems(
        write(
          `server: { capture: { dir: x, s3: { bucket: abc } } }\nmodels:\n  - { name: a, path: ${path} }\n`,
        ),
      ).join("\n"),
      /exactly one destination/,
    );
  });
});
