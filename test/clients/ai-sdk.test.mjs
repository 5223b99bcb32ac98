// The Vercel AI SDK (`ai`), unmodified, against a listening modelport on two GGUFs with different
// tokenizers (tiny-llama: SentencePiece with byte fallback; bpe-llama: byte-level BPE), through
// both of its OpenAI providers: @ai-sdk/openai-compatible (chat completions) and @ai-sdk/openai
// (`openai.chat(model)`: chat completions; `openai(model)`: the Responses API). They need
// Node.js 22 or later, so this file runs on the Node 24 binary installed with them
// (test/clients/package.json), while the server runs as a child process on the project's Node.
// Every structured answer is checked with the client's own zod schema (ranges, enums, optional
// fields, array bounds) or ends as docs/LLM.md says: cut by max_tokens, or 422
// MP_ERR_LLM_OUTPUT_INVALID; never an object that breaks its schema.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import {
  APICallError,
  embedMany,
  generateObject,
  generateText,
  NoObjectGeneratedError,
  Output,
  stepCountIs,
  streamText,
  tool,
} from "ai";
import { z } from "zod";
import { untilValid } from "./outcomes.mjs";
import { CHAT_MODELS, EMBED_MODEL, startModelport } from "./server.mjs";

const person = z.object({
  name: z.string().max(24),
  age: z.number().int(),
  tags: z.array(z.enum(["a", "b", "c"])).max(3),
  nickname: z.string().max(8).nullable(),
});
/** Ranges, an enum, an optional field and a nested array with bounds. */
const order = z.object({
  quantity: z.number().int().min(1).max(99),
  price: z.number().min(0).max(1000),
  status: z.enum(["open", "paid", "sent"]),
  note: z.string().max(12).optional(),
  lines: z
    .array(z.object({ sku: z.string().min(1).max(6), qty: z.number().int().min(1).max(9) }))
    .min(1)
    .max(3),
});
const weather = z.object({ city: z.string().max(20), unit: z.enum(["c", "f"]) });

/**
 * Runs `run` (which resolves to the object a call produced) and says how it ended: "valid" (the
 * object passes `schema`'s own parse), "length" (cut by max_tokens) or "invalid-422" (the
 * server's coded refusal); anything else fails the test.
 */
async function objectOutcome(schema, run) {
  try {
    const object = await run();
    assert.deepEqual(schema.parse(object), object);
    return "valid";
  } catch (err) {
    if (NoObjectGeneratedError.isInstance(err)) {
      assert.equal(err.finishReason, "length", `${err.message}: ${err.text}`);
      return "length";
    }
    assert.ok(APICallError.isInstance(err), String(err));
    assert.equal(err.statusCode, 422, err.message);
    assert.match(err.responseBody, /MP_ERR_LLM_OUTPUT_INVALID/);
    return "invalid-422";
  }
}

/** generateObject with `schema` on `model`, greedy then sampled, until one object is valid. */
async function objectsPass(model, schema) {
  await untilValid((seed) =>
    objectOutcome(schema, async () => {
      const { object } = await generateObject({
        model,
        schema,
        prompt: "Fill in the order.",
        maxOutputTokens: 400,
        maxRetries: 0,
        ...(seed === undefined ? { temperature: 0 } : { temperature: 1, seed }),
      });
      return object;
    }),
  );
}

/** generateText then streamText, greedy: the same text, cut by maxOutputTokens, with usage. */
async function sameTextBothWays(model) {
  const text = await generateText({
    model,
    prompt: "hello",
    maxOutputTokens: 10,
    temperature: 0,
    maxRetries: 0,
  });
  assert.equal(text.finishReason, "length");
  assert.equal(text.usage.outputTokens, 10);
  assert.ok(text.usage.inputTokens > 0);
  assert.ok(text.text.length > 0);
  const stream = streamText({ model, prompt: "hello", maxOutputTokens: 10, temperature: 0, maxRetries: 0 });
  let streamed = "";
  for await (const part of stream.textStream) streamed += part;
  assert.equal(streamed, text.text);
  assert.equal(await stream.finishReason, "length");
  assert.equal((await stream.usage).outputTokens, 10);
}

