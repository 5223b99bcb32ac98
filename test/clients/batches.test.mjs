// The official `openai` SDK on modelport's Files and Batch APIs, unmodified: `files.create` with
// a JSONL of chat completion requests on two GGUFs with different tokenizers (tiny-llama and
// bpe-llama, one with a json_schema response format), `batches.create`, `retrieve` until it
// ends, `list`, `files.content` of the output file (one line per request, each the answer the
// same request gets from /v1/chat/completions; a line the route refuses in the error file), and
// `batches.cancel`. Each case is skipped, with the reason, only while the server answers 404
// MP_ERR_ROUTE_NOT_FOUND for the route.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI, { toFile } from "openai";
import { CHAT_MODELS, startModelport } from "./server.mjs";

const TERMINAL = ["completed", "failed", "expired", "cancelled"];
const point = {
  type: "object",
  properties: {
    x: { type: "integer", minimum: 0, maximum: 9 },
    y: { type: "integer", minimum: 0, maximum: 9 },
  },
  required: ["x", "y"],
  additionalProperties: false,
};

/** A JSONL file of chat completion requests, as OpenAI's batch input takes it. */
function jsonl(lines) {
  return toFile(Buffer.from(lines.map((l) => `${JSON.stringify(l)}\n`).join("")), "batch.jsonl", {
    type: "application/jsonl",
  });
}

describe("the openai SDK on the Files and Batch APIs", () => {
  let server;
  /** @type {OpenAI} */
  let client;

  before(async () => {
    server = await startModelport("batches");
    client = new OpenAI({ baseURL: server.baseURL, apiKey: "unused", maxRetries: 0 });
  });

  after(async () => {
    await server?.stop();
  });

  /** Retrieves the batch until it reaches a final state (polled by count, never timed). */
  async function settle(id) {
    for (let i = 0; i < 3000; i++) {
      const batch = await client.batches.retrieve(id);
      if (TERMINAL.includes(batch.status)) return batch;
      await sleep(100);
    }
    assert.fail(`batch ${id} did not end after 3000 polls`);
  }

  it("files.create, batches.create, retrieve, list and the output file: one answer per request, as the route gives it", async () => {
    const requests = CHAT_MODELS.flatMap((model) => [
      { model, messages: [{ role: "user", content: "hello" }], max_tokens: 8 },
      {
        model,
        messages: [{ role: "user", content: "A point." }],
        max_tokens: 100,
        response_format: { type: "json_schema", json_schema: { name: "point", schema: point, strict: true } },
      },
    ]);
    const lines = requests.map((body, i) => ({
      custom_id: `req-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body,
    }));
    // A line the route would refuse: it goes to the error file, the others still run.
    const bad = {
      custom_id: "bad",
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: CHAT_MODELS[0], messages: [{ role: "user", content: "hello" }], max_tokens: -1 },
    };
    const file = await client.files.create({ file: await jsonl([...lines, bad]), purpose: "batch" });
    assert.match(file.id, /\S/);
    assert.equal(file.purpose, "batch");
    assert.ok(file.bytes > 0);

    const created = await client.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { suite: "clients" },
    });
    assert.equal(created.object, "batch");
    assert.equal(created.input_file_id, file.id);
    assert.equal(created.endpoint, "/v1/chat/completions");
    assert.deepEqual(created.metadata, { suite: "clients" });

    const listed = [];
    for await (const b of client.batches.list({ limit: 100 })) listed.push(b.id);
    assert.ok(listed.includes(created.id), listed.join(", "));

    const done = await settle(created.id);
    assert.equal(done.status, "completed", JSON.stringify(done));
    assert.deepEqual(done.request_counts, { total: lines.length + 1, completed: lines.length, failed: 1 });
    assert.ok(done.output_file_id);
    const errors = (await (await client.files.content(done.error_file_id)).text())
      .split("\n")
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l));
    assert.equal(errors.length, 1, JSON.stringify(errors));
    assert.equal(errors[0].custom_id, "bad");
    assert.equal(errors[0].response, null);
    assert.equal(errors[0].error.code, "MP_ERR_REQUEST_INVALID", JSON.stringify(errors[0]));

    const text = await (await client.files.content(done.output_file_id)).text();
    const results = text
      .split("\n")
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l));
    assert.deepEqual(results.map((r) => r.custom_id).sort(), lines.map((l) => l.custom_id).sort());
    for (const result of results) {
      const { body } = lines.find((l) => l.custom_id === result.custom_id);
      assert.equal(result.response.status_code, 200, JSON.stringify(result));
      const answer = result.response.body;
      assert.equal(answer.object, "chat.completion");
      assert.equal(answer.model, body.model);
      // Greedy: the same answer the route gives the same request now.
      const direct = await client.chat.completions.create(body);
      assert.equal(answer.choices[0].message.content, direct.choices[0].message.content);
      assert.equal(answer.choices[0].finish_reason, direct.choices[0].finish_reason);
      if (body.response_format && answer.choices[0].finish_reason === "stop") {
        const value = JSON.parse(answer.choices[0].message.content);
        assert.ok(Number.isInteger(value.x) && value.x >= 0 && value.x <= 9, JSON.stringify(value));
        assert.ok(Number.isInteger(value.y) && value.y >= 0 && value.y <= 9, JSON.stringify(value));
      }
    }
  });

  it("batches.cancel: the batch ends cancelled, or the server says it had already ended", async (t) => {
    // Enough work that the cancel nearly always arrives first.
    const lines = Array.from({ length: 100 }, (_, i) => ({
      custom_id: `c-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: {
        model: CHAT_MODELS[i % 2],
        messages: [{ role: "user", content: `hello ${i}` }],
        max_tokens: 100,
      },
    }));
    const file = await client.files.create({ file: await jsonl(lines), purpose: "batch" });
    const batch = await client.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
    });
    try {
      const cancelled = await client.batches.cancel(batch.id);
      assert.ok(["cancelling", "cancelled"].includes(cancelled.status), cancelled.status);
      const done = await settle(batch.id);
      assert.equal(done.status, "cancelled");
      t.diagnostic(`cancelled after ${done.request_counts.completed} of ${lines.length} requests`);
    } catch (err) {
      // It finished before the cancel came: a coded 4xx, and the batch is completed.
      assert.ok(err instanceof OpenAI.APIError, String(err));
      assert.ok(err.status >= 400 && err.status < 500, err.message);
      assert.match(err.code, /^MP_ERR_/);
      assert.equal((await client.batches.retrieve(batch.id)).status, "completed");
      t.diagnostic("the batch completed before the cancel arrived");
    }
  });
});
