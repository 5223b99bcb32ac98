// Real client libraries, unmodified, against a listening modelport serving tiny-llama (a GGUF
// with random weights) and tiny-embed: the Vercel AI SDK (`ai` with @ai-sdk/openai-compatible)
// and LangChain.js (@langchain/openai). They need Node.js 22 or later, so this file runs on the
// Node 24 binary installed with them (test/clients/package.json), while the server runs as a
// child process on the project's Node (MODELPORT_SERVER_NODE, set by dist/test/run.js).
// Every structured answer must parse and validate through the client's own zod schema: the
// server generates it under a grammar, so this holds even for word salad.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { embedMany, generateObject, generateText, Output, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";
import { testModels } from "../../dist/test/helpers/models.js";
import { startChild, waitReady } from "../../dist/test/helpers/server.js";

const person = z.object({
  name: z.string().max(24),
  age: z.number().int(),
  tags: z.array(z.enum(["a", "b", "c"])).max(3),
  nickname: z.string().max(8).nullable(),
});

describe("client libraries against modelport", () => {
  let server;
  let baseURL;

  before(async () => {
    const dir = await testModels();
    const file = join(dir, "clients.yaml");
    writeFileSync(
      file,
      [
        "models:",
        "  - name: tiny-llama",
        "    path: tiny-llama.gguf",
        "    llm: { sequences: 2, contextSize: 2048 }",
        "  - name: tiny-embed",
        "    path: tiny-embed",
        "",
      ].join("\n"),
    );
    server = await startChild(["-c", file]);
    const ready = await waitReady(server.url, 60_000);
    assert.equal(ready.status, 200, server.output().slice(-2000));
    baseURL = `${server.url}/v1`;
  });

  after(async () => {
    await server?.stop("SIGKILL");
  });

  describe("Vercel AI SDK (@ai-sdk/openai-compatible)", () => {
    const provider = () =>
      createOpenAICompatible({
        name: "modelport",
        baseURL,
        supportsStructuredOutputs: true,
        includeUsage: true,
      });

    it("generateText and streamText: the same greedy text, with usage", async () => {
      const model = provider().chatModel("tiny-llama");
      const text = await generateText({ model, prompt: "hello", maxOutputTokens: 10, temperature: 0 });
      assert.equal(text.finishReason, "length");
      assert.equal(text.usage.outputTokens, 10);
      assert.ok(text.usage.inputTokens > 0);
      const stream = streamText({ model, prompt: "hello", maxOutputTokens: 10, temperature: 0 });
      let streamed = "";
      for await (const part of stream.textStream) streamed += part;
      assert.equal(streamed, text.text);
      assert.equal(await stream.finishReason, "length");
    });

    it("generateObject and generateText with Output.object: objects that pass the zod schema", async () => {
      const model = provider().chatModel("tiny-llama");
      for (let seed = 1; seed <= 4; seed++) {
        const { object } = await generateObject({
          model,
          schema: person,
          prompt: "Describe a person.",
          maxOutputTokens: 300,
          temperature: 1,
          seed,
        });
        assert.ok(person.safeParse(object).success, JSON.stringify(object));
      }
      const { output } = await generateText({
        model,
        output: Output.object({ schema: person }),
        prompt: "Describe a person.",
        maxOutputTokens: 300,
      });
      assert.ok(person.safeParse(output).success, JSON.stringify(output));
    });

    it("tools over several steps: each call's input passes its schema, results go back to the model", async () => {
      const model = provider().chatModel("tiny-llama");
      const seen = [];
      const result = await generateText({
        model,
        prompt: "What is the weather in Paris?",
        maxOutputTokens: 300,
        toolChoice: "required",
        tools: {
          weather: tool({
            description: "The weather in a city",
            inputSchema: z.object({ city: z.string().max(20), unit: z.enum(["c", "f"]) }),
            execute: async (input) => {
              seen.push(input);
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
      assert.equal(seen.length, 2);
      for (const input of seen) assert.ok(["c", "f"].includes(input.unit), JSON.stringify(input));
      // The second step's request carried the first call and its result.
      const body = result.steps[1].request.body;
      const sent = (typeof body === "string" ? JSON.parse(body) : body).messages;
      assert.equal(sent.at(-1).role, "tool");
      assert.equal(sent.at(-2).tool_calls.length >= 1, true);
    });

    it("embedMany through the provider's embedding model", async () => {
      const { embeddings, usage } = await embedMany({
        model: provider().textEmbeddingModel("tiny-embed"),
        values: ["the model", "will serve"],
      });
      assert.equal(embeddings.length, 2);
      assert.equal(embeddings[0].length, embeddings[1].length);
      assert.ok(usage.tokens > 0);
    });
  });

  describe("LangChain.js (@langchain/openai)", () => {
    const options = () => ({ apiKey: "unused", configuration: { baseURL } });

    it("ChatOpenAI invoke and stream: the same greedy text", async () => {
      const chat = new ChatOpenAI({ ...options(), model: "tiny-llama", maxTokens: 10, temperature: 0 });
      const message = await chat.invoke("hello");
      let streamed = "";
      for await (const chunk of await chat.stream("hello")) streamed += chunk.content;
      assert.equal(typeof message.content, "string");
      assert.equal(streamed, message.content);
    });

    it("bindTools: tool_calls with parsed arguments that pass the schema", async () => {
      const chat = new ChatOpenAI({ ...options(), model: "tiny-llama", maxTokens: 300 });
      const city = z.object({ city: z.string().max(20) });
      const bound = chat.bindTools(
        [{ name: "weather", description: "The weather in a city", schema: city }],
        { tool_choice: "required" },
      );
      const message = await bound.invoke("What is the weather in Paris?");
      assert.equal(message.tool_calls.length >= 1, true);
      assert.equal(message.tool_calls[0].name, "weather");
      assert.ok(city.safeParse(message.tool_calls[0].args).success, JSON.stringify(message.tool_calls));
    });

    it("withStructuredOutput, by JSON schema and by function calling: objects that pass the schema", async () => {
      const chat = new ChatOpenAI({ ...options(), model: "tiny-llama", maxTokens: 300 });
      for (const method of ["jsonSchema", "functionCalling"]) {
        const structured = chat.withStructuredOutput(person, { name: "person", method });
        const value = await structured.invoke("Describe a person.");
        assert.ok(person.safeParse(value).success, `${method}: ${JSON.stringify(value)}`);
      }
    });

    it("OpenAIEmbeddings: documents and a query", async () => {
      const embeddings = new OpenAIEmbeddings({ ...options(), model: "tiny-embed" });
      const docs = await embeddings.embedDocuments(["the model", "will serve", "x"]);
      assert.equal(docs.length, 3);
      const query = await embeddings.embedQuery("the model");
      assert.equal(query.length, docs[0].length);
      // The same text, the same vector.
      assert.ok(query.every((v, i) => Math.abs(v - docs[0][i]) < 1e-5));
    });
  });
});
