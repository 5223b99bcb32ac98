// The OpenAI Files and Batch APIs end to end: a real listening server with a key file, SQLite and
// the fs blob store, serving the real tiny-llama GGUF and tiny-embed, spoken to with fetch and
// FormData (as the openai SDK builds its uploads) and with the official `openai` client. Batches
// run as jobs: their outputs must equal what the synchronous routes answer for the same greedy
// bodies. Waits are for states (until()), never for a length of time.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import OpenAI, { toFile } from "openai";
import { testModels } from "../helpers/models.js";
import { CLI, type InProcessServer, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const run = promisify(execFile);
const keys: Record<string, string> = {};
let dir: string;
let config: string;
let server: InProcessServer;

async function createKey(file: string, name: string, ...flags: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [CLI, "keys", "create", name, "--keys", file, ...flags]);
  return stdout.trim();
}

interface Answer {
  status: number;
  body: any;
  text: string;
  headers: Headers;
}

async function ask(method: string, path: string, key: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, text, headers: res.headers };
}

/** POST /v1/files with a multipart body built by FormData, as the openai SDK sends it. */
async function upload(
  key: string,
  content: string,
  purpose = "batch",
  filename = "in.jsonl",
): Promise<Answer> {
  const form = new FormData();
  form.append("purpose", purpose);
  form.append("file", new Blob([content], { type: "application/jsonl" }), filename);
  const res = await fetch(`${server.url}/v1/files`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
    body: form,
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text), text, headers: res.headers };
}

const jsonl = (lines: unknown[]) => `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`;

const chatLine = (i: number) => ({
  custom_id: `chat-${i}`,
  method: "POST",
  url: "/v1/chat/completions",
  body: {
    model: "tiny-llama",
    messages: [{ role: "user", content: `count ${i}` }],
    max_tokens: 4,
    temperature: 0,
  },
});

const embedLine = (i: number) => ({
  custom_id: `embed-${i}`,
  method: "POST",
  url: "/v1/embeddings",
  body: { model: "tiny-embed", input: [`a cat ${i}`, "a dog"] },
});

function client(key: string): OpenAI {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key, maxRetries: 0 });
}

async function startServer(): Promise<InProcessServer> {
  return startInProcess({ file: config, env: {} });
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-batches-"));
  const keysFile = join(dir, "keys.yaml");
  keys.alice = await createKey(keysFile, "alice", "--models", "tiny-llama,tiny-embed");
  keys.bob = await createKey(keysFile, "bob", "--models", "tiny-llama");
  keys.admin = await createKey(keysFile, "ops", "--role", "admin");
  const models = await testModels();
  config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "server:",
      `  keys: ${keysFile}`,
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "  batches: {maxFileBytes: 65536, maxFileLines: 40, checkMs: 200, submitChunk: 5}",
      "models:",
      `  - {name: tiny-llama, backend: llama-cpp, path: ${join(models, "tiny-llama.gguf")}, llm: {sequences: 2, contextSize: 512}}`,
      `  - {name: tiny-embed, backend: transformers, path: ${join(models, "tiny-embed")}}`,
      "",
    ].join("\n"),
  );
  server = await startServer();
});

after(() => server.close());

