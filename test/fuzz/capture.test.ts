// Fuzzes payload capture (docs/Capture.md) on a real `modelport serve` process: models with
// capture and redaction paths get native and OIP bodies, and OpenAI chat, completions and
// embeddings bodies (streamed or not, echoing the prompt or not), valid or mutated, with a fresh
// marker planted at every place a redaction path names. Once the queue has drained, every line of the
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
import {
  chatBody,
  clone,
  completionBody,
  Deep,
  embeddingBody,
  encode,
  type Json,
  keepShort,
  mutated,
  nativeBody,
  oipBody,
} from "./arbitraries.js";
import { check, checkAnswer, postJson, send, styleOf, useFuzzServer } from "./harness.js";

const MAX_BYTES = 2048;
const REDACT = ["rows.*.3", "inputs.*.data", "secret"];
/** The language and embeddings models': what the client sent, and where an answer echoes it. */
const OPENAI_REDACT = [
  "messages.*.content",
  "prompt",
  "input",
  "secret",
  "choices.*.text",
  "choices.*.message.content",
];
const CAPTURED = ["cap", "cap-llm", "cap-embed"];

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
    "  - name: cap-llm",
    `    path: ${join(models, "tiny-llama.gguf")}`,
    "    threads: 1",
    "    llm: {contextSize: 512, sequences: 2, maxWaiting: 64}",
    `    capture: {sampleRate: 1, maxBytes: ${MAX_BYTES}, redact: ${JSON.stringify(OPENAI_REDACT)}}`,
    "  - name: cap-embed",
    "    backend: transformers",
    `    path: ${join(models, "tiny-embed")}`,
    "    threads: 1",
    `    capture: {sampleRate: 1, maxBytes: ${MAX_BYTES}, redact: ${JSON.stringify(OPENAI_REDACT)}}`,
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

/**
 * Puts a marker at every place OPENAI_REDACT names in an OpenAI body (changed in place): each
 * message's content, the prompt, the input (a string, or each string of a list) and `secret`.
 */
function plantOpenai(body: Json, asNumber: boolean): void {
  if (!isObject(body)) return;
  body.secret = marker(false);
  if (Array.isArray(body.messages))
    for (const m of body.messages) if (isObject(m)) m.content = marker(asNumber);
  if ("prompt" in body) body.prompt = marker(asNumber);
  if (Array.isArray(body.input)) body.input = body.input.map(() => marker(asNumber));
  else if ("input" in body) body.input = marker(asNumber);
}

/** Bodies for the captured model at `path`: valid ones as they are or mutated (generation kept short). */
function bodiesAt(path: string, valid: fc.Arbitrary<Json>): fc.Arbitrary<{ path: string; body: Json }> {
  return fc.oneof(valid, mutated(valid, 64).map(keepShort)).map((body) => ({ path, body }));
}

/** The example bodies for tiny-llama and tiny-embed, sent to the captured copies of them. */
const forModel = (model: string) => (b: Json) => (isObject(b) ? { ...b, model } : b);

const body = fc.oneof(
  bodiesAt(
    "/v1/models/cap/predict",
    nativeBody.map((b) => b.body),
  ),
  bodiesAt(
    "/v2/models/cap/infer",
    oipBody.map((b) => b.body),
  ),
);

const openaiBody = fc.oneof(
  bodiesAt("/v1/chat/completions", chatBody.map(forModel("cap-llm"))),
  bodiesAt("/v1/completions", completionBody.map(forModel("cap-llm"))),
  bodiesAt("/v1/embeddings", embeddingBody.map(forModel("cap-embed"))),
);

/**
 * The property of `share`: each body, with markers planted by `plantIn`, gets its usual answer,
 * in its route's shape.
 */
function answeredWithMarkers(
  share: "captureRecords" | "captureOpenai",
  bodies: fc.Arbitrary<{ path: string; body: Json }>,
  plantIn: (body: Json, asNumber: boolean) => void,
): Promise<void> {
  return check(
    share,
    fc.asyncProperty(bodies, fc.boolean(), async ({ path, body }, asNumber) => {
      const sent = clone(body);
      plantIn(sent, asNumber);
      const text = encode(sent);
      const res = await postJson(server.url, path, text);
      checkAnswer(res, styleOf(path), { what: `${path} ${text.slice(0, 300)}` });
    }),
  );
}

describe("payload capture", () => {
  it("bodies with markers at every redacted place get their usual answers", () =>
    answeredWithMarkers("captureRecords", body, plant));

  it("OpenAI bodies with markers where the client's text goes get their usual answers", () =>
    answeredWithMarkers("captureOpenai", openaiBody, plantOpenai));

  it("once drained: every line is a JSON record within maxBytes, no marker anywhere, nothing failed", async () => {
    // Drained: nothing queued, and the count of records written no longer moves.
    let written = -1;
    for (let i = 0; i < 100; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const queued = await metricValue(server.url, "modelport_capture_queue_records", {});
      let now = 0;
      for (const model of CAPTURED)
        now += (await metricValue(server.url, "modelport_capture_records_total", { model })) ?? 0;
      if (queued === 0 && now === written) break;
      written = now;
    }
    for (const model of CAPTURED)
      for (const reason of ["serialize_failed", "sink_failed"])
        assert.equal(
          (await metricValue(server.url, "modelport_capture_dropped_total", { model, reason })) ?? 0,
          0,
          `${model}: records dropped: ${reason}`,
        );
    const dir = join(server.dir, "captured");
    let lines = 0;
    const redacted = new Set<string>();
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
        const record = JSON.parse(line) as { model: string };
        assert.ok(CAPTURED.includes(record.model), record.model);
        if (line.includes('"[redacted]"')) redacted.add(record.model);
      }
    }
    assert.ok(lines >= written && written > 0, `${lines} lines, ${written} records written`);
    assert.deepEqual(
      [...redacted].sort(),
      [...CAPTURED].sort(),
      "each model has a record with a field redacted",
    );
    await send(server.url, "GET", "/livez");
  });

  server.finalCheck();
});
