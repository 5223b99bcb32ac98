// Structured answers from a language model through the official `openai` client: JSON
// response formats and tool calls are generated under a grammar, so on tiny-llama (random
// weights: word salad) every answer still parses and validates against the client's schema
// (checked with Ajv, a JSON Schema validator that is not ours), streamed or not, sampled or
// greedy. The same requests through an upstream model (a second server whose upstream is the
// first) come back with the same tool calls. Also: a completion keeps the space before its
// first word, and the penalties are taken.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Ajv } from "ajv";
import OpenAI from "openai";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";

const ajv = new Ajv({ strict: false });

const weather = {
  type: "object",
  properties: {
    city: { type: "string", minLength: 1, maxLength: 24 },
    unit: { enum: ["celsius", "fahrenheit"] },
    days: { type: "integer" },
  },
  required: ["city", "unit", "days"],
  additionalProperties: false,
} as const;

const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: "function",
    function: { name: "get_weather", description: "Weather for a city", parameters: weather },
  },
  {
    type: "function",
    function: {
      name: "add",
      parameters: {
        type: "object",
        properties: { a: { type: "number" }, b: { type: "number" } },
        required: ["a", "b"],
      },
    },
  },
];

type FunctionCall = { function: { name: string; arguments: string } };
type FunctionTool = { function: { name: string; parameters: Record<string, unknown> } };
const validators = new Map(
  (tools as unknown as FunctionTool[]).map((t) => [t.function.name, ajv.compile(t.function.parameters)]),
);

/** Every call names an offered tool, and its arguments parse and validate against that tool's schema. */
function assertValidCalls(calls: FunctionCall[] | undefined): void {
  assert.ok(calls && calls.length > 0, "at least one tool call");
  for (const c of calls) {
    const validate = validators.get(c.function.name);
    assert.ok(validate, `a tool that was offered: ${c.function.name}`);
    const args = JSON.parse(c.function.arguments);
    assert.ok(validate(args), `${c.function.arguments}: ${ajv.errorsText(validate.errors)}`);
  }
}

const messages = [{ role: "user" as const, content: "What is the weather in Paris for 3 days?" }];

