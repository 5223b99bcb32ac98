// modelport/client against a real listening server: predict in JSON and in binary (typed arrays
// both ways, 64-bit integers beyond JSON's range included), OIP infer, errors as ModelportError
// with the server's code, status and request id, the deadline header reaching the server, jobs
// (submit, wait by long-poll and by SSE, result inline and from the blob store, cancel, list),
// `modelport types` output accepted by tsc with a usage file and refused with a wrong input
// name, and the openai SDK against the same server for language models.
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import { createClient, isModelportError, type ModelportError } from "../../client/index.js";
import { createGate } from "../helpers/gate.js";
import { testModels } from "../helpers/models.js";
import {
  CLI,
  freePort,
  type InProcessServer,
  postJson,
  REPO_ROOT,
  startInProcess,
} from "../helpers/server.js";

let srv: InProcessServer;
let dir: string;
const gate = createGate();
const ROW = [3, 95, 4, 1, 0, 20];
const ROWS = [ROW, [60, 30, 0, 24, 1, 5]];
const MULTI = { a: [[1, 2, 3]], b: [[1, 2, 3]], ids: [1], mask: [true], pixels: [[1, 2, 3, 4]], scale: 2.5 };

before(async () => {
  const models = await testModels();
  dir = mkdtempSync(join(tmpdir(), "modelport-client-"));
  const file = join(dir, "client.yaml");
  writeFileSync(
    file,
    [
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "  inlineResultMaxBytes: 2000",
      "models:",
      `  - {name: tree, path: ${join(models, "churn-tree.onnx")}}`,
      `  - {name: multi, path: ${join(models, "multi-io.onnx")}}`,
      `  - {name: tiny-llama, path: ${join(models, "tiny-llama.gguf")}, llm: {sequences: 1, contextSize: 512}}`,
      gate.modelYaml("gate"),
    ].join("\n"),
  );
  srv = await startInProcess({ file });
});

after(async () => {
  gate.openAll();
  await srv.close();
});

/**
 * Runs the CLI as a child without blocking this process (it serves the child's requests):
 * resolves to its exit status and output.
 */
function cli(args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { encoding: "utf8" }, (err, stdout, stderr) => {
      const status = err ? (typeof err.code === "number" ? err.code : 1) : 0;
      resolve({ status, stdout, stderr });
    });
  });
}

/** The error a promise rejects with (fails the test when it resolves). */
async function rejection(p: Promise<unknown>): Promise<ModelportError> {
  try {
    await p;
  } catch (err) {
    assert.ok(isModelportError(err), `not a ModelportError: ${err}`);
    return err;
  }
  assert.fail("expected a rejection");
}

