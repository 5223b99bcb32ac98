// LangChain.js (@langchain/openai with @langchain/core), unmodified, against a listening
// modelport on two GGUFs with different tokenizers (tiny-llama: SentencePiece with byte
// fallback; bpe-llama: byte-level BPE): ChatOpenAI invoke and stream, bindTools,
// withStructuredOutput by JSON schema and by function calling, OpenAIEmbeddings, and the same
// chat through the Responses API (`useResponsesApi: true`). Every structured answer passes the
// client's own zod schema or ends as docs/LLM.md says (422 MP_ERR_LLM_OUTPUT_INVALID, or cut by
// max_tokens), never as an object that breaks its schema.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { z } from "zod";
import { untilValid } from "./outcomes.mjs";
import { CHAT_MODELS, EMBED_MODEL, startModelport } from "./server.mjs";

/** Ranges, an enum, a nullable field and a nested array with bounds. */
const person = z.object({
  name: z.string().min(1).max(24),
  age: z.number().int().min(0).max(120),
  tags: z
    .array(z.enum(["a", "b", "c"]))
    .min(1)
    .max(3),
  nickname: z.string().max(8).nullable(),
});
const city = z.object({ city: z.string().max(20) });

/**
 * Invokes `structured` (a withStructuredOutput runnable with `includeRaw: true`) and says how it
 * ended: "valid" (the parsed value passes `schema`'s own parse), or one of the documented ends:
 * "length" (the raw message was cut by max_tokens: LangChain then parses nothing, or fails to)
 * or "invalid-422" (the server's coded refusal, as the openai SDK underneath raises it);
 * anything else fails the test.
 */
async function outcome(schema, structured, input) {
  let result;
  try {
    result = await structured.invoke(input);
  } catch (err) {
    assert.equal(err.status, 422, String(err));
    assert.equal(err.code, "MP_ERR_LLM_OUTPUT_INVALID", err.message);
    return "invalid-422";
  }
  const finish = result.raw.response_metadata.finish_reason ?? result.raw.response_metadata.status;
  if (finish === "length" || finish === "incomplete") return "length";
  assert.equal(result.parsingError, undefined, String(result.parsingError));
  assert.deepEqual(schema.parse(result.parsed), result.parsed);
  return "valid";
}

describe("LangChain.js against modelport", () => {
  let server;
  const options = () => ({ apiKey: "unused", maxRetries: 0, configuration: { baseURL: server.baseURL } });

  before(async () => {
    server = await startModelport("langchain");
  });

  after(async () => {
    await server?.stop();
  });

  it("OpenAIEmbeddings: documents and a query", async () => {
    const embeddings = new OpenAIEmbeddings({ ...options(), model: EMBED_MODEL });
    const docs = await embeddings.embedDocuments(["the model", "will serve", "x"]);
    assert.equal(docs.length, 3);
    const query = await embeddings.embedQuery("the model");
    assert.equal(query.length, docs[0].length);
    // The same text, the same vector.
    assert.ok(query.every((v, i) => Math.abs(v - docs[0][i]) < 1e-5));
  });

  it("errors: the openai SDK's error underneath, with status and code MP_ERR_*", async () => {
    const chat = new ChatOpenAI({ ...options(), model: "nope" });
    await assert.rejects(chat.invoke("hello"), (err) => {
      assert.equal(err.status, 404, String(err));
      assert.equal(err.code, "MP_ERR_MODEL_NOT_FOUND", String(err));
      return true;
    });
  });

  for (const [api, useResponsesApi] of [
    ["chat completions", false],
    ["the Responses API", true],
  ])
    describe(`ChatOpenAI over ${api}`, () => {
      for (const model of CHAT_MODELS)
        describe(model, () => {
          const chat = (extra = {}) => new ChatOpenAI({ ...options(), model, useResponsesApi, ...extra });

          it("invoke and stream: the same greedy text", async () => {
            const greedy = chat({ maxTokens: 10, temperature: 0 });
            const message = await greedy.invoke("hello");
            // Chat completions give a string, the Responses API content parts: `text` joins them.
            assert.ok(message.text.length > 0);
            assert.equal(message.usage_metadata.output_tokens, 10);
            let streamed = "";
            for await (const chunk of await greedy.stream("hello")) streamed += chunk.text;
            assert.equal(streamed, message.text);
          });

          it("bindTools: tool_calls with parsed arguments that pass the schema", async () => {
            // @langchain/openai 1.6.0 leaves a `tool_choice` of "required" out of Responses API
            // requests (a named tool goes through), so there the one tool is named.
            const bound = chat({ maxTokens: 300 }).bindTools(
              [{ name: "weather", description: "The weather in a city", schema: city }],
              { tool_choice: useResponsesApi ? "weather" : "required" },
            );
            const message = await bound.invoke("What is the weather in Paris?");
            assert.ok(message.tool_calls.length >= 1, JSON.stringify(message));
            for (const call of message.tool_calls) {
              assert.equal(call.name, "weather");
              assert.ok(call.id.length > 0);
              assert.deepEqual(city.parse(call.args), call.args);
            }
          });

          it("withStructuredOutput, by JSON schema and by function calling: objects that pass the schema", async () => {
            for (const method of ["jsonSchema", "functionCalling"])
              await untilValid((seed) => {
                const sampling =
                  seed === undefined ? { temperature: 0 } : { temperature: 1, modelKwargs: { seed } };
                const structured = chat({ maxTokens: 300, ...sampling }).withStructuredOutput(person, {
                  name: "person",
                  method,
                  includeRaw: true,
                });
                return outcome(person, structured, "Describe a person.");
              });
          });
        });
    });
});
