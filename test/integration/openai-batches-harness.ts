// Shared by the OpenAI Files and Batch API tests (openai-files, openai-batches): a real listening
// server with a key file (alice: tiny-llama, tiny-embed, stuck-llama; bob: tiny-llama; ops: admin),
// SQLite and the fs blob store, serving the real tiny-llama GGUF and tiny-embed, and the helpers
// that upload files as the openai SDK does (FormData), build JSONL lines and follow batches.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import OpenAI from "openai";
import { testModels } from "../helpers/models.js";
import { CLI, type InProcessServer, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const run = promisify(execFile);

/** What setUp made: the keys by name, the temp folder, the config file and the running server. */
export const state = {
  keys: {} as Record<"alice" | "bob" | "admin", string>,
  dir: "",
  config: "",
  server: undefined as unknown as InProcessServer,
};

async function createKey(file: string, name: string, ...flags: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [CLI, "keys", "create", name, "--keys", file, ...flags]);
  return stdout.trim();
}

export interface Answer {
  status: number;
  body: any;
  text: string;
  headers: Headers;
}

export async function ask(method: string, path: string, key: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${state.server.url}${path}`, {
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
export async function upload(
  key: string,
  content: string,
  purpose = "batch",
  filename = "in.jsonl",
): Promise<Answer> {
  const form = new FormData();
  form.append("purpose", purpose);
  form.append("file", new Blob([content], { type: "application/jsonl" }), filename);
  const res = await fetch(`${state.server.url}/v1/files`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
    body: form,
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text), text, headers: res.headers };
}

export const jsonl = (lines: unknown[]) => `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`;

export const chatLine = (i: number) => ({
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

export const embedLine = (i: number) => ({
  custom_id: `embed-${i}`,
  method: "POST",
  url: "/v1/embeddings",
  body: { model: "tiny-embed", input: [`a cat ${i}`, "a dog"] },
});

export function client(key: string): OpenAI {
  return new OpenAI({ baseURL: `${state.server.url}/v1`, apiKey: key, maxRetries: 0 });
}

export async function startServer(): Promise<InProcessServer> {
  return startInProcess({ file: state.config, env: {} });
}

/** Polls the batch (with the openai SDK) until it is in a final status. */
export async function finished(openai: OpenAI, id: string): Promise<OpenAI.Batches.Batch> {
  let batch = await openai.batches.retrieve(id);
  await until(
    `batch ${id} to end`,
    async () => {
      batch = await openai.batches.retrieve(id);
      return ["completed", "failed", "expired", "cancelled"].includes(batch.status);
    },
    120_000,
  );
  return batch;
}

export async function fileLines(openai: OpenAI, id: string | null | undefined): Promise<any[]> {
  assert.ok(id, "a file id");
  const text = await (await openai.files.content(id)).text();
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l));
}

/** The jobs a batch made, seen through the jobs API with the admin key. */
export async function batchJobs(batchId: string): Promise<any[]> {
  const res = await ask("GET", "/v1/jobs?limit=1000", state.keys.admin!);
  assert.equal(res.status, 200, res.text);
  return res.body.jobs.filter((j: any) => j.metadata?.batch_id === batchId);
}

export async function createBatch(key: string, lines: unknown[], endpoint: string): Promise<Answer> {
  const file = await upload(key, jsonl(lines));
  assert.equal(file.status, 200, file.text);
  return ask("POST", "/v1/batches", key, { input_file_id: file.body.id, endpoint, completion_window: "24h" });
}

/** Makes the keys, the config and the temp folder, and starts the server. */
export async function setUp(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "modelport-batches-"));
  const keysFile = join(dir, "keys.yaml");
  state.keys.alice = await createKey(keysFile, "alice", "--models", "tiny-llama,tiny-embed,stuck-llama");
  state.keys.bob = await createKey(keysFile, "bob", "--models", "tiny-llama");
  state.keys.admin = await createKey(keysFile, "ops", "--role", "admin");
  const models = await testModels();
  const config = join(dir, "modelport.yaml");
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
      // Never ready (its checksum does not match): its jobs stay queued until canceled.
      `  - {name: stuck-llama, backend: llama-cpp, path: ${join(models, "tiny-llama.gguf")}, sha256: "${"0".repeat(64)}"}`,
      "",
    ].join("\n"),
  );
  state.dir = dir;
  state.config = config;
  state.server = await startServer();
}
