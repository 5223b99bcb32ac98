// OpenAI's Responses API end to end: a real listening server with API keys, serving the test
// GGUFs tiny-llama (SentencePiece) and bpe-llama (byte-level BPE) through llama.cpp. Text and item
// input, instructions, forced function calls whose arguments validate against the tool's schema
// (checked with Ajv, not ours), a function_call_output turn, strict json_schema answers, the
// max_output_tokens cut, streaming (every event read: sequence numbers, deltas, the completed
// response equal to the non-streamed one), stored responses (GET, DELETE, input_items,
// previous_response_id, store: false), tenants (another key's response is the 404 of an unknown
// one; a key scoped to another model gets the no-model 404) and the refusals, by name.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { Ajv } from "ajv";
import { buildBpeLlamas } from "../../examples/build/models/bpe-llama.js";
import { writeLlamaArtifact } from "../../examples/build/models/tiny-llama.js";
import { testModels } from "../helpers/models.js";
import { CLI, type InProcessServer, startInProcess } from "../helpers/server.js";

const run = promisify(execFile);
const ajv = new Ajv({ strict: false });
const keys: Record<string, string> = {};
let server: InProcessServer;

type Json = Record<string, any>;

async function call(
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

async function create(body: Json, key = keys.a): Promise<Json> {
  const res = await call("POST", "/v1/responses", body, key);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** The text of a response's message items. */
const textOf = (r: Json) =>
  r.output
    .filter((i: Json) => i.type === "message")
    .flatMap((i: Json) => i.content.map((c: Json) => c.text))
    .join("");

/** A stream's events, each parsed: `event:` name and data. */
async function streamEvents(body: Json, key = keys.a): Promise<{ event: string; data: Json }[]> {
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
const tools = [
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

function assertValidCall(item: Json): void {
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
function comparable(r: Json): Json {
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

before(async () => {
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
});

after(async () => {
  await server?.close();
});

describe("POST /v1/responses", () => {
  it("answers a text input in OpenAI's response shape, with the greedy text chat gives", async () => {
    const r = await create({ model: "tiny-llama", input: "Hello there", max_output_tokens: 12 });
    assert.match(r.id, /^resp_[0-9a-f]{32}$/);
    assert.equal(r.object, "response");
    assert.equal(typeof r.created_at, "number");
    // tiny-llama writes word salad: 12 tokens may cut it.
    assert.ok(r.status === "completed" || r.status === "incomplete", r.status);
    assert.equal(r.error, null);
    assert.deepEqual(
      r.incomplete_details,
      r.status === "incomplete" ? { reason: "max_output_tokens" } : null,
    );
    assert.equal(r.model, "tiny-llama");
    assert.equal(r.max_output_tokens, 12);
    assert.equal(r.store, true);
    assert.equal(r.previous_response_id, null);
    assert.deepEqual(r.tools, []);
    assert.equal(r.tool_choice, "auto");
    assert.equal(r.parallel_tool_calls, true);
    assert.deepEqual(r.text.format, { type: "text" });
    assert.deepEqual(r.metadata, {});
    assert.equal(r.output.length, 1);
    const [msg] = r.output;
    assert.equal(msg.type, "message");
    assert.match(msg.id, /^msg_/);
    assert.equal(msg.role, "assistant");
    assert.equal(msg.status, r.status);
    assert.equal(msg.content.length, 1);
    assert.equal(msg.content[0].type, "output_text");
    assert.deepEqual(msg.content[0].annotations, []);
    const u = r.usage;
    assert.ok(u.input_tokens > 0 && u.output_tokens > 0);
    assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
    assert.equal(typeof u.input_tokens_details.cached_tokens, "number");
    assert.deepEqual(u.output_tokens_details, { reasoning_tokens: 0 });

    const chat = await call("POST", "/v1/chat/completions", {
      model: "tiny-llama",
      messages: [{ role: "user", content: "Hello there" }],
      max_tokens: 12,
    });
    assert.equal(chat.status, 200, chat.text);
    assert.equal(textOf(r), chat.body.choices[0].message.content);
  });

  it("takes items (string and part contents) and instructions as chat takes system and user messages", async () => {
    const r = await create({
      model: "bpe-llama",
      instructions: "Answer briefly.",
      input: [
        { role: "user", content: [{ type: "input_text", text: "Hi" }] },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Hello" }] },
        { role: "user", content: "How are you" },
      ],
      max_output_tokens: 10,
    });
    assert.equal(r.instructions, "Answer briefly.");
    const chat = await call("POST", "/v1/chat/completions", {
      model: "bpe-llama",
      messages: [
        { role: "system", content: "Answer briefly." },
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello" },
        { role: "user", content: "How are you" },
      ],
      max_tokens: 10,
    });
    assert.equal(textOf(r), chat.body.choices[0].message.content);
    assert.equal(r.usage.input_tokens, chat.body.usage.prompt_tokens);
  });

  it("forces a function call (required, and by name) whose arguments validate, then takes its output", async () => {
    for (const model of ["tiny-llama", "bpe-llama"]) {
      const required = await create({ model, input: "Weather in Paris?", tools, tool_choice: "required" });
      assert.ok(required.output.length >= 1);
      for (const item of required.output) assertValidCall(item);
      const byName = await create({
        model,
        input: "Weather in Paris?",
        tools,
        tool_choice: { type: "function", name: "get_weather" },
      });
      assert.deepEqual(byName.tool_choice, { type: "function", name: "get_weather" });
      assert.equal(byName.tools[0].name, "get_weather");
      assert.equal(byName.tools[0].strict, true);
      const calls = byName.output.filter((i: Json) => i.type === "function_call");
      assert.ok(calls.length >= 1, JSON.stringify(byName.output));
      for (const item of calls) {
        assertValidCall(item);
        assert.equal(item.name, "get_weather");
      }
      // The next turn: the call and its output as items; the answer is text.
      const call0 = calls[0];
      const next = await create({
        model,
        input: [
          { role: "user", content: "Weather in Paris?" },
          { type: "function_call", call_id: call0.call_id, name: call0.name, arguments: call0.arguments },
          { type: "function_call_output", call_id: call0.call_id, output: '{"temp": 21}' },
        ],
        tools,
        tool_choice: "none",
        max_output_tokens: 8,
      });
      assert.equal(next.output[0].type, "message");
      // The same turn as chat messages: the same prompt, the same greedy answer.
      const chat = await call("POST", "/v1/chat/completions", {
        model,
        messages: [
          { role: "user", content: "Weather in Paris?" },
          {
            role: "assistant",
            content: "",
            tool_calls: [
              {
                id: call0.call_id,
                type: "function",
                function: { name: call0.name, arguments: call0.arguments },
              },
            ],
          },
          { role: "tool", tool_call_id: call0.call_id, content: '{"temp": 21}' },
        ],
        tools: tools.map(({ type, strict: _s, ...f }) => ({ type, function: f })),
        tool_choice: "none",
        max_tokens: 8,
      });
      assert.equal(chat.status, 200, chat.text);
      assert.equal(next.usage.input_tokens, chat.body.usage.prompt_tokens);
      assert.equal(textOf(next), chat.body.choices[0].message.content);
    }
  });

  it("text.format json_schema strict: the text parses and validates against the whole schema (minimum, maximum, enum)", async () => {
    const schema = {
      type: "object",
      properties: {
        age: { type: "integer", minimum: 18, maximum: 99 },
        score: { type: "number", minimum: -5, maximum: 5 },
        level: { enum: ["low", "mid", "high"] },
      },
      required: ["age", "score", "level"],
      additionalProperties: false,
    };
    const validate = ajv.compile(schema);
    for (const model of ["tiny-llama", "bpe-llama"])
      for (const sampling of [{}, { temperature: 1, seed: 7 }]) {
        const r = await create({
          model,
          input: "Fill in the form.",
          text: { format: { type: "json_schema", name: "form", schema, strict: true } },
          max_output_tokens: 300,
          ...sampling,
        });
        assert.equal(r.status, "completed", JSON.stringify(r));
        assert.deepEqual(r.text.format, { type: "json_schema", name: "form", schema, strict: true });
        const answer = JSON.parse(textOf(r));
        assert.ok(validate(answer), `${textOf(r)}: ${ajv.errorsText(validate.errors)}`);
      }
    const obj = await create({
      model: "tiny-llama",
      input: "JSON please",
      text: { format: { type: "json_object" } },
      max_output_tokens: 200,
    });
    if (obj.status === "completed") assert.equal(typeof JSON.parse(textOf(obj)), "object");
  });

  it("max_output_tokens cuts the answer: status incomplete, reason max_output_tokens", async () => {
    const r = await create({ model: "tiny-llama", input: "Tell me a long story", max_output_tokens: 2 });
    assert.equal(r.status, "incomplete");
    assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
    assert.equal(r.output[0].status, "incomplete");
    assert.equal(r.usage.output_tokens, 2);
  });
});

describe("the OpenAPI document", () => {
  it("describes POST /v1/responses with the body schema that validates it, and the stored-response routes", async () => {
    const doc = (await call("GET", "/openapi.json", undefined, keys.admin)).body;
    const post = doc.paths["/v1/responses"].post;
    const schema = post.requestBody.content["application/json"].schema;
    assert.deepEqual([...schema.properties.model.enum].sort(), ["bpe-llama", "tiny-llama"]);
    assert.deepEqual(schema.required, ["model"]);
    for (const field of [
      "input",
      "instructions",
      "tools",
      "tool_choice",
      "text",
      "store",
      "previous_response_id",
    ])
      assert.ok(schema.properties[field], field);
    assert.ok(doc.paths["/v1/responses/{id}"].get && doc.paths["/v1/responses/{id}"].delete);
    assert.ok(doc.paths["/v1/responses/{id}/input_items"].get);
  });
});

describe("streaming", () => {
  /** Checks the sequence numbers and the events' order; returns the final response. */
  function checkStream(events: { event: string; data: Json }[]): Json {
    events.forEach((e, i) => {
      assert.equal(e.data.sequence_number, i, `event ${i} (${e.event})`);
    });
    assert.equal(events[0]!.event, "response.created");
    assert.equal(events[0]!.data.response.status, "in_progress");
    assert.equal(events[1]!.event, "response.in_progress");
    const last = events[events.length - 1]!;
    assert.match(last.event, /^response\.(completed|incomplete)$/);
    assert.equal(events[0]!.data.response.id, last.data.response.id);
    return last.data.response;
  }

  it("sends every event in order; the deltas make the text; the completed response is the non-streamed one", async () => {
    const body = { model: "tiny-llama", input: "Once upon a time", max_output_tokens: 16, store: false };
    const events = await streamEvents(body);
    const response = checkStream(events);
    const names = events.map((e) => e.event);
    const deltas = events.filter((e) => e.event === "response.output_text.delta");
    assert.ok(deltas.length > 1, `streamed in ${deltas.length} delta(s)`);
    assert.deepEqual(names.slice(0, 4), [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    assert.deepEqual(names.slice(-4), [
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      response.status === "incomplete" ? "response.incomplete" : "response.completed",
    ]);
    const itemId = response.output[0].id;
    for (const d of deltas) {
      assert.equal(d.data.item_id, itemId);
      assert.equal(d.data.output_index, 0);
      assert.equal(d.data.content_index, 0);
    }
    const text = deltas.map((d) => d.data.delta).join("");
    assert.equal(text, textOf(response));
    assert.equal(events.find((e) => e.event === "response.output_text.done")!.data.text, text);
    const plain = await create({ ...body, stream: false });
    assert.deepEqual(comparable(response), comparable(plain));
  });

  it("streams a function call as its item, argument events and the completed response", async () => {
    const body = { model: "bpe-llama", input: "Weather?", tools, tool_choice: "required", store: false };
    const events = await streamEvents(body);
    const response = checkStream(events);
    const calls = response.output.filter((i: Json) => i.type === "function_call");
    assert.ok(calls.length >= 1);
    for (const item of calls) assertValidCall(item);
    const done = events.filter((e) => e.event === "response.function_call_arguments.done");
    assert.deepEqual(
      done.map((e) => e.data.arguments),
      calls.map((c: Json) => c.arguments),
    );
    const added = events.filter((e) => e.event === "response.output_item.added");
    assert.equal(added[0]!.data.item.type, "function_call");
    const deltas = events.filter((e) => e.event === "response.function_call_arguments.delta");
    assert.equal(deltas.map((e) => e.data.delta).join(""), calls.map((c: Json) => c.arguments).join(""));
    const plain = await create({ ...body, stream: false });
    assert.deepEqual(comparable(response), comparable(plain));
  });

  it("a stream refused before its first byte is a plain HTTP error", async () => {
    const res = await call("POST", "/v1/responses", {
      model: "tiny-llama",
      input: "x",
      stream: true,
      previous_response_id: "resp_00000000000000000000000000000000",
    });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, "MP_ERR_RESPONSE_NOT_FOUND");
  });
});

describe("stored responses", () => {
  it("GET returns a stored response, input_items its input, DELETE removes it; store: false keeps none", async () => {
    const r = await create({
      model: "tiny-llama",
      input: "Remember me",
      max_output_tokens: 6,
      metadata: { topic: "t1" },
    });
    const got = await call("GET", `/v1/responses/${r.id}`);
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.body, r);
    const items = await call("GET", `/v1/responses/${r.id}/input_items`);
    assert.equal(items.status, 200, items.text);
    assert.equal(items.body.object, "list");
    assert.equal(items.body.data.length, 1);
    assert.equal(items.body.data[0].content[0].text, "Remember me");
    assert.equal(items.body.has_more, false);
    // Visible as a succeeded job of the model, owned by its key (docs/LLM.md).
    const job = await call("GET", `/v1/jobs/${r.id}`);
    assert.equal(job.status, 200, job.text);
    assert.equal(job.body.status, "succeeded");
    const deleted = await call("DELETE", `/v1/responses/${r.id}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.deepEqual(deleted.body, { id: r.id, object: "response", deleted: true });
    const gone = await call("GET", `/v1/responses/${r.id}`);
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, "MP_ERR_RESPONSE_NOT_FOUND");
    assert.equal((await call("DELETE", `/v1/responses/${r.id}`)).status, 404);

    const unstored = await create({
      model: "tiny-llama",
      input: "Forget me",
      max_output_tokens: 4,
      store: false,
    });
    assert.equal(unstored.store, false);
    assert.equal((await call("GET", `/v1/responses/${unstored.id}`)).status, 404);
    const cont = await call("POST", "/v1/responses", {
      model: "tiny-llama",
      input: "and then?",
      previous_response_id: unstored.id,
    });
    assert.equal(cont.status, 404);
    assert.equal(cont.body.error.param, "previous_response_id");
  });

  it("previous_response_id continues the conversation: its input and output come first", async () => {
    const first = await create({ model: "tiny-llama", input: "My name is Ada", max_output_tokens: 6 });
    const second = await create({
      model: "tiny-llama",
      input: "What is my name?",
      previous_response_id: first.id,
      max_output_tokens: 6,
    });
    assert.equal(second.previous_response_id, first.id);
    const chat = await call("POST", "/v1/chat/completions", {
      model: "tiny-llama",
      messages: [
        { role: "user", content: "My name is Ada" },
        { role: "assistant", content: textOf(first) },
        { role: "user", content: "What is my name?" },
      ],
      max_tokens: 6,
    });
    assert.equal(textOf(second), chat.body.choices[0].message.content);
    assert.equal(second.usage.input_tokens, chat.body.usage.prompt_tokens);
    // A third turn carries both before it.
    const items = await call("GET", `/v1/responses/${second.id}/input_items?order=asc`);
    assert.deepEqual(
      items.body.data.map((i: Json) => i.content[0].text),
      ["My name is Ada", textOf(first), "What is my name?"],
    );
    for (const i of items.body.data) assert.match(i.id, /^msg_/);
    const page = await call("GET", `/v1/responses/${second.id}/input_items?limit=1`);
    assert.equal(page.body.data[0].content[0].text, "What is my name?");
    assert.equal(page.body.has_more, true);
  });
});

describe("tenants", () => {
  it("another key's response is the 404 of an unknown id: GET, DELETE, input_items and continuing", async () => {
    const mine = await create({ model: "tiny-llama", input: "secret", max_output_tokens: 4 });
    const unknown = "resp_0123456789abcdef0123456789abcdef";
    const strip = (text: string, id: string) => text.replaceAll(id, "ID");
    for (const [method, suffix] of [
      ["GET", ""],
      ["DELETE", ""],
      ["GET", "/input_items"],
    ] as const) {
      const foreign = await call(method, `/v1/responses/${mine.id}${suffix}`, undefined, keys.b);
      const none = await call(method, `/v1/responses/${unknown}${suffix}`, undefined, keys.b);
      assert.equal(foreign.status, 404);
      assert.equal(strip(foreign.text, mine.id), strip(none.text, unknown));
    }
    const cont = (id: string) =>
      call(
        "POST",
        "/v1/responses",
        { model: "tiny-llama", input: "tell me", previous_response_id: id },
        keys.b,
      );
    const foreign = await cont(mine.id);
    const none = await cont(unknown);
    assert.equal(foreign.status, 404);
    assert.equal(strip(foreign.text, mine.id), strip(none.text, unknown));
    // Still there for its owner, and for an admin key.
    assert.equal((await call("GET", `/v1/responses/${mine.id}`)).status, 200);
    assert.equal((await call("GET", `/v1/responses/${mine.id}`, undefined, keys.admin)).status, 200);
  });

  it("a key scoped to another model gets the no-model 404, as for a name no model has", async () => {
    const body = (model: string) => ({ model, input: "hi", max_output_tokens: 2 });
    const scoped = await call("POST", "/v1/responses", body("tiny-llama"), keys.c);
    const none = await call("POST", "/v1/responses", body("no-such-model"), keys.c);
    assert.equal(scoped.status, 404);
    assert.equal(scoped.body.error.code, "MP_ERR_MODEL_NOT_FOUND");
    assert.equal(scoped.text.replace("tiny-llama", "M"), none.text.replace("no-such-model", "M"));
    const allowed = await call("POST", "/v1/responses", body("bpe-llama"), keys.c);
    assert.equal(allowed.status, 200, allowed.text);
    // A request without a key is refused.
    const res = await fetch(`${server.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body("tiny-llama")),
    });
    assert.equal(res.status, 401);
  });
});

describe("refusals, by name", () => {
  const cases: [string, Json, number, string, string | null][] = [
    ["a built-in tool", { tools: [{ type: "web_search" }] }, 400, "MP_ERR_REQUEST_INVALID", "tools[0].type"],
    [
      "an image part",
      { input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] },
      400,
      "MP_ERR_REQUEST_INVALID",
      "input[0].content[0].type",
    ],
    [
      "an unknown item type",
      { input: [{ type: "reasoning", summary: [] }] },
      400,
      "MP_ERR_REQUEST_INVALID",
      "input[0].type",
    ],
    [
      "a function_call item without call_id",
      { input: [{ type: "function_call", name: "add", arguments: "{}" }] },
      400,
      "MP_ERR_REQUEST_INVALID",
      "input[0].call_id",
    ],
    [
      "a message with a bad role",
      { input: [{ role: "robot", content: "x" }] },
      400,
      "MP_ERR_REQUEST_INVALID",
      "input[0].role",
    ],
    [
      "reasoning effort",
      { reasoning: { effort: "high" } },
      400,
      "MP_ERR_REQUEST_INVALID",
      "reasoning.effort",
    ],
    ["background", { background: true }, 400, "MP_ERR_REQUEST_INVALID", "background"],
    [
      "an include value",
      { include: ["message.output_text.logprobs"] },
      400,
      "MP_ERR_REQUEST_INVALID",
      "include[0]",
    ],
    ["truncation auto", { truncation: "auto" }, 400, "MP_ERR_REQUEST_INVALID", "truncation"],
    [
      "an unknown format",
      { text: { format: { type: "grammar" } } },
      400,
      "MP_ERR_REQUEST_INVALID",
      "text.format.type",
    ],
    [
      "a json_schema format without a schema",
      { text: { format: { type: "json_schema", name: "x" } } },
      400,
      "MP_ERR_REQUEST_INVALID",
      "text.format.schema",
    ],
    [
      "tool_choice naming no tool",
      { tools, tool_choice: { type: "function", name: "nope" } },
      400,
      "MP_ERR_REQUEST_INVALID",
      "tool_choice",
    ],
    [
      "a nested (chat-shaped) tool",
      { tools: [{ type: "function", function: { name: "add" } }] },
      400,
      "MP_ERR_REQUEST_INVALID",
      "tools[0].name",
    ],
    ["no input", { input: undefined }, 400, "MP_ERR_REQUEST_INVALID", "input"],
    ["a bad temperature", { temperature: 3 }, 400, "MP_ERR_REQUEST_INVALID", "temperature"],
    ["an unknown model", { model: "no-such-model" }, 404, "MP_ERR_MODEL_NOT_FOUND", "model"],
  ];
  for (const [what, extra, status, code, param] of cases)
    it(`refuses ${what}`, async () => {
      const res = await call("POST", "/v1/responses", { model: "tiny-llama", input: "hi", ...extra });
      assert.equal(res.status, status, res.text);
      assert.equal(res.body.error.code, code);
      assert.equal(res.body.error.param, param);
      assert.equal(res.body.error.type, status === 404 ? "invalid_request_error" : "invalid_request_error");
    });

  it("bounds the conversation as chat does: too many messages, too many bytes", async () => {
    const many = Array.from({ length: 2000 }, () => ({ role: "user", content: "x" }));
    const res = await call("POST", "/v1/responses", { model: "tiny-llama", input: many });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.error.param, "input");
    const long = await call("POST", "/v1/responses", { model: "tiny-llama", input: "word ".repeat(200_000) });
    assert.equal(long.status, 400, long.text.slice(0, 300));
    assert.equal(long.body.error.code, "MP_ERR_LLM_CONTEXT_OVERFLOW");
  });
});
