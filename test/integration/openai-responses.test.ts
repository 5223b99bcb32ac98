// OpenAI's Responses API end to end: a real listening server with API keys, serving the test
// GGUFs tiny-llama (SentencePiece) and bpe-llama (byte-level BPE) through llama.cpp. Text and item
// input, instructions (the same answer and prompt tokens as the same chat messages), forced
// function calls whose arguments validate against the tool's schema (checked with Ajv, not ours),
// a function_call_output turn, strict json_schema answers, the max_output_tokens cut, streaming
// (every event read: sequence numbers, deltas, the completed response equal to the non-streamed
// one), /openapi.json, and the official `openai` SDK's responses methods (create, stream,
// retrieve, inputItems, delete). Stored responses, tenants and refusals: openai-responses-store.test.ts.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import {
  ajv,
  assertValidCall,
  call,
  comparable,
  create,
  type Json,
  keys,
  server,
  startServer,
  stopServer,
  streamEvents,
  textOf,
  tools,
} from "./responses-harness.js";

before(startServer);
after(stopServer);

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

describe("the openai SDK", () => {
  it("creates, streams, retrieves, lists input items of and deletes responses", async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: keys.a, maxRetries: 0 });
    const created = await client.responses.create({
      model: "tiny-llama",
      input: "hello",
      max_output_tokens: 8,
    });
    assert.equal(created.output_text, textOf(created as unknown as Json));
    const stream = client.responses.stream({ model: "tiny-llama", input: "hello", max_output_tokens: 8 });
    let streamed = "";
    for await (const event of stream)
      if (event.type === "response.output_text.delta") streamed += event.delta;
    const final = await stream.finalResponse();
    assert.equal(streamed, created.output_text);
    // The SDK's final response is its snapshot of the events (it adds no output_text there).
    assert.equal(textOf(final as unknown as Json), created.output_text);
    const retrieved = await client.responses.retrieve(created.id);
    assert.equal(retrieved.id, created.id);
    const items = await client.responses.inputItems.list(created.id);
    assert.equal(items.data.length, 1);
    await client.responses.delete(created.id);
    await assert.rejects(client.responses.retrieve(created.id), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError);
      return true;
    });
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

  it("a client that leaves mid-stream stops its generation and frees its sequence; nothing is stored", async () => {
    const ac = new AbortController();
    const res = await fetch(`${server.url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${keys.a}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "tiny-llama",
        input: "a long story",
        max_output_tokens: 1900,
        stream: true,
      }),
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let seen = "";
    while (!seen.includes("response.output_text.delta"))
      seen += new TextDecoder().decode((await reader.read()).value);
    const id = /"id":"(resp_[0-9a-f]{32})"/.exec(seen)![1]!;
    ac.abort();
    const canceled = () =>
      server.logs.find((l) => l.msg === "generation canceled: the client left; sequence freed");
    while (!canceled()) await new Promise((r) => setTimeout(r, 20));
    assert.ok(
      (canceled()!.generated as number) < 1900,
      `stopped early (${String(canceled()!.generated)} tokens)`,
    );
    assert.equal((await call("GET", `/v1/responses/${id}`)).status, 404);
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
