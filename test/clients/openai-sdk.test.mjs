// The official `openai` SDK, unmodified, against a listening modelport, on two GGUFs with
// different tokenizers (tiny-llama: SentencePiece with byte fallback; bpe-llama: byte-level
// BPE): chat completions and completions, plain and streamed; embeddings; models.list;
// `chat.completions.parse` and `.stream` with `zodResponseFormat` of a schema with integer
// ranges, formats, enums, nullable fields and a nested array with bounds; tools with
// `tool_choice: "required"` by plain create, streamed and through `runTools`; and errors as the
// SDK's APIError subclasses carrying status, `code` MP_ERR_* and `param`. Every parsed object is
// checked against the whole zod schema; an answer may instead end as docs/LLM.md says (cut by
// max_tokens, or 422 MP_ERR_LLM_OUTPUT_INVALID), never as a 200 that breaks its schema.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import { LengthFinishReasonError } from "openai/error";
import { zodFunction, zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import { untilValid } from "./outcomes.mjs";
import { CHAT_MODELS, EMBED_MODEL, startModelport } from "./server.mjs";

/** Every kind of constraint the grammar holds (docs/LLM.md#structured-output), as zod writes it. */
const form = z.object({
  age: z.number().int().min(0).max(120),
  id: z.string().uuid(),
  born: z.iso.date(),
  color: z.enum(["red", "green", "blue"]),
  nickname: z.string().max(8).nullable(),
  // The SDK refuses `.optional()` alone in a strict schema; `.nullish()` is how it takes one.
  note: z.string().max(10).nullish(),
  items: z
    .array(z.object({ sku: z.string().min(1).max(6), qty: z.number().int().min(1).max(9) }))
    .min(1)
    .max(3),
});
const weather = z.object({ city: z.string().max(20), unit: z.enum(["c", "f"]) });
const time = z.object({ zone: z.enum(["utc", "cet"]) });
const messages = [{ role: "user", content: "Fill in the form." }];

describe("the openai SDK against modelport", () => {
  let server;
  /** @type {OpenAI} */
  let client;

  before(async () => {
    server = await startModelport("openai-sdk");
    client = new OpenAI({ baseURL: server.baseURL, apiKey: "unused", maxRetries: 0 });
  });

  after(async () => {
    await server?.stop();
  });

  it("models.list: every served model, through the SDK's pager", async () => {
    const ids = [];
    for await (const model of client.models.list()) ids.push(model.id);
    assert.deepEqual(ids.sort(), [...CHAT_MODELS, EMBED_MODEL].sort());
    const one = await client.models.retrieve("bpe-llama");
    assert.equal(one.id, "bpe-llama");
  });

  it("embeddings.create: one vector per input, the same text the same vector, with usage", async () => {
    const res = await client.embeddings.create({
      model: EMBED_MODEL,
      input: ["the model", "will serve", "the model"],
    });
    assert.equal(res.data.length, 3);
    assert.deepEqual(
      res.data.map((d) => d.index),
      [0, 1, 2],
    );
    assert.ok(res.data[0].embedding.length > 0);
    assert.deepEqual(res.data[0].embedding, res.data[2].embedding);
    assert.ok(res.usage.prompt_tokens > 0);
  });

  it("errors: the SDK's APIError subclasses with status, code MP_ERR_* and param", async () => {
    const cases = [
      {
        call: () => client.chat.completions.create({ model: "nope", messages }),
        type: OpenAI.NotFoundError,
        status: 404,
        code: "MP_ERR_MODEL_NOT_FOUND",
        param: "model",
      },
      {
        call: () => client.chat.completions.create({ model: "tiny-llama", messages, max_tokens: -1 }),
        type: OpenAI.BadRequestError,
        status: 400,
        code: "MP_ERR_REQUEST_INVALID",
        param: "max_tokens",
      },
      {
        // Streamed: the error is the HTTP answer, so create() itself throws.
        call: () => client.chat.completions.create({ model: "nope", messages, stream: true }),
        type: OpenAI.NotFoundError,
        status: 404,
        code: "MP_ERR_MODEL_NOT_FOUND",
        param: "model",
      },
      {
        // A pattern the grammar cannot hold (a lookahead) is refused up front, naming the field.
        call: () =>
          client.chat.completions.parse({
            model: "tiny-llama",
            messages,
            response_format: zodResponseFormat(z.object({ code: z.string().regex(/^(?=a)\w+$/) }), "code"),
          }),
        type: OpenAI.BadRequestError,
        status: 400,
        code: "MP_ERR_REQUEST_INVALID",
        message: /code/,
      },
      {
        // A constraint only validation holds, which no answer can meet (no multiple of 1000003
        // lies in range): every attempt fails validation, and the call ends as a coded 422.
        call: () =>
          client.chat.completions.parse({
            model: "tiny-llama",
            messages,
            max_tokens: 200,
            response_format: zodResponseFormat(
              z.object({ n: z.number().int().min(1).max(999).multipleOf(1000003) }),
              "n",
            ),
          }),
        type: OpenAI.UnprocessableEntityError,
        status: 422,
        code: "MP_ERR_LLM_OUTPUT_INVALID",
      },
      {
        call: () => client.embeddings.create({ model: "nope", input: "x" }),
        type: OpenAI.NotFoundError,
        status: 404,
        code: "MP_ERR_MODEL_NOT_FOUND",
      },
    ];
    for (const c of cases) {
      await assert.rejects(c.call(), (err) => {
        assert.ok(err instanceof OpenAI.APIError, String(err));
        assert.ok(err instanceof c.type, `${err.constructor.name}: ${err.message}`);
        assert.equal(err.status, c.status, err.message);
        assert.equal(err.code, c.code, err.message);
        if (c.param) assert.equal(err.param, c.param, err.message);
        if (c.message) assert.match(err.message, c.message);
        return true;
      });
    }
  });

  for (const model of CHAT_MODELS)
    describe(model, () => {
      it("chat.completions.create, plain and streamed: the same greedy text, with usage", async () => {
        const request = { model, messages: [{ role: "user", content: "hello" }], max_tokens: 12 };
        const plain = await client.chat.completions.create(request);
        const choice = plain.choices[0];
        assert.equal(choice.finish_reason, "length");
        assert.equal(choice.message.role, "assistant");
        assert.equal(plain.usage.completion_tokens, 12);
        assert.ok(plain.usage.prompt_tokens > 0);
        const stream = await client.chat.completions.create({
          ...request,
          stream: true,
          stream_options: { include_usage: true },
        });
        let text = "";
        let finish;
        let usage;
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta?.content ?? "";
          finish = chunk.choices[0]?.finish_reason ?? finish;
          usage = chunk.usage ?? usage;
        }
        assert.equal(text, choice.message.content);
        assert.equal(finish, "length");
        assert.equal(usage.completion_tokens, 12);
      });

      it("completions.create, plain and streamed: the same greedy text", async () => {
        const request = { model, prompt: " the model will serve", max_tokens: 8 };
        const plain = await client.completions.create(request);
        assert.equal(plain.choices[0].finish_reason, "length");
        assert.equal(plain.usage.completion_tokens, 8);
        let text = "";
        for await (const chunk of await client.completions.create({ ...request, stream: true }))
          text += chunk.choices[0]?.text ?? "";
        assert.equal(text, plain.choices[0].text);
      });

      it("chat.completions.parse and .stream with zodResponseFormat: objects that pass the whole schema, or a documented end", async () => {
        const responseFormat = zodResponseFormat(form, "form");
        /** How one call ended: a valid object (zod's own parse of the whole schema) or a documented end. */
        const outcome = async (call) => {
          try {
            const res = await call();
            const { message, finish_reason } = res.choices[0];
            assert.equal(finish_reason, "stop");
            // zod's own parse: ranges, the uuid and date formats, enums, nullables, array bounds.
            assert.deepEqual(form.parse(message.parsed), message.parsed);
            assert.deepEqual(JSON.parse(message.content), message.parsed);
            return "valid";
          } catch (err) {
            // The two ends docs/LLM.md allows besides a valid object; nothing else.
            if (err instanceof LengthFinishReasonError) return "length";
            assert.ok(err instanceof OpenAI.UnprocessableEntityError, String(err));
            assert.equal(err.code, "MP_ERR_LLM_OUTPUT_INVALID");
            return "invalid-422";
          }
        };
        for (const streamed of [false, true])
          await untilValid((seed) => {
            const request = {
              model,
              messages,
              response_format: responseFormat,
              max_tokens: 400,
              ...(seed === undefined ? {} : { seed, temperature: 1 }),
            };
            return outcome(() =>
              streamed
                ? client.chat.completions.stream(request).finalChatCompletion()
                : client.chat.completions.parse(request),
            );
          });
      });

      it('tools with tool_choice "required": plain, streamed and through runTools, arguments that pass their schema', async () => {
        const schemas = { weather, time };
        const tools = [
          zodFunction({ name: "weather", description: "The weather in a city", parameters: weather }),
          zodFunction({ name: "time", description: "The time in a zone", parameters: time }),
        ];
        const request = {
          model,
          messages: [{ role: "user", content: "What is the weather in Paris?" }],
          max_tokens: 300,
          tools,
          tool_choice: "required",
        };
        /** Every call names a tool and carries arguments that its zod schema accepts. */
        const checkCalls = (message) => {
          assert.ok(message.tool_calls.length >= 1, JSON.stringify(message));
          for (const call of message.tool_calls) {
            assert.ok(call.id.length > 0);
            const schema = schemas[call.function.name];
            assert.ok(schema, call.function.name);
            assert.deepEqual(
              schema.parse(JSON.parse(call.function.arguments)),
              call.function.parsed_arguments,
            );
          }
        };
        const parsed = await client.chat.completions.parse(request);
        assert.equal(parsed.choices[0].finish_reason, "tool_calls");
        checkCalls(parsed.choices[0].message);
        const streamed = await client.chat.completions.stream(request).finalChatCompletion();
        assert.equal(streamed.choices[0].finish_reason, "tool_calls");
        checkCalls(streamed.choices[0].message);
        assert.deepEqual(
          streamed.choices[0].message.tool_calls.map((c) => c.function.arguments),
          parsed.choices[0].message.tool_calls.map((c) => c.function.arguments),
        );

        // runTools: the SDK runs the functions and sends their results back.
        const called = [];
        const runner = client.chat.completions.runTools(
          {
            ...request,
            tools: [
              zodFunction({
                name: "weather",
                parameters: weather,
                function: (args) => {
                  called.push(weather.parse(args));
                  return { temperature: 21 };
                },
              }),
            ],
          },
          { maxChatCompletions: 2 },
        );
        await runner.done();
        const completions = runner.allChatCompletions();
        assert.equal(completions.length, 2);
        for (const c of completions) assert.equal(c.choices[0].finish_reason, "tool_calls");
        assert.equal(called.length, completions.flatMap((c) => c.choices[0].message.tool_calls).length);
        // The second request carried the first call's result.
        const results = runner.messages.filter((m) => m.role === "tool");
        assert.ok(results.length >= 1);
        assert.equal(results[0].tool_call_id, completions[0].choices[0].message.tool_calls[0].id);
        assert.deepEqual(JSON.parse(results[0].content), { temperature: 21 });
      });
    });
});
