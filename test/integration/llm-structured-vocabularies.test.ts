// Structured answers on GGUFs with different tokenizers, through a listening server and the
// official `openai` client: tiny-llama (SentencePiece, `{` and `"` only as byte-fallback tokens),
// bpe-llama (byte-level BPE as GPT-2 and Llama 3 write it) and sparse-llama (byte-level BPE
// where `{`, `}` and `"` exist only inside longer tokens). Every schema of the corpus
// (test/fixtures/schemas: zod 4, the openai SDK, pydantic 2, OpenAI's docs) is accepted, and
// every answer either validates against the schema as the client wrote it (checked by the
// test's own Ajv), or ends cut by max_tokens ("length"), or is a 422 MP_ERR_LLM_OUTPUT_INVALID:
// never a 200 "stop" that breaks its schema, never a crash. Also: a -100 logit_bias on the one
// token that writes `"`, the client's stop strings, a constraint only validation holds (retried,
// then 422), and a zod schema with an integer range through the SDK's own parse helper.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import { buildBpeLlamas } from "../../examples/build/models/bpe-llama.js";
import { writeLlamaArtifact } from "../../examples/build/models/tiny-llama.js";
import { clientValidator, errorsText, schemaCorpus } from "../fixtures/schema-corpus.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";

const MODELS = ["tiny-llama", "bpe-llama", "sparse-llama"] as const;
const messages = [{ role: "user" as const, content: "Fill in the form." }];
const corpus = schemaCorpus();

type Outcome = "valid" | "length" | "invalid-422";

