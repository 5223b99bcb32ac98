// What the Responses API tests share (openai-responses.test.ts, openai-responses-store.test.ts): a
// listening server with API keys (team-a, team-b, team-c limited to bpe-llama, an admin key)
// serving tiny-llama and bpe-llama, requests with a key, a stream's events parsed, the tools
// offered and an Ajv check of a call's arguments (a validator that is not modelport's).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Ajv } from "ajv";
import { buildBpeLlamas } from "../../examples/build/models/bpe-llama.js";
import { writeLlamaArtifact } from "../../examples/build/models/tiny-llama.js";
import { testModels } from "../helpers/models.js";
import { CLI, type InProcessServer, startInProcess } from "../helpers/server.js";

const run = promisify(execFile);
export const ajv = new Ajv({ strict: false });
export const keys: Record<string, string> = {};
export let server: InProcessServer;

export type Json = Record<string, any>;

export async function call(
  method: string,
  path: string,
  body?: unknown,
  key = keys.a,
): Promise<{ status: number; body: Json; text: string; type: string }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: Json = {};
  try {
    parsed = JSON.parse(text) as Json;
  } catch {
    // a stream
  }
  return { status: res.status, body: parsed, text, type: res.headers.get("content-type") ?? "" };
}

export async function create(body: Json, key = keys.a): Promise<Json> {
  const res = await call("POST", "/v1/responses", body, key);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** The text of a response's message items. */
export const textOf = (r: Json) =>
  r.output
    .filter((i: Json) => i.type === "message")
    .flatMap((i: Json) => i.content.map((c: Json) => c.text))
    .join("");

/** A stream's events, each parsed: `event:` name and data. */
export async function streamEvents(body: Json, key = keys.a): Promise<{ event: string; data: Json }[]> {
  const res = await call("POST", "/v1/responses", { ...body, stream: true }, key);
  assert.equal(res.status, 200, res.text);
  assert.match(res.type, /text\/event-stream/);
  return res.text
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      const event = /^event: (.+)$/m.exec(block)?.[1];
      const data = /^data: (.+)$/m.exec(block)?.[1];
      assert.ok(event && data, `an event with data: ${block}`);
      const parsed = JSON.parse(data) as Json;
      assert.equal(parsed.type, event);
      return { event, data: parsed };
    });
}

const weather = {
  type: "object",
  properties: {
    city: { type: "string", minLength: 1, maxLength: 24 },
    unit: { enum: ["celsius", "fahrenheit"] },
    days: { type: "integer", minimum: 1, maximum: 7 },
  },
  required: ["city", "unit", "days"],
  additionalProperties: false,
};
export const tools = [
  {
    type: "function",
    name: "get_weather",
    description: "Weather for a city",
    parameters: weather,
    strict: true,
  },
  {
    type: "function",
    name: "add",
    parameters: {
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    },
  },
];
const validators = new Map(tools.map((t) => [t.name, ajv.compile(t.parameters)]));

export function assertValidCall(item: Json): void {
  assert.equal(item.type, "function_call");
  assert.match(item.id, /^fc_/);
  assert.equal(item.status, "completed");
  assert.equal(typeof item.call_id, "string");
  const validate = validators.get(item.name);
  assert.ok(validate, `a tool that was offered: ${item.name}`);
  assert.ok(validate(JSON.parse(item.arguments)), `${item.arguments}: ${ajv.errorsText(validate.errors)}`);
}

/**
 * The parts of a response that do not depend on when or under which ids it was made, nor on the
 * prefix cache (how many prompt tokens an earlier request left cached).
 */
export function comparable(r: Json): Json {
  const { id: _id, created_at: _c, completed_at: _d, usage, ...rest } = r;
  const { input_tokens_details: _cached, ...counts } = usage;
  return {
    ...rest,
    usage: counts,
    output: r.output.map((item: Json) => {
      const { id: _i, call_id: _ci, ...fields } = item;
      return fields;
    }),
  };
}

/** Starts the server (once per test file). */
export async function startServer(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "modelport-responses-"));
  const keysFile = join(dir, "keys.yaml");
  const createKey = async (name: string, ...flags: string[]) =>
    (await run(process.execPath, [CLI, "keys", "create", name, "--keys", keysFile, ...flags])).stdout.trim();
  keys.a = await createKey("team-a");
  keys.b = await createKey("team-b");
  keys.c = await createKey("team-c", "--models", "bpe-llama");
  keys.admin = await createKey("ops", "--role", "admin");
  const models = await testModels();
  for (const artifact of buildBpeLlamas()) await writeLlamaArtifact(models, artifact);
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "server:",
      `  keys: ${keysFile}`,
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "models:",
      `  - {name: tiny-llama, path: ${join(models, "tiny-llama.gguf")}, llm: {sequences: 2, contextSize: 2048}}`,
      `  - {name: bpe-llama, path: ${join(models, "bpe-llama.gguf")}, llm: {sequences: 2, contextSize: 2048}}`,
      "",
    ].join("\n"),
  );
  server = await startInProcess({ file, env: {} });
}

export async function stopServer(): Promise<void> {
  await server?.close();
}
