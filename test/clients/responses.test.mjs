// The official `openai` SDK on modelport's Responses API (`/v1/responses`), unmodified, on two
// GGUFs with different tokenizers (tiny-llama: SentencePiece with byte fallback; bpe-llama:
// byte-level BPE): `responses.create` plain and with `stream: true`, `responses.stream`,
// function tools with `tool_choice: "required"` and their results sent back by
// `previous_response_id`, `text.format` json_schema through `responses.parse` and
// `zodTextFormat` (the parsed object checked against the whole zod schema, or a documented end),
// and a conversation continued by `previous_response_id`.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import { zodResponsesFunction, zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import { untilValid } from "./outcomes.mjs";
import { CHAT_MODELS, startModelport } from "./server.mjs";

/** Every kind of constraint the grammar holds (docs/LLM.md#structured-output), as zod writes it. */
const form = z.object({
  age: z.number().int().min(0).max(120),
  id: z.string().uuid(),
  born: z.iso.date(),
  color: z.enum(["red", "green", "blue"]),
  nickname: z.string().max(8).nullable(),
  items: z
    .array(z.object({ sku: z.string().min(1).max(6), qty: z.number().int().min(1).max(9) }))
    .min(1)
    .max(3),
});
const weather = z.object({ city: z.string().max(20), unit: z.enum(["c", "f"]) });

/** The text of a response's message items, as the SDK's `output_text` joins it. */
function messageText(response) {
  return response.output
    .filter((item) => item.type === "message")
    .flatMap((item) => item.content)
    .filter((part) => part.type === "output_text")
    .map((part) => part.text)
    .join("");
}