describe("predict", () => {
  it("JSON rows and inputs answer what the raw route answers", async () => {
    const client = createClient({ baseUrl: srv.url });
    const raw = await postJson(`${srv.url}/v1/models/tree/predict`, { rows: ROWS });
    const viaRows = await client.predict("tree", { rows: ROWS });
    assert.deepEqual(viaRows.outputs, raw.body.outputs);
    assert.equal(viaRows.model, "tree");
    const viaInputs = await client
      .model("tree")
      .predict({ inputs: { features: ROWS } }, { outputs: ["label"] });
    assert.deepEqual(viaInputs.outputs, { label: raw.body.outputs.label });
  });

  it("binary tensors: typed arrays in, typed arrays out, equal to the JSON answer", async () => {
    const client = createClient({ baseUrl: srv.url });
    const res = await client.predictTensors("tree", {
      features: { data: new Float32Array(ROWS.flat()), shape: [2, 6] },
    });
    const json = await client.predict("tree", { rows: ROWS });
    const label = res.outputs.label!;
    const probs = res.outputs.probabilities!;
    assert.equal(label.datatype, "INT64");
    assert.ok(label.data instanceof BigInt64Array);
    assert.deepEqual([...label.data].map(Number), json.outputs.label);
    assert.ok(probs.data instanceof Float32Array);
    assert.deepEqual(probs.shape, [2, 2]);
    const expected = (json.outputs.probabilities as number[][]).flat();
    assert.deepEqual([...probs.data], expected.map(Math.fround));
  });

  it("binary tensors of every datatype the model takes, with an INT64 beyond 2^53 kept exact", async () => {
    const client = createClient({ baseUrl: srv.url });
    const big = 2n ** 60n + 7n;
    const res = await client.predictTensors("multi", {
      a: { data: new Float32Array([1, 2, 3, -1, 0.5, 8]), shape: [2, 3] },
      b: { data: new Float64Array([0.1, 0.2, 0.3, 1e-10, -1e10, Math.PI]), shape: [2, 3] },
      ids: { data: new BigInt64Array([big, -5n]), shape: [2] },
      mask: { data: new Uint8Array([1, 0]), shape: [2], datatype: "BOOL" },
      pixels: { data: new Uint8Array([0, 1, 2, 3, 255, 255, 255, 255]), shape: [2, 4] },
      scale: { data: new Float32Array([2.5]), shape: [] },
    });
    const o = res.outputs;
    assert.deepEqual([...(o.ids_next!.data as BigInt64Array)], [big + 1n, -4n]);
    assert.deepEqual([...(o.b_doubled!.data as Float64Array)], [0.2, 0.4, 0.6, 2e-10, -2e10, 2 * Math.PI]);
    assert.deepEqual([...(o.scaled!.data as Float32Array)], [2.5, 5, 7.5, -2.5, 1.25, 20]);
    assert.equal(o.mask_inverted!.datatype, "BOOL");
    assert.deepEqual([...(o.mask_inverted!.data as Uint8Array)], [0, 1]);
    assert.deepEqual([...(o.pixel_total!.data as Float32Array)], [6, 1020]);
  });

  it("OIP infer in JSON", async () => {
    const client = createClient({ baseUrl: srv.url });
    const res = await client.infer("tree", {
      inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", data: ROW }],
    });
    assert.equal(res.model_name, "tree");
    assert.deepEqual(
      res.outputs.map((o) => o.name),
      ["label", "probabilities"],
    );
  });

  it("a bad input is a ModelportError with the server's code, status, request id and details; not retried", async () => {
    const attempts: number[] = [];
    const client = createClient({
      baseUrl: srv.url,
      fetch: (input, init) => {
        attempts.push(Date.now());
        return fetch(input, init);
      },
    });
    const err = await rejection(client.predict("tree", { rows: [[1, 2]] }, { requestId: "client-test-42" }));
    assert.equal(err.code, "MP_ERR_INPUT_SHAPE");
    assert.equal(err.status, 400);
    assert.equal(err.retryable, false);
    assert.equal(err.requestId, "client-test-42");
    assert.equal((err.details as { input?: string }).input, "features");
    assert.match(err.message, /features/);
    assert.equal(attempts.length, 1);
    const missing = await rejection(client.infer("nope", { inputs: [] }));
    assert.equal(missing.status, 404);
    assert.equal(missing.code, "MP_ERR_MODEL_NOT_FOUND");
    assert.ok(missing.requestId);
  });

  it("timeoutMs reaches the server as X-Request-Timeout-Ms: its own 504 arrives, not the client's abort", async () => {
    // The gate holds the request; only the header can make the server answer before its 30 s default.
    const client = createClient({ baseUrl: srv.url, deadlineGraceMs: 20_000 });
    const err = await rejection(client.predict("gate", { rows: [[301]] }, { timeoutMs: 300 }));
    gate.open(301);
    assert.equal(err.status, 504, err.message);
    assert.equal(err.code, "MP_ERR_DEADLINE_EXCEEDED");
  });
});

