// Fuzzes the OpenAI-compatible routes of a real `modelport serve` process with the example
// language models (tiny-llama for chat, completions and responses, tiny-embed for embeddings): mutated
// bodies and JSON text get a 2xx or a 4xx in OpenAI's error shape with an MP_ERR_* code.
// Generation is kept short (max_tokens 1 to 3) so that thousands of cases stay cheap.
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  chatBody,
  completionBody,
  embeddingBody,
  encode,
  type Json,
  keepShort,
  mutated,
  mutatedText,
  responsesBody,
} from "./arbitraries.js";
import { check, checkAnswer, postJson, useFuzzServer } from "./harness.js";

const CHAT = "/v1/chat/completions";
const COMPLETIONS = "/v1/completions";
const EMBEDDINGS = "/v1/embeddings";
const RESPONSES = "/v1/responses";

async function warm(url: string): Promise<void> {
  await postJson(url, CHAT, {
    model: "tiny-llama",
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 2,
  });
  await postJson(url, COMPLETIONS, { model: "tiny-llama", prompt: "hi", max_tokens: 2 });
  await postJson(url, EMBEDDINGS, { model: "tiny-embed", input: ["a cat", "a dog"] });
}

const server = useFuzzServer({ llm: true, warm });

// Mutations nest values up to 20,000 deep; limits.maxJsonDepth refuses those bodies before
// parsing (a parameter nested ~5,000 deep once got a 500: its refusal quoted it with
// JSON.stringify, which overflowed the stack).
function fuzzRoute(path: string, valid: fc.Arbitrary<Json>) {
  return fc.asyncProperty(mutated(valid).map(keepShort), async (body) => {
    const res = await postJson(server.url, path, body);
    checkAnswer(res, "openai", { what: `${path} ${encode(body).slice(0, 300)}` });
  });
}

describe("OpenAI-compatible routes", () => {
  it("chat completions: mutated bodies get 2xx or a coded 4xx in OpenAI's shape", () =>
    check("chat", fuzzRoute(CHAT, chatBody)));

  it("completions: mutated bodies get 2xx or a coded 4xx in OpenAI's shape", () =>
    check("completions", fuzzRoute(COMPLETIONS, completionBody)));

  it("responses: valid and mutated bodies get 2xx or a coded 4xx in OpenAI's shape", () =>
    check("responses", fuzzRoute(RESPONSES, responsesBody)));

  it("embeddings: valid and mutated bodies get 2xx or a coded 4xx in OpenAI's shape", () =>
    check(
      "embeddings",
      fc.asyncProperty(fc.oneof(embeddingBody, mutated(embeddingBody)), async (body) => {
        const res = await postJson(server.url, EMBEDDINGS, body);
        checkAnswer(res, "openai", { what: `${EMBEDDINGS} ${encode(body).slice(0, 300)}` });
      }),
    ));

  it("any route: mutated JSON text and models swapped between routes get a coded 4xx", () =>
    check(
      "openaiInvalid",
      fc.asyncProperty(
        fc.constantFrom(CHAT, COMPLETIONS, EMBEDDINGS, RESPONSES),
        fc.oneof(
          mutatedText(fc.oneof(chatBody, completionBody, embeddingBody).map(keepShort)),
          fc
            .tuple(
              fc.oneof(chatBody, completionBody, embeddingBody),
              fc.constantFrom("tiny-embed", "tiny-llama", "tree", "nope", "", "../tiny-llama"),
            )
            .map(([b, model]) => encode({ ...(b as Record<string, Json>), model })),
        ),
        async (path, body) => {
          const res = await postJson(server.url, path, body);
          checkAnswer(res, "openai", { what: `${path} ${body.slice(0, 300)}` });
        },
      ),
    ));
});

server.finalCheck();