describe("the openai SDK on the Responses API", () => {
  let server;
  /** @type {OpenAI} */
  let client;

  before(async () => {
    server = await startModelport("responses");
    client = new OpenAI({ baseURL: server.baseURL, apiKey: "unused", maxRetries: 0 });
  });

  after(async () => {
    await server?.stop();
  });

  it("errors: an unknown model and an unknown previous_response_id as APIErrors with MP_ERR_* codes", async () => {
    await assert.rejects(client.responses.create({ model: "nope", input: "hello" }), (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal(err.code, "MP_ERR_MODEL_NOT_FOUND");
      return true;
    });
    await assert.rejects(
      client.responses.create({ model: "tiny-llama", input: "hello", previous_response_id: "resp_nope" }),
      (err) => {
        assert.ok(err instanceof OpenAI.NotFoundError, String(err));
        assert.equal(err.code, "MP_ERR_RESPONSE_NOT_FOUND");
        assert.equal(err.param, "previous_response_id");
        return true;
      },
    );
  });

  for (const model of CHAT_MODELS)
    describe(model, () => {
      it("responses.create, plain, with stream: true and through responses.stream: the same greedy text", async () => {
        const request = { model, input: "hello", max_output_tokens: 10, temperature: 0 };
        const plain = await client.responses.create(request);
        assert.equal(plain.object, "response");
        assert.match(plain.id, /^resp_/);
        // Cut by max_output_tokens, as OpenAI reports it.
        assert.equal(plain.status, "incomplete");
        assert.equal(plain.incomplete_details?.reason, "max_output_tokens");
        assert.ok(plain.output_text.length > 0);
        assert.equal(plain.output_text, messageText(plain));
        assert.equal(plain.usage.output_tokens, 10);
        assert.ok(plain.usage.input_tokens > 0);

        const events = [];
        let deltas = "";
        for await (const event of await client.responses.create({ ...request, stream: true })) {
          events.push(event.type);
          if (event.type === "response.output_text.delta") deltas += event.delta;
        }
        assert.equal(events[0], "response.created");
        assert.ok(["response.completed", "response.incomplete"].includes(events.at(-1)), events.join(" "));
        assert.equal(deltas, plain.output_text);
        // Sequence numbers, item and content events, as the SDK's accumulator expects them.
        const stream = client.responses.stream(request);
        let streamed = "";
        stream.on("response.output_text.delta", (e) => {
          streamed += e.delta;
        });
        const final = await stream.finalResponse();
        assert.equal(streamed, plain.output_text);
        assert.equal(final.output_text, plain.output_text);
        assert.equal(final.usage.output_tokens, 10);
      });

      it("responses.parse with zodTextFormat: objects that pass the whole schema, or a documented end", async () => {
        /** How one call ended: a valid object (zod's own parse of the whole schema) or a documented end. */
        const outcome = async (call) => {
          let res;
          try {
            res = await call();
          } catch (err) {
            assert.ok(err instanceof OpenAI.UnprocessableEntityError, String(err));
            assert.equal(err.code, "MP_ERR_LLM_OUTPUT_INVALID");
            return "invalid-422";
          }
          if (res.status === "incomplete") {
            assert.equal(res.incomplete_details?.reason, "max_output_tokens");
            return "length";
          }
          assert.equal(res.status, "completed");
          assert.deepEqual(form.parse(res.output_parsed), res.output_parsed);
          assert.deepEqual(JSON.parse(res.output_text), res.output_parsed);
          return "valid";
        };
        for (const streamed of [false, true])
          await untilValid((seed) => {
            const request = {
              model,
              input: "Fill in the form.",
              text: { format: zodTextFormat(form, "form") },
              max_output_tokens: 400,
              ...(seed === undefined ? {} : { temperature: 1, seed }),
            };
            return outcome(() =>
              streamed ? client.responses.stream(request).finalResponse() : client.responses.parse(request),
            );
          });
      });

      it('function tools with tool_choice "required", and the result sent back by previous_response_id', async () => {
        const tools = [
          zodResponsesFunction({
            name: "weather",
            description: "The weather in a city",
            parameters: weather,
          }),
        ];
        const first = await client.responses.parse({
          model,
          input: "What is the weather in Paris?",
          tools,
          tool_choice: "required",
          max_output_tokens: 300,
        });
        const calls = first.output.filter((item) => item.type === "function_call");
        assert.ok(calls.length >= 1, JSON.stringify(first.output));
        for (const call of calls) {
          assert.equal(call.name, "weather");
          assert.ok(call.call_id.length > 0);
          assert.deepEqual(weather.parse(JSON.parse(call.arguments)), call.parsed_arguments);
        }
        // Streamed, the same calls arrive.
        const streamed = await client.responses
          .stream({
            model,
            input: "What is the weather in Paris?",
            tools,
            tool_choice: "required",
            max_output_tokens: 300,
          })
          .finalResponse();
        assert.deepEqual(
          streamed.output.filter((item) => item.type === "function_call").map((c) => c.arguments),
          calls.map((c) => c.arguments),
        );
        // The tool's output goes back with the previous response's id, not the whole history.
        const second = await client.responses.create({
          model,
          previous_response_id: first.id,
          input: calls.map((c) => ({
            type: "function_call_output",
            call_id: c.call_id,
            output: JSON.stringify({ temperature: 21 }),
          })),
          max_output_tokens: 10,
          temperature: 0,
        });
        assert.equal(second.previous_response_id, first.id);
        assert.ok(second.output_text.length > 0);
      });

      it("previous_response_id: a conversation continued from a stored response", async () => {
        const first = await client.responses.create({
          model,
          input: "hello",
          max_output_tokens: 5,
          temperature: 0,
        });
        const next = { model, input: "and then?", max_output_tokens: 8, temperature: 0 };
        const continued = await client.responses.create({ ...next, previous_response_id: first.id });
        assert.equal(continued.previous_response_id, first.id);
        // The stored turn is part of the prompt: more input tokens than the same input alone.
        const alone = await client.responses.create(next);
        assert.ok(
          continued.usage.input_tokens > alone.usage.input_tokens,
          JSON.stringify([continued.usage, alone.usage]),
        );
        // Given the same history inline, the same greedy answer.
        const inline = await client.responses.create({
          ...next,
          input: [
            { role: "user", content: "hello" },
            { role: "assistant", content: first.output_text },
            { role: "user", content: "and then?" },
          ],
        });
        assert.equal(continued.output_text, inline.output_text);
      });
    });
});
