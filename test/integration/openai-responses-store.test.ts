// Stored responses of the Responses API, through a listening server with API keys: GET, DELETE,
// input_items, previous_response_id and store: false; tenants (another key's response answers the
// 404 of an unknown id, a key scoped to another model gets the no-model 404); and the refusals, by
// name. The generation itself is in openai-responses.test.ts.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { respond } from "../../src/server/responses.js";
import {
  call,
  create,
  type Json,
  keys,
  server,
  startServer,
  stopServer,
  textOf,
  tools,
} from "./responses-harness.js";

before(startServer);
after(stopServer);

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

describe("respond(), outside a request", () => {
  it("answers a Responses body as the route does and stores it for the owner given", async () => {
    const ctx = server.server.context;
    const model = ctx.catalogue.get("tiny-llama");
    const body = { model: "tiny-llama", input: "Once upon a time", max_output_tokens: 6 };
    const answer = await respond(ctx, model, { ...body, stream: true }, { owner: "team-a" });
    const viaRoute = await create({ ...body, store: false });
    assert.equal(textOf(answer), textOf(viaRoute));
    const mine = await call("GET", `/v1/responses/${answer.id}`);
    assert.equal(mine.status, 200, mine.text);
    assert.deepEqual(mine.body, answer);
    assert.equal((await call("GET", `/v1/responses/${answer.id}`, undefined, keys.b)).status, 404);
    // Continuing a response another key owns is the same 404 there.
    await assert.rejects(
      respond(ctx, model, { ...body, previous_response_id: answer.id }, { owner: "team-b", scope: "team-b" }),
      (err: unknown) => (err as { code?: string }).code === "MP_ERR_RESPONSE_NOT_FOUND",
    );
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