describe("the Vercel AI SDK against modelport", () => {
  let server;

  before(async () => {
    server = await startModelport("ai-sdk");
  });

  after(async () => {
    await server?.stop();
  });

  describe("@ai-sdk/openai-compatible", () => {
    const provider = () =>
      createOpenAICompatible({
        name: "modelport",
        baseURL: server.baseURL,
        supportsStructuredOutputs: true,
        includeUsage: true,
      });

    it("embedMany through the provider's embedding model", async () => {
      const { embeddings, usage } = await embedMany({
        model: provider().embeddingModel(EMBED_MODEL),
        values: ["the model", "will serve"],
      });
      assert.equal(embeddings.length, 2);
      assert.equal(embeddings[0].length, embeddings[1].length);
      assert.ok(usage.tokens > 0);
    });

    it("errors: an APICallError with the status and the MP_ERR_* code in its body", async () => {
      await assert.rejects(
        generateText({ model: provider().chatModel("nope"), prompt: "hello", maxRetries: 0 }),
        (err) => {
          assert.ok(APICallError.isInstance(err), String(err));
          assert.equal(err.statusCode, 404);
          assert.equal(err.isRetryable, false);
          assert.equal(JSON.parse(err.responseBody).error.code, "MP_ERR_MODEL_NOT_FOUND");
          return true;
        },
      );
    });

    for (const name of CHAT_MODELS)
      describe(name, () => {
        it("generateText and streamText: the same greedy text, with usage", async () => {
          await sameTextBothWays(provider().chatModel(name));
        });

        it("generateObject with ranges and Output.object: objects that pass the zod schema", async () => {
          const model = provider().chatModel(name);
          await objectsPass(model, order);
          await untilValid((seed) =>
            objectOutcome(person, async () => {
              const { output } = await generateText({
                model,
                output: Output.object({ schema: person }),
                prompt: "Describe a person.",
                maxOutputTokens: 300,
                maxRetries: 0,
                ...(seed === undefined ? { temperature: 0 } : { temperature: 1, seed }),
              });
              return output;
            }),
          );
        });

        it("tools over several steps: each call's input passes its schema, results go back to the model", async () => {
          const seen = [];
          const result = await generateText({
            model: provider().chatModel(name),
            prompt: "What is the weather in Paris?",
            maxOutputTokens: 300,
            maxRetries: 0,
            toolChoice: "required",
            tools: {
              weather: tool({
                description: "The weather in a city",
                inputSchema: weather,
                execute: async (input) => {
                  seen.push(weather.parse(input));
                  return { temperature: 21 };
                },
              }),
            },
            stopWhen: stepCountIs(2),
            include: { requestBody: true },
          });
          assert.equal(result.steps.length, 2);
          assert.deepEqual(
            result.steps.map((s) => s.finishReason),
            ["tool-calls", "tool-calls"],
          );
          assert.equal(seen.length, result.steps.flatMap((s) => s.toolCalls).length);
          // The second step's request carried the first call and its result.
          const body = result.steps[1].request.body;
          const sent = (typeof body === "string" ? JSON.parse(body) : body).messages;
          assert.equal(sent.at(-1).role, "tool");
          assert.ok(sent.at(-2).tool_calls.length >= 1);
        });
      });
  });

  describe("@ai-sdk/openai, chat completions (openai.chat)", () => {
    const provider = () => createOpenAI({ baseURL: server.baseURL, apiKey: "unused" });

    for (const name of CHAT_MODELS)
      describe(name, () => {
        it("generateText and streamText: the same greedy text, with usage", async () => {
          await sameTextBothWays(provider().chat(name));
        });

        it("generateObject with ranges: objects that pass the zod schema", async () => {
          await objectsPass(provider().chat(name), order);
        });

        it("tools: a required call whose input passes its schema", async () => {
          const result = await generateText({
            model: provider().chat(name),
            prompt: "What is the weather in Paris?",
            maxOutputTokens: 300,
            maxRetries: 0,
            toolChoice: "required",
            tools: { weather: tool({ description: "The weather in a city", inputSchema: weather }) },
          });
          assert.equal(result.finishReason, "tool-calls");
          assert.ok(result.toolCalls.length >= 1);
          for (const call of result.toolCalls) {
            assert.equal(call.toolName, "weather");
            assert.deepEqual(weather.parse(call.input), call.input);
          }
        });
      });
  });

  describe("@ai-sdk/openai, the Responses API (openai(model), the provider's default)", () => {
    const provider = () => createOpenAI({ baseURL: server.baseURL, apiKey: "unused" });

    for (const name of CHAT_MODELS)
      describe(name, () => {
        it("generateText and streamText: the same greedy text, with usage", async () => {
          await sameTextBothWays(provider()(name));
        });

        it("generateObject with ranges: objects that pass the zod schema", async () => {
          await objectsPass(provider()(name), order);
        });

        it("tools: a required call whose input passes its schema", async () => {
          const result = await generateText({
            model: provider()(name),
            prompt: "What is the weather in Paris?",
            maxOutputTokens: 300,
            maxRetries: 0,
            toolChoice: "required",
            tools: { weather: tool({ description: "The weather in a city", inputSchema: weather }) },
          });
          assert.equal(result.finishReason, "tool-calls");
          assert.ok(result.toolCalls.length >= 1);
          for (const call of result.toolCalls) assert.deepEqual(weather.parse(call.input), call.input);
        });
      });
  });
});