describe("jobs", () => {
  it("submit, wait by long-poll, result equal to a synchronous predict", async () => {
    const client = createClient({ baseUrl: srv.url });
    const job = await client.jobs.submit("tree", { rows: ROWS }, { metadata: { order: 7 }, priority: 5 });
    assert.ok(["queued", "running", "succeeded"].includes(job.status));
    const done = await client.jobs.wait(job.id, { pollSeconds: 5 });
    assert.equal(done.status, "succeeded");
    assert.deepEqual(done.metadata, { order: 7 });
    const result = await client.jobs.result(job.id);
    assert.deepEqual(result.outputs, (await client.predict("tree", { rows: ROWS })).outputs);
  });

  it("submit, wait by SSE, and a large result read from the blob store", async () => {
    const client = createClient({ baseUrl: srv.url });
    const rows = Array.from({ length: 100 }, (_, i) => [i % 72, 50, 1, 12, 1, 10]);
    const job = await client.jobs.submit("tree", { rows });
    const done = await client.jobs.wait(job.id, { via: "sse" });
    assert.equal(done.status, "succeeded");
    assert.ok((done.result_bytes ?? 0) > 2000, JSON.stringify(done));
    const result = await client.jobs.result(job.id);
    assert.deepEqual(result.outputs, (await client.predict("tree", { rows })).outputs);
  });

  it("the same idempotency key returns the same job; a default key is fresh per submit", async () => {
    const client = createClient({ baseUrl: srv.url });
    const a = await client.jobs.submit("tree", { rows: [ROW] }, { idempotencyKey: "client-order-1" });
    const b = await client.jobs.submit("tree", { rows: [ROW] }, { idempotencyKey: "client-order-1" });
    assert.equal(b.id, a.id);
    const c = await client.jobs.submit("tree", { rows: [ROW] });
    assert.notEqual(c.id, a.id);
  });

  it("cancel a running job; waiting ends canceled; its result is MP_ERR_JOB_NOT_SUCCEEDED; retry queues it again", async () => {
    const client = createClient({ baseUrl: srv.url });
    const job = await client.jobs.submit("gate", { rows: [[401]] });
    await gate.started(401);
    const asked = await client.jobs.cancel(job.id);
    assert.equal(asked.cancel_requested, true, JSON.stringify(asked));
    gate.open(401);
    const done = await client.jobs.wait(job.id, { via: "sse" });
    assert.equal(done.status, "canceled");
    const err = await rejection(client.jobs.result(job.id));
    assert.equal(err.code, "MP_ERR_JOB_NOT_SUCCEEDED");
    assert.equal(err.status, 409);
    const again = await client.jobs.retry(job.id);
    assert.ok(["queued", "running", "succeeded"].includes(again.status), again.status);
    assert.equal((await client.jobs.wait(job.id)).status, "succeeded");
  });

  it("wait gives up after timeoutMs with MP_ERR_CLIENT_TIMEOUT; the job is unaffected", async () => {
    const client = createClient({ baseUrl: srv.url });
    const job = await client.jobs.submit("gate", { rows: [[402]] });
    await gate.started(402);
    const err = await rejection(client.jobs.wait(job.id, { timeoutMs: 200 }));
    assert.equal(err.code, "MP_ERR_CLIENT_TIMEOUT");
    assert.equal((await client.jobs.get(job.id)).status, "running");
    gate.open(402);
    assert.equal((await client.jobs.wait(job.id)).status, "succeeded");
  });

  it("list walks every page", async () => {
    const client = createClient({ baseUrl: srv.url });
    for (let i = 0; i < 4; i++) await client.jobs.submit("multi", { inputs: MULTI });
    const ids: string[] = [];
    let pages = 0;
    for await (const page of client.jobs.list({ model: "multi", limit: 2 })) {
      pages++;
      ids.push(...page.jobs.map((j) => j.id));
    }
    assert.ok(pages >= 2, `${pages} pages`);
    assert.equal(new Set(ids).size, ids.length);
    assert.ok(ids.length >= 4);
  });
});

