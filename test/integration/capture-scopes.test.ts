// Payload capture on a server with keys (docs/Capture.md, docs/Multi-tenant.md): a request that
// was not let in for a model leaves nothing in that model's records. Key `a` may use churn-x
// only; it sends to the captured models on every captured route (native predict, pinned and
// `@version`, respond-async; OIP infer, pinned; OpenAI chat, completions, embeddings) and gets
// the 404 of a model that does not exist, as do callers with no key or a wrong one (401). Key
// `b`, allowed, sends the same requests after them: once its records are written (the queue
// keeps order), the capture files and the capture metrics hold b's records and nothing else.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { parsePrometheus } from "../../src/cli/cost.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const KEYS = { a: `mp_${"a".repeat(43)}`, b: `mp_${"b".repeat(43)}` };
const hash = (key: string) => `sha256:${createHash("sha256").update(key).digest("hex")}`;
const ROW = [1, 2, 3, 1, 0, 4];
const OIP = { inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", data: ROW }] };

/** Every captured route, each with a body naming a captured model, and the model it names. */
const CALLS: { path: string; body: unknown; model: string; headers?: Record<string, string> }[] = [
  { path: "/v1/models/churn-y/predict", body: { rows: [ROW] }, model: "churn-y" },
  { path: "/v1/models/churn-y/versions/1/predict", body: { rows: [ROW] }, model: "churn-y" },
  { path: "/v1/models/churn-y@1/predict", body: { rows: [ROW] }, model: "churn-y" },
  {
    path: "/v1/models/churn-y/predict",
    body: { rows: [ROW] },
    model: "churn-y",
    headers: { prefer: "respond-async" },
  },
  { path: "/v2/models/churn-y/infer", body: OIP, model: "churn-y" },
  { path: "/v2/models/churn-y/versions/1/infer", body: OIP, model: "churn-y" },
  {
    path: "/v1/chat/completions",
    body: { model: "tiny-llama", messages: [{ role: "user", content: "hi" }], max_tokens: 2 },
    model: "tiny-llama",
  },
  {
    path: "/v1/completions",
    body: { model: "tiny-llama", prompt: "hi", max_tokens: 2 },
    model: "tiny-llama",
  },
  { path: "/v1/embeddings", body: { model: "tiny-embed", input: "a cat" }, model: "tiny-embed" },
];

let server: InProcessServer;
let out: string;

function records(): Record<string, any>[] {
  let names: string[] = [];
  try {
    names = readdirSync(out).filter((n) => n.endsWith(".jsonl"));
  } catch {}
  return names
    .sort()
    .flatMap((n) => readFileSync(join(out, n), "utf8").split("\n").filter(Boolean))
    .map((l) => JSON.parse(l) as Record<string, any>);
}

before(async () => {
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-capture-scopes-"));
  out = join(dir, "captured");
  writeFileSync(
    join(dir, "keys.yaml"),
    stringify({
      keys: [
        { name: "a", hash: hash(KEYS.a), models: ["churn-x"] },
        { name: "b", hash: hash(KEYS.b) },
      ],
    }),
  );
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    stringify({
      server: { keys: join(dir, "keys.yaml"), capture: { dir: "captured" } },
      jobs: { sqlitePath: join(dir, "jobs.db") },
      models: [
        { name: "churn-x", path: join(models, "churn-tree.onnx"), capture: {} },
        { name: "churn-y", path: join(models, "churn-tree.onnx"), capture: {} },
        {
          name: "tiny-llama",
          path: join(models, "tiny-llama.gguf"),
          llm: { sequences: 1, contextSize: 512 },
          capture: {},
        },
        { name: "tiny-embed", backend: "transformers", path: join(models, "tiny-embed"), capture: {} },
      ],
    }),
  );
  server = await startInProcess({ file, cwd: dir, env: {} });
});

after(() => server?.close());

describe("capture and keys", () => {
  it("a request refused for a model (401, a scoped key's 404) is never captured; an allowed key's is", async () => {
    const refused = [
      ["a", { authorization: `Bearer ${KEYS.a}` }, 404],
      ["no key", {}, 401],
      ["a wrong key", { authorization: `Bearer mp_${"z".repeat(43)}` }, 401],
    ] as const;
    for (const [who, auth, status] of refused)
      for (const call of CALLS) {
        const res = await postJson(`${server.url}${call.path}`, call.body, { ...auth, ...call.headers });
        assert.equal(res.status, status, `${who} ${call.path}: ${JSON.stringify(res.body)}`);
      }
    // The allowed key, after them: its records come after any of theirs in the queue.
    const allowed: string[] = [];
    for (const [i, call] of CALLS.entries()) {
      const id = `b-${i}`;
      const res = await postJson(`${server.url}${call.path}`, call.body, {
        authorization: `Bearer ${KEYS.b}`,
        "x-request-id": id,
        ...call.headers,
      });
      assert.ok(res.status === 200 || res.status === 202, `b ${call.path}: ${JSON.stringify(res.body)}`);
      allowed.push(id);
    }
    await until("b's records", () => allowed.every((id) => records().some((r) => r.requestId === id)));

    const written = records();
    assert.deepEqual(
      written.map((r) => [r.key, r.requestId, r.model]),
      CALLS.map((call, i) => ["b", `b-${i}`, call.model]),
    );
    // The metrics count b's records only, per model (counted once a write has returned, which
    // may be just after its lines can be read).
    const counted = async () => {
      const text = await (
        await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${KEYS.b}` } })
      ).text();
      return Object.fromEntries(
        parsePrometheus(text)
          .filter((s) => s.name === "modelport_capture_records_total")
          .map((s) => [s.labels.model!, s.value]),
      );
    };
    const total = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0);
    await until("the written records counted", async () => total(await counted()) >= CALLS.length);
    const expected: Record<string, number> = {};
    for (const call of CALLS) expected[call.model] = (expected[call.model] ?? 0) + 1;
    assert.deepEqual(await counted(), expected);
  });
});
