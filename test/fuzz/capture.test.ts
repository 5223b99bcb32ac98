// Fuzzes payload capture (docs/Capture.md) on a real `modelport serve` process: a model with
// capture and redaction paths gets native and OIP bodies, valid or mutated, with a fresh marker
// planted at every place a redaction path names. Once the queue has drained, every line of the
// captured files is one JSON record within maxBytes, none of them holds a marker anywhere (not
// in a body, not in an error message quoting what was sent), and nothing was dropped for failing
// to serialize or write.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { metricValue } from "../helpers/metrics.js";
import { clone, Deep, encode, type Json, mutated, nativeBody, oipBody } from "./arbitraries.js";
import { check, checkAnswer, postJson, send, styleOf, useFuzzServer } from "./harness.js";

const MAX_BYTES = 2048;
const REDACT = ["rows.*.3", "inputs.*.data", "secret"];

async function warm(url: string): Promise<void> {
  await postJson(url, "/v1/models/cap/predict", { rows: [[3, 95, 4, 1, 0, 20]] });
}

const server = useFuzzServer({
  warm,
  server: ["capture: {dir: captured, rotateBytes: 65536, keepFiles: 100000}"],
  extra: (models) => [
    `  - name: cap`,
    `    path: ${join(models, "churn-tree.onnx")}`,
    "    threads: 1",
    `    capture: {sampleRate: 1, maxBytes: ${MAX_BYTES}, redact: ${JSON.stringify(REDACT)}}`,
  ],
});

/** Every marker planted: none may reach the captured files. */
const markers = new Set<string>();
/** Text that may be a marker: the files are searched for these, then each found looked up. */
const MARKER_TEXT = /MK[0-9a-f]{12}|1\d{6}\.25/g;

/** A marker: a string (wrong where a number goes, so error messages quote it) or a number. */
function marker(asNumber: boolean): Json {
  const m = asNumber ? 1_000_000 + markers.size + 0.25 : `MK${randomBytes(6).toString("hex")}`;
  markers.add(String(m));
  return m;
}

const isObject = (v: unknown): v is Record<string, Json> =>
  v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Deep);

/** Puts a marker at every place REDACT names in `body` (changed in place). */
function plant(body: Json, asNumber: boolean): void {
  if (!isObject(body)) return;
  body.secret = marker(false);
  const { rows, inputs } = body;
  if (Array.isArray(rows))
    for (const row of rows) if (Array.isArray(row) && row.length > 3) row[3] = marker(asNumber);
  const tensors = Array.isArray(inputs) ? inputs : isObject(inputs) ? Object.values(inputs) : [];
  for (const t of tensors) if (isObject(t)) t.data = marker(false);
}

/** Bodies for the captured model at `path`: of the example models' shapes, as they are or mutated. */
function bodiesAt(
  path: string,
  valid: fc.Arbitrary<{ body: Json }>,
): fc.Arbitrary<{ path: string; body: Json }> {
  const bodies = valid.map((b) => b.body);
  return fc.oneof(bodies, mutated(bodies, 64)).map((body) => ({ path, body }));
}

const body = fc.oneof(
  bodiesAt("/v1/models/cap/predict", nativeBody),
  bodiesAt("/v2/models/cap/infer", oipBody),
);

describe("payload capture", () => {
  it("bodies with markers at every redacted place get their usual answers", () =>
    check(
      "captureRecords",
      fc.asyncProperty(body, fc.boolean(), async ({ path, body }, asNumber) => {
        const sent = clone(body);
        plant(sent, asNumber);
        const text = encode(sent);
        const res = await postJson(server.url, path, text);
        checkAnswer(res, styleOf(path), { what: `${path} ${text.slice(0, 300)}` });
      }),
    ));

  it("once drained: every line is a JSON record within maxBytes, no marker anywhere, nothing failed", async () => {
    // Drained: nothing queued, and the count of records written no longer moves.
    let written = -1;
    for (let i = 0; i < 100; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const queued = await metricValue(server.url, "modelport_capture_queue_records", {});
      const now = (await metricValue(server.url, "modelport_capture_records_total", { model: "cap" })) ?? 0;
      if (queued === 0 && now === written) break;
      written = now;
    }
    for (const reason of ["serialize_failed", "sink_failed"])
      assert.equal(
        (await metricValue(server.url, "modelport_capture_dropped_total", { model: "cap", reason })) ?? 0,
        0,
        `records dropped: ${reason}`,
      );
    const dir = join(server.dir, "captured");
    let lines = 0;
    let redacted = 0;
    for (const file of readdirSync(dir)) {
      const text = readFileSync(join(dir, file), "utf8");
      for (const [m] of text.matchAll(MARKER_TEXT)) assert.ok(!markers.has(m), `marker ${m} in ${file}`);
      for (const line of text.split("\n")) {
        if (line === "") continue;
        lines++;
        assert.ok(
          Buffer.byteLength(line) <= MAX_BYTES,
          `a line of ${Buffer.byteLength(line)} bytes in ${file}`,
        );
        const record = JSON.parse(line) as { model?: string };
        assert.equal(record.model, "cap");
        if (line.includes('"[redacted]"')) redacted++;
      }
    }
    assert.ok(lines >= written && written > 0, `${lines} lines, ${written} records written`);
    assert.ok(redacted > 0, "no record had a field redacted");
    await send(server.url, "GET", "/livez");
  });

  server.finalCheck();
});