describe("modelport types", () => {
  const tsc = join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc");
  const clientEntry = join(REPO_ROOT, "dist", "client", "index.js");

  /** Runs tsc --noEmit on `files` in `folder` with a strict temporary tsconfig. */
  function compile(folder: string, files: string[]): { status: number | null; output: string } {
    writeFileSync(join(folder, "package.json"), JSON.stringify({ type: "module" }));
    writeFileSync(
      join(folder, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: [],
          lib: ["ES2022", "DOM"],
        },
        files,
      }),
    );
    const run = spawnSync(process.execPath, [tsc, "-p", folder], { encoding: "utf8" });
    return { status: run.status, output: `${run.stdout}${run.stderr}` };
  }

  it("writes a file that tsc accepts with a usage file, and refuses a wrong input name or model", async () => {
    const folder = mkdtempSync(join(tmpdir(), "modelport-types-"));
    const gen = await cli(["types", srv.url]);
    assert.equal(gen.status, 0, gen.stderr);
    writeFileSync(join(folder, "models.ts"), gen.stdout);
    assert.match(gen.stdout, /export interface Models/);
    assert.match(gen.stdout, /export type LanguageModel = "tiny-llama";/);
    const header = [
      `import { createClient } from ${JSON.stringify(clientEntry)};`,
      'import type { Models } from "./models.js";',
      'const client = createClient<Models>({ baseUrl: "http://127.0.0.1:8080" });',
    ];
    writeFileSync(
      join(folder, "good.ts"),
      [
        ...header,
        "export async function use() {",
        `  const r = await client.model("tree").predict({ rows: ${JSON.stringify(ROWS)} });`,
        "  const label: number[] = r.outputs.label;",
        "  const probabilities: number[][] = r.outputs.probabilities;",
        '  await client.predict("tree", { inputs: { features: { data: [1, 2, 3, 4, 5, 6], shape: [1, 6] } } });',
        '  await client.predict("multi", { inputs: { a: [[1, 2, 3]], b: [[1, 2, 3]], ids: [1], mask: [true], pixels: [[1, 2, 3, 4]], scale: 2.5 } });',
        '  const t = await client.model("tree").predictTensors({ features: { data: new Float32Array(6), shape: [1, 6] } });',
        "  const ids: BigInt64Array = t.outputs.label.data;",
        '  await client.jobs.submit("tree", { rows: [[1, 2, 3, 4, 5, 6]] });',
        "  return [label, probabilities, ids];",
        "}",
      ].join("\n"),
    );
    const good = compile(folder, ["models.ts", "good.ts"]);
    assert.equal(good.status, 0, good.output);
    writeFileSync(
      join(folder, "bad.ts"),
      [
        ...header,
        "export async function use() {",
        '  await client.model("tree").predict({ inputs: { feature: [[1, 2, 3, 4, 5, 6]] } });',
        '  await client.predict("tre", { rows: [[1, 2, 3, 4, 5, 6]] });',
        '  await client.model("tree").predictTensors({ features: { data: new Float64Array(6), shape: [1, 6] } });',
        "}",
      ].join("\n"),
    );
    const bad = compile(folder, ["models.ts", "bad.ts"]);
    assert.notEqual(bad.status, 0, "tsc accepted a wrong input name");
    // One error per wrong line: the input name, the model name, the typed array's type.
    for (const line of [5, 6, 7]) assert.match(bad.output, new RegExp(`bad\\.ts\\(${line},`), bad.output);
    assert.match(bad.output, /feature/);
  });

  it("--out writes the same file; an unreachable server exits 1", async () => {
    const folder = mkdtempSync(join(tmpdir(), "modelport-types-"));
    const out = join(folder, "m.ts");
    const run = await cli(["types", "--url", srv.url, "--out", out]);
    assert.equal(run.status, 0, run.stderr);
    assert.match(readFileSync(out, "utf8"), /"tree": \{/);
    const down = await cli(["types", `http://127.0.0.1:${await freePort()}`]);
    assert.equal(down.status, 1);
    assert.match(down.stderr, /cannot read .*ECONNREFUSED/);
  });
});

describe("language models through the openai SDK", () => {
  it("lists the models and completes a chat at baseURL <server>/v1", async () => {
    const openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const ids = (await openai.models.list()).data.map((m) => m.id).sort();
    assert.deepEqual(ids, ["gate", "multi", "tiny-llama", "tree"]);
    const chat = await openai.chat.completions.create({
      model: "tiny-llama",
      messages: [{ role: "user", content: "hello" }],
      max_tokens: 4,
    });
    assert.equal(chat.object, "chat.completion");
    assert.equal(chat.choices[0]?.message.role, "assistant");
    assert.ok((chat.usage?.completion_tokens ?? 0) >= 1);
  });
});