describe("structured answers on three vocabularies, over the schema corpus", () => {
  let server: InProcessServer;
  let client: OpenAI;

  before(async () => {
    const dir = await testModels();
    for (const artifact of buildBpeLlamas()) await writeLlamaArtifact(dir, artifact);
    const file = join(dir, "vocabularies.yaml");
    writeFileSync(
      file,
      [
        "models:",
        ...MODELS.flatMap((name) => [
          `  - name: ${name}`,
          `    path: ${name}.gguf`,
          "    llm: { sequences: 2, contextSize: 2048 }",
        ]),
        "",
      ].join("\n"),
    );
    server = await startInProcess({ file });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });

  after(async () => {
    await server?.close();
  });

  /** Sends one structured request and says how it ended; fails the test on anything else. */
  async function outcome(
    model: string,
    schema: Record<string, unknown>,
    tool: boolean,
    extra: { temperature?: number; seed?: number; max_tokens?: number; stop?: string[] } = {},
  ): Promise<{ outcome: Outcome; text: string }> {
    const validate = clientValidator(schema);
    const request = {
      model,
      messages,
      max_tokens: 300,
      ...extra,
      ...(tool
        ? {
            tools: [{ type: "function" as const, function: { name: "fill", parameters: schema } }],
            tool_choice: "required" as const,
          }
        : {
            response_format: {
              type: "json_schema" as const,
              json_schema: { name: "form", schema, strict: true },
            },
          }),
    };
    let res: OpenAI.Chat.Completions.ChatCompletion;
    try {
      res = await client.chat.completions.create(request);
    } catch (err) {
      assert.ok(err instanceof OpenAI.APIError, String(err));
      assert.equal(err.status, 422, err.message);
      assert.equal(err.code, "MP_ERR_LLM_OUTPUT_INVALID", err.message);
      return { outcome: "invalid-422", text: err.message };
    }
    const choice = res.choices[0]!;
    if (choice.finish_reason === "length") return { outcome: "length", text: choice.message.content ?? "" };
    if (tool) {
      assert.equal(choice.finish_reason, "tool_calls", JSON.stringify(choice));
      const calls = choice.message.tool_calls as { function: { name: string; arguments: string } }[];
      assert.ok(calls.length > 0);
      for (const c of calls) {
        assert.equal(c.function.name, "fill");
        const args = JSON.parse(c.function.arguments);
        assert.ok(validate(args), `${c.function.arguments}: ${errorsText(validate)}`);
      }
      return { outcome: "valid", text: calls[0]!.function.arguments };
    }
    assert.equal(choice.finish_reason, "stop");
    const content = choice.message.content ?? "";
    const value = JSON.parse(content);
    assert.ok(validate(value), `${content}: ${errorsText(validate)}`);
    return { outcome: "valid", text: content };
  }

  it("accepts every schema of the corpus, as a response format and as a tool's parameters", async () => {
    assert.ok(corpus.length >= 50, `${corpus.length} schemas`);
    for (const { file, schema } of corpus)
      for (const tool of [false, true]) {
        const body = {
          model: "tiny-llama",
          messages,
          max_tokens: 1,
          ...(tool
            ? {
                tools: [{ type: "function", function: { name: "fill", parameters: schema } }],
                tool_choice: "required",
              }
            : {
                response_format: { type: "json_schema", json_schema: { name: "form", schema, strict: true } },
              }),
        };
        const res = await fetch(`${server.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        const answer = (await res.json()) as {
          choices?: { finish_reason: string }[];
          error?: { message: string };
        };
        assert.equal(
          res.status,
          200,
          `${file} (${tool ? "tool" : "response_format"}): ${answer.error?.message}`,
        );
        assert.equal(answer.choices?.[0]?.finish_reason, "length");
      }
  });

  it("answers over the corpus on each vocabulary validate, or end as length or 422, never as a 200 stop that breaks the schema", async () => {
    const counts: Record<string, Record<Outcome, number>> = {};
    for (const [i, { schema }] of corpus.entries()) {
      const model = MODELS[i % MODELS.length]!;
      const { outcome: o } = await outcome(model, schema, i % 2 === 1, { temperature: 1, seed: i });
      counts[model] ??= { valid: 0, length: 0, "invalid-422": 0 };
      counts[model][o]++;
    }
    console.log(JSON.stringify(counts));
    // The grammar makes most answers of the two vocabularies that can write JSON's punctuation
    // alone valid; sparse-llama's are generated freely (its grammar would reach dead ends).
    for (const model of ["tiny-llama", "bpe-llama"]) {
      const c = counts[model]!;
      assert.ok(c.valid >= (c.valid + c.length + c["invalid-422"]) / 2, `${model}: ${JSON.stringify(c)}`);
    }
  });

  it('sparse-llama, whose vocabulary writes `{`, `}` and `"` only inside longer tokens: no crash, no 200 stop with a broken answer, greedy or sampled', async () => {
    const schema = corpus.find((c) => c.file === "openai-docs-get-weather.json")!.schema;
    const seen = new Set<Outcome>();
    for (const temperature of [0, 1])
      for (const tool of [false, true])
        seen.add(
          (await outcome("sparse-llama", schema, tool, { temperature, seed: 3, max_tokens: 120 })).outcome,
        );
    assert.ok(seen.size > 0);
    // The server still answers.
    const plain = await client.chat.completions.create({ model: "sparse-llama", messages, max_tokens: 3 });
    assert.equal(plain.choices[0]!.finish_reason, "length");
  });

  it('a -100 logit_bias on the only token that writes `"` neither crashes nor hangs the server; the answer still validates', async () => {
    // tiny-llama writes `"` only with its byte token <0x22>: 5 control tokens, then bytes 0x00…
    const quote = 5 + 0x22;
    const schema = {
      type: "object",
      properties: { name: { type: "string", maxLength: 12 } },
      required: ["name"],
      additionalProperties: false,
    };
    for (const temperature of [0, 1]) {
      const res = await client.chat.completions.create({
        model: "tiny-llama",
        messages,
        max_tokens: 100,
        temperature,
        seed: 1,
        logit_bias: { [quote]: -100 },
        response_format: { type: "json_schema", json_schema: { name: "n", schema } },
      });
      assert.equal(res.choices[0]!.finish_reason, "stop");
      assert.equal(typeof JSON.parse(res.choices[0]!.message.content!).name, "string");
    }
  });

  it("the client's stop strings do not cut a structured answer", async () => {
    const schema = {
      type: "object",
      properties: { a: { enum: [1, 2, 3] }, b: { type: "boolean" } },
      required: ["a", "b"],
      additionalProperties: false,
    };
    const { outcome: o, text } = await outcome("tiny-llama", schema, false, {
      stop: [",", "}"],
      max_tokens: 60,
    });
    assert.equal(o, "valid", text);
    assert.match(text, /,/);
  });

  it("a constraint only validation can hold is retried within max_tokens, then a 422, streamed or not", async () => {
    // No integer from 1 to 6 is a multiple of 7: every attempt fails validation.
    const schema = {
      type: "object",
      properties: { n: { type: "integer", minimum: 1, maximum: 6, multipleOf: 7 } },
      required: ["n"],
      additionalProperties: false,
    };
    const before = server.logs.filter(
      (l) => l.msg === "structured answer did not validate; generating it again",
    ).length;
    const { outcome: o, text } = await outcome("tiny-llama", schema, false, { max_tokens: 100 });
    assert.equal(o, "invalid-422");
    assert.match(text, /at most 3 attempts/);
    assert.match(text, /multiple of 7/);
    const retries =
      server.logs.filter((l) => l.msg === "structured answer did not validate; generating it again").length -
      before;
    assert.equal(retries, 2);
    // Streamed: nothing was sent before the answer validated, so the 422 is the HTTP status.
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "tiny-llama",
        messages,
        max_tokens: 100,
        stream: true,
        response_format: { type: "json_schema", json_schema: { name: "n", schema } },
      }),
    });
    assert.equal(res.status, 422);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, "MP_ERR_LLM_OUTPUT_INVALID");
  });

  it("a zod schema with an integer range goes through the openai SDK's parse helper", async () => {
    const Person = z.object({ name: z.string().max(20), age: z.number().int().min(0).max(120) });
    const request = { messages, max_tokens: 200, response_format: zodResponseFormat(Person, "person") };
    const res = await client.chat.completions.parse({ model: "tiny-llama", ...request });
    const parsed = res.choices[0]!.message.parsed;
    assert.ok(parsed, res.choices[0]!.message.content ?? "");
    assert.ok(parsed.age >= 0 && parsed.age <= 120 && Number.isInteger(parsed.age));
    // A byte-level vocabulary can write bytes that are not UTF-8 (they decode to U+FFFD, which
    // the grammar cannot see): such an answer fails validation and is retried, then is a 422.
    try {
      const bpe = await client.chat.completions.parse({ model: "bpe-llama", ...request });
      assert.ok(Person.safeParse(bpe.choices[0]!.message.parsed).success);
    } catch (err) {
      assert.ok(err instanceof OpenAI.APIError && err.code === "MP_ERR_LLM_OUTPUT_INVALID", String(err));
    }
  });
});