describe("POST /v1/files and the file routes", () => {
  it("stores a batch file sent as multipart/form-data and answers OpenAI's FileObject", async () => {
    const content = jsonl([chatLine(0), chatLine(1)]);
    const res = await upload(keys.alice!, content, "batch", "requests.jsonl");
    assert.equal(res.status, 200, res.text);
    assert.match(res.body.id, /^file-/);
    assert.equal(res.body.object, "file");
    assert.equal(res.body.bytes, Buffer.byteLength(content));
    assert.equal(res.body.filename, "requests.jsonl");
    assert.equal(res.body.purpose, "batch");
    assert.equal(typeof res.body.created_at, "number");
    const one = await ask("GET", `/v1/files/${res.body.id}`, keys.alice!);
    assert.deepEqual(one.body, res.body);
    const back = await ask("GET", `/v1/files/${res.body.id}/content`, keys.alice!);
    assert.equal(back.status, 200);
    assert.equal(back.text, content);
  });

  it("works with the openai SDK: files.create, retrieve, list, content, delete", async () => {
    const openai = client(keys.alice!);
    const content = jsonl([chatLine(7)]);
    const created = await openai.files.create({
      file: await toFile(Buffer.from(content), "sdk.jsonl"),
      purpose: "batch",
    });
    assert.equal(created.purpose, "batch");
    assert.equal((await openai.files.retrieve(created.id)).filename, "sdk.jsonl");
    const listed = await openai.files.list();
    assert.ok(listed.data.some((f) => f.id === created.id));
    assert.equal(await (await openai.files.content(created.id)).text(), content);
    const deleted = await openai.files.delete(created.id);
    assert.deepEqual(deleted, { id: created.id, object: "file", deleted: true });
    const gone = await ask("GET", `/v1/files/${created.id}`, keys.alice!);
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, "MP_ERR_FILE_NOT_FOUND");
  });

  it("refuses another purpose, naming it", async () => {
    const res = await upload(keys.alice!, jsonl([chatLine(0)]), "fine-tune");
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, "MP_ERR_REQUEST_INVALID");
    assert.equal(res.body.error.param, "purpose");
  });

  it("refuses a bad line at upload, naming the line", async () => {
    const cases: [string, RegExp][] = [
      [`${JSON.stringify(chatLine(0))}\nnot json\n`, /line 2: not valid JSON/],
      [jsonl([chatLine(0), { ...chatLine(1), method: "GET" }]), /line 2: "method"/],
      [jsonl([{ ...chatLine(0), url: "/v1/images" }]), /line 1: "url" must be one of/],
      [jsonl([chatLine(0), chatLine(0)]), /line 2: "custom_id" "chat-0" repeats/],
      [jsonl([{ ...chatLine(0), body: "text" }]), /line 1: "body" must be a JSON object/],
      [jsonl([{ method: "POST", url: "/v1/completions", body: {} }]), /line 1: "custom_id"/],
      ["\n\n", /holds no request/],
    ];
    for (const [content, message] of cases) {
      const res = await upload(keys.alice!, content);
      assert.equal(res.status, 400, content);
      assert.equal(res.body.error.code, "MP_ERR_FILE_INVALID");
      assert.match(res.body.error.message, message);
    }
  });

  it("refuses a file over the limits: 413 for bytes, 400 for lines", async () => {
    const big = await upload(keys.alice!, "x".repeat(65_537));
    assert.equal(big.status, 413, big.text);
    assert.equal(big.body.error.code, "MP_ERR_FILE_TOO_LARGE");
    const many = await upload(keys.alice!, jsonl(Array.from({ length: 41 }, (_, i) => chatLine(i))));
    assert.equal(many.status, 400);
    assert.equal(many.body.error.code, "MP_ERR_FILE_INVALID");
    assert.match(many.body.error.message, /more than 40 requests \(jobs\.batches\.maxFileLines\)/);
  });

  it("refuses a body that is no multipart form", async () => {
    const res = await fetch(`${server.url}/v1/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${keys.alice}`, "content-type": "multipart/form-data; boundary=abc" },
      body: '--abc\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n',
    });
    const body = (await res.json()) as any;
    assert.equal(res.status, 400);
    assert.equal(body.error.code, "MP_ERR_REQUEST_INVALID");
    const noFile = new FormData();
    noFile.append("purpose", "batch");
    const res2 = await fetch(`${server.url}/v1/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${keys.alice}` },
      body: noFile,
    });
    assert.equal(res2.status, 400);
    assert.equal(((await res2.json()) as any).error.param, "file");
  });

  it("lists newest first with after and limit", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await upload(keys.bob!, jsonl([chatLine(i)]))).body.id);
    const page = await ask("GET", "/v1/files?limit=2", keys.bob!);
    assert.equal(page.body.object, "list");
    assert.deepEqual(
      page.body.data.map((f: any) => f.id),
      [ids[2], ids[1]],
    );
    assert.equal(page.body.has_more, true);
    const rest = await ask("GET", `/v1/files?limit=2&after=${ids[1]}`, keys.bob!);
    assert.deepEqual(
      rest.body.data.map((f: any) => f.id),
      [ids[0]],
    );
    assert.equal(rest.body.has_more, false);
    const bad = await ask("GET", "/v1/files?limit=0", keys.bob!);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, "limit");
  });

  it("shows a key only its own files: another key's id is the same 404 as an unknown one", async () => {
    const mine = (await upload(keys.alice!, jsonl([chatLine(3)]))).body.id as string;
    const unknown = await ask("GET", "/v1/files/file-0000", keys.bob!);
    for (const path of [`/v1/files/${mine}`, `/v1/files/${mine}/content`]) {
      const res = await ask("GET", path, keys.bob!);
      assert.equal(res.status, 404);
      assert.deepEqual(res.body.error, { ...unknown.body.error, message: res.body.error.message });
      assert.equal(res.body.error.message, `no file '${mine}'`);
    }
    const del = await ask("DELETE", `/v1/files/${mine}`, keys.bob!);
    assert.equal(del.status, 404);
    const listed = await ask("GET", "/v1/files", keys.bob!);
    assert.ok(!listed.body.data.some((f: any) => f.id === mine));
    // The admin key sees every key's files.
    assert.equal((await ask("GET", `/v1/files/${mine}`, keys.admin!)).status, 200);
    assert.equal((await ask("GET", `/v1/files/${mine}`, keys.alice!)).status, 200);
  });
});