describe("structured answers: JSON response formats and tool calls", () => {
  let server: InProcessServer;
  let viaUpstream: InProcessServer;
  let client: OpenAI;

  before(async () => {
    const dir = await testModels();
    const file = join(dir, "structured.yaml");
    writeFileSync(
      file,
      [
        "models:",
        "  - name: tiny-llama",
        "    path: tiny-llama.gguf",
        "    llm: { sequences: 2, contextSize: 2048 }",
        "",
      ].join("\n"),
    );
    server = await startInProcess({ file });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const upstream = join(dir, "structured-upstream.yaml");
    writeFileSync(
      upstream,
      [
        "models:",
        "  - name: relay",
        "    backend: upstream",
        `    upstream: { url: "${server.url}/v1", model: tiny-llama }`,
        "",
      ].join("\n"),
    );
    viaUpstream = await startInProcess({ file: upstream });
  });

  after(async () => {
    await viaUpstream?.close();
    await server?.close();
  });

  it("json_schema: 8 sampled answers all parse and validate, streamed and not", async () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 30 },
        score: { type: "number" },
        count: { type: "integer" },
        tags: { type: "array", items: { enum: ["a", "b", "c"] }, maxItems: 4 },
        ok: { type: "boolean" },
        note: { anyOf: [{ type: "string", maxLength: 10 }, { type: "null" }] },
      },
      required: ["name", "score", "count", "tags", "ok", "note"],
      additionalProperties: false,
    };
    const validate = ajv.compile(schema);
    const response_format = {
      type: "json_schema" as const,
      json_schema: { name: "thing", schema, strict: true },
    };
    for (let seed = 1; seed <= 8; seed++) {
      const stream = seed % 2 === 0;
      const request = {
        model: "tiny-llama",
        messages,
        max_tokens: 400,
        temperature: 1,
        seed,
        response_format,
      };
      let content = "";
      let finish: string | null = null;
      if (stream) {
        for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
          content += chunk.choices[0]?.delta.content ?? "";
          finish = chunk.choices[0]?.finish_reason ?? finish;
        }
      } else {
        const res = await client.chat.completions.create(request);
        content = res.choices[0]!.message.content ?? "";
        finish = res.choices[0]!.finish_reason;
      }
      assert.equal(finish, "stop", `seed ${seed}: ${content}`);
      const value = JSON.parse(content);
      assert.ok(validate(value), `seed ${seed}: ${content}: ${ajv.errorsText(validate.errors)}`);
    }
  });

  it("json_object: the answer is a JSON object", async () => {
    const res = await client.chat.completions.create({
      model: "tiny-llama",
      messages,
      max_tokens: 300,
      temperature: 1,
      seed: 7,
      response_format: { type: "json_object" },
    });
    const value = JSON.parse(res.choices[0]!.message.content!);
    assert.equal(typeof value, "object");
    assert.ok(value !== null && !Array.isArray(value));
  });

  it("refuses with a 400 naming it what neither a grammar nor validation can serve", async () => {
    await assert.rejects(
      client.chat.completions.create({
        model: "tiny-llama",
        messages,
        response_format: {
          type: "json_schema",
          json_schema: {
            name: "x",
            schema: { type: "object", properties: { n: { type: "integer", minimum: 3, maximum: 2 } } },
          },
        },
      }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError, String(err));
        assert.equal(err.code, "MP_ERR_REQUEST_INVALID");
        assert.equal(err.param, "response_format.json_schema.schema");
        assert.match(err.message, /properties\.n: an integer range with no integer in it/);
        return true;
      },
    );
    await assert.rejects(
      client.chat.completions.create({
        model: "tiny-llama",
        messages,
        tools: [
          {
            type: "function",
            function: {
              name: "f",
              parameters: { type: "object", properties: { s: { type: "string", pattern: "^(?!a)" } } },
            },
          },
        ],
        tool_choice: "required",
      }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError, String(err));
        assert.equal(err.param, "tools[0].function.parameters");
        assert.match(err.message, /properties\.s\.pattern: the pattern .* \(lookaround\) cannot be written/);
        return true;
      },
    );
    // Not JSON Schema at all: Ajv's words.
    await assert.rejects(
      client.chat.completions.create({
        model: "tiny-llama",
        messages,
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "integer", minimum: "3" } },
        },
      }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && /not a valid JSON Schema/.test(err.message),
    );
  });

  it("tool_choice required: every one of 6 sampled answers is calls whose arguments validate", async () => {
    for (let seed = 1; seed <= 6; seed++) {
      const res = await client.chat.completions.create({
        model: "tiny-llama",
        messages,
        tools,
        tool_choice: "required",
        max_tokens: 400,
        temperature: 1,
        seed,
      });
      const choice = res.choices[0]!;
      assert.equal(choice.finish_reason, "tool_calls");
      assert.equal(choice.message.content, null);
      assertValidCalls(choice.message.tool_calls as FunctionCall[]);
      for (const c of choice.message.tool_calls!) assert.match(c.id, /^call_/);
    }
  });

  it("a named tool_choice calls that function, once when parallel calls are off", async () => {
    for (const parallel_tool_calls of [true, false]) {
      const res = await client.chat.completions.create({
        model: "tiny-llama",
        messages,
        tools,
        tool_choice: { type: "function", function: { name: "add" } },
        parallel_tool_calls,
        max_tokens: 300,
      });
      const calls = res.choices[0]!.message.tool_calls as FunctionCall[];
      assertValidCalls(calls);
      assert.deepEqual(
        calls.map((c) => c.function.name),
        ["add"],
      );
    }
  });

  it("tool_choice auto: an answer is text or valid calls, and words stream as they come; 'none' never calls", async () => {
    let words = 0;
    // Random weights mostly pick calls: sampled seeds until one answers in words (seed 28 does).
    for (let seed = 1; seed <= 40 && words === 0; seed++) {
      const request = { model: "tiny-llama", messages, tools, max_tokens: 200, temperature: 1, seed };
      const res = await client.chat.completions.create(request);
      const choice = res.choices[0]!;
      if (choice.finish_reason === "tool_calls") {
        assertValidCalls(choice.message.tool_calls as FunctionCall[]);
        continue;
      }
      // Calls cut at max_tokens come as the raw JSON so far, with finish_reason "length".
      if (/^\s*\{\s*"tool_calls"/.test(choice.message.content ?? "")) {
        assert.equal(choice.finish_reason, "length");
        continue;
      }
      // An answer in words (cut at max_tokens when the model rambles: random weights do).
      assert.match(choice.finish_reason, /^(stop|length)$/);
      assert.equal(typeof choice.message.content, "string");
      assert.doesNotMatch(choice.message.content!, /^\s*\{\s*"response"/);
      assert.equal(choice.message.tool_calls, undefined);
      if (choice.message.content!.length < 20) continue;
      // Streamed, the words come piece by piece (not in one chunk at the end) and add up.
      const pieces: string[] = [];
      for await (const chunk of await client.chat.completions.create({ ...request, stream: true }))
        if (chunk.choices[0]?.delta.content) pieces.push(chunk.choices[0].delta.content);
      assert.equal(pieces.join(""), choice.message.content);
      assert.ok(pieces.length >= 3, `${pieces.length} content chunks`);
      words++;
    }
    assert.ok(words > 0, "at least one seed answered in words");
    const none = await client.chat.completions.create({
      model: "tiny-llama",
      messages,
      tools,
      tool_choice: "none",
      max_tokens: 8,
    });
    assert.equal(none.choices[0]!.message.tool_calls, undefined);
    assert.equal(none.choices[0]!.finish_reason, "length");
  });

  it("streams tool calls as OpenAI's clients read them, and takes the calls and results back as history", async () => {
    const stream = client.chat.completions.stream({
      model: "tiny-llama",
      messages,
      tools,
      tool_choice: "required",
      max_tokens: 400,
    });
    const final = await stream.finalChatCompletion();
    const choice = final.choices[0]!;
    assert.equal(choice.finish_reason, "tool_calls");
    const calls = choice.message.tool_calls as {
      id: string;
      function: { name: string; arguments: string };
    }[];
    assertValidCalls(calls);
    // The next turn: the assistant's calls and a tool result for each, then an answer.
    const next = await client.chat.completions.create({
      model: "tiny-llama",
      messages: [
        ...messages,
        { role: "assistant", content: null, tool_calls: choice.message.tool_calls },
        ...calls.map((c) => ({ role: "tool" as const, tool_call_id: c.id, content: '{"temperature": 21}' })),
      ],
      tools,
      tool_choice: "none",
      max_tokens: 6,
    });
    assert.equal(typeof next.choices[0]!.message.content, "string");
    // A tool message must say which call it answers.
    const bad = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "tiny-llama", messages: [...messages, { role: "tool", content: "x" }] }),
    });
    assert.equal(bad.status, 400);
    assert.equal(
      ((await bad.json()) as { error: { param: string } }).error.param,
      "messages[1].tool_call_id",
    );
  });

  it("passes tools and response formats through an upstream model, streamed and not, and reads the calls back", async () => {
    const relay = new OpenAI({ baseURL: `${viaUpstream.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const request = { model: "relay", messages, tools, tool_choice: "required" as const, max_tokens: 400 };
    const direct = await client.chat.completions.create({ ...request, model: "tiny-llama" });
    const relayed = await relay.chat.completions.create(request);
    assert.equal(relayed.choices[0]!.finish_reason, "tool_calls");
    const names = (r: OpenAI.Chat.Completions.ChatCompletion) =>
      (r.choices[0]!.message.tool_calls as unknown as FunctionCall[]).map((c) => [
        c.function.name,
        c.function.arguments,
      ]);
    // Greedy: the same calls (new ids) as asking the model directly.
    assert.deepEqual(names(relayed), names(direct));
    const streamed = await relay.chat.completions.stream(request).finalChatCompletion();
    assert.deepEqual(names(streamed), names(direct));
    // Logprobs come back through the upstream (it streams them with its last chunk).
    const lp = { messages, max_tokens: 4, logprobs: true, top_logprobs: 2 };
    const lpDirect = await client.chat.completions.create({ model: "tiny-llama", ...lp });
    const lpRelayed = await relay.chat.completions.create({ model: "relay", ...lp });
    const figures = (r: OpenAI.Chat.Completions.ChatCompletion) =>
      r.choices[0]!.logprobs!.content!.map((t) => [t.token, t.logprob, t.top_logprobs.length]);
    assert.deepEqual(figures(lpRelayed), figures(lpDirect));
    const json = await relay.chat.completions.create({
      model: "relay",
      messages,
      max_tokens: 200,
      response_format: { type: "json_object" },
    });
    assert.equal(typeof JSON.parse(json.choices[0]!.message.content!), "object");
  });

  it("keeps the space between a completion's prompt and its first word", async () => {
    const res = await client.completions.create({ model: "tiny-llama", prompt: "hello", max_tokens: 4 });
    const text = res.choices[0]!.text;
    assert.match(text, /^ \S/, JSON.stringify(text));
  });

  it("takes frequency and presence penalties, and refuses them out of range", async () => {
    const plain = await client.completions.create({ model: "tiny-llama", prompt: "hello", max_tokens: 40 });
    const penalized = await client.completions.create({
      model: "tiny-llama",
      prompt: "hello",
      max_tokens: 40,
      frequency_penalty: 2,
      presence_penalty: 2,
    });
    assert.equal(penalized.choices[0]!.finish_reason, "length");
    // A penalty on repeated tokens: never more repeats than without it.
    const repeats = (t: string) => {
      const words = t.trim().split(/\s+/);
      return words.length - new Set(words).size;
    };
    assert.ok(repeats(penalized.choices[0]!.text) <= repeats(plain.choices[0]!.text));
    await assert.rejects(
      client.completions.create({ model: "tiny-llama", prompt: "x", frequency_penalty: 3 }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && err.param === "frequency_penalty",
    );
  });
});
