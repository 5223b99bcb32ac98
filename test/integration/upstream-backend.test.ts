// The upstream backend against a real local OpenAI-compatible stub server: readiness probe,
// plain and streamed chat, retries on 429 (Retry-After honoured), 5xx and dropped connections,
// the API key from its environment variable, and a clear error when the upstream keeps failing;
// then the same through a real listening server with the official openai client.

import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import { pino } from "pino";
import { stringify } from "yaml";
import { UpstreamLanguageModel } from "../../src/backends/upstream/upstream-language-model.js";
import { CancelHandle } from "../../src/cancel.js";
import { parsePrometheus } from "../../src/cli/cost.js";
import {
  type LanguageModelConfig,
  limitsSchema,
  llmSchema,
  upstreamSchema,
} from "../../src/config/schema.js";
import { ModelportError } from "../../src/errors.js";
import { type OpenAiStub, startOpenAiStub } from "../helpers/openai-stub.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";

const log = pino({ level: "silent" });
const KEY_ENV = "MODELPORT_TEST_UPSTREAM_KEY";

function config(url: string, extra: Partial<LanguageModelConfig["upstream"]> = {}): LanguageModelConfig {
  return {
    name: "hosted",
    backend: "upstream",
    path: url,
    version: "1",
    threads: 1,
    limits: limitsSchema.parse({}),
    llm: llmSchema.parse({}),
    options: {},
    pricePerMillionInputTokens: 1,
    pricePerMillionOutputTokens: 2,
    upstream: upstreamSchema.parse({ url, apiKeyEnv: KEY_ENV, model: "stub-model", backoffMs: 10, ...extra }),
  };
}

describe("upstream backend (real HTTP stub)", () => {
  let stub: OpenAiStub;
  let model: UpstreamLanguageModel;
  const env = { [KEY_ENV]: "sk-test-0123456789" };

  before(async () => {
    stub = await startOpenAiStub();
    model = new UpstreamLanguageModel(config(stub.url), log, { env });
    await model.start();
  });
  after(async () => {
    await model.close();
    await stub.close();
  });

  it("is ready after GET /models answered, and sends the key from the environment", () => {
    assert.equal(model.status().ready, true, model.status().reason);
    const probe = stub.requests.find((r) => r.path === "/v1/models");
    assert.equal(probe?.headers.authorization, "Bearer sk-test-0123456789");
  });

  it("answers a chat request without streaming, with the upstream's usage", async () => {
    const r = await model.generate({ messages: [{ role: "user", content: "hi" }], maxTokens: 8 });
    assert.equal(r.text, "Hello from the stub.");
    assert.equal(r.finishReason, "stop");
    assert.deepEqual(r.usage, { promptTokens: 7, completionTokens: 5 });
    const sent = stub.requests.at(-1)!;
    assert.equal(sent.body?.model, "stub-model");
    assert.equal(sent.body?.max_tokens, 8);
    assert.equal(sent.headers.authorization, "Bearer sk-test-0123456789");
  });

  it("retries a 429 after the Retry-After the upstream asked for", async () => {
    stub.failNext("/v1/chat/completions", { status: 429, retryAfter: "1" });
    const before = stub.requests.length;
    const r = await model.generate({ messages: [{ role: "user", content: "hi" }] });
    assert.equal(r.text, "Hello from the stub.");
    const attempts = stub.requests.slice(before);
    assert.equal(attempts.length, 2);
    // backoffMs is 10 ms: a gap of at least ~1 s shows the header won.
    assert.ok(attempts[1]!.at - attempts[0]!.at >= 950, `${attempts[1]!.at - attempts[0]!.at} ms`);
  });

  it("retries 5xx answers and dropped connections", async () => {
    stub.failNext("/v1/chat/completions", { status: 503 }, { status: "drop" }, { status: 500 });
    const before = stub.requests.length;
    const r = await model.generate({ messages: [{ role: "user", content: "hi" }] });
    assert.equal(r.text, "Hello from the stub.");
    assert.equal(stub.requests.length - before, 4);
  });

  it("passes a stream through chunk by chunk, as deltas", async () => {
    const deltas: string[] = [];
    const r = await model.generate(
      { messages: [{ role: "user", content: "hi" }] },
      { onDelta: (d) => deltas.push(d) },
    );
    assert.deepEqual(deltas, ["Hello", " from", " the", " stub", "."]);
    assert.equal(r.text, deltas.join(""));
    assert.deepEqual(r.usage, { promptTokens: 7, completionTokens: 5 });
    assert.equal(stub.requests.at(-1)!.body?.stream, true);
  });

  it("stops the upstream call when the client goes away: MP_ERR_REQUEST_CANCELED", async () => {
    stub.streamGapMs = 300;
    const abort = new CancelHandle();
    const deltas: string[] = [];
    try {
      await assert.rejects(
        model.generate(
          { messages: [{ role: "user", content: "hi" }] },
          {
            cancel: abort,
            onDelta: (d) => {
              deltas.push(d);
              abort.cancel();
            },
          },
        ),
        { code: "MP_ERR_REQUEST_CANCELED" },
      );
    } finally {
      stub.streamGapMs = 0;
    }
    assert.ok(deltas.length >= 1 && deltas.length < 5, `${deltas.length} deltas`);
    assert.equal(model.status().concurrency.active, 0);
  });

  it("streams completions too", async () => {
    const deltas: string[] = [];
    const r = await model.generate({ prompt: "Say" }, { onDelta: (d) => deltas.push(d) });
    assert.equal(deltas.length, 5);
    assert.equal(r.text, "Hello from the stub.");
  });

  it("forwards embeddings in input order: each vector is the one for that input sent alone", async () => {
    const inputs = ["abc", "hello", "zzz top"];
    const r = await model.embed(inputs);
    assert.equal(r.vectors.length, inputs.length);
    assert.equal(r.promptTokens, 9);
    for (const [i, text] of inputs.entries()) {
      const alone = await model.embed([text]);
      assert.deepEqual(Array.from(r.vectors[i]!), Array.from(alone.vectors[0]!), `input ${i}`);
    }
    // The inputs embed differently, so a swapped order could not pass.
    assert.equal(new Set(r.vectors.map((v) => JSON.stringify(Array.from(v)))).size, inputs.length);
  });

  it("gives up with MP_ERR_LLM_UPSTREAM_FAILED when the upstream keeps failing", async () => {
    const failures = Array.from({ length: 4 }, () => ({ status: 502 as const, message: "bad gateway" }));
    stub.failNext("/v1/chat/completions", ...failures);
    await assert.rejects(
      model.generate({ messages: [{ role: "user", content: "hi" }] }),
      (err: ModelportError) => {
        assert.ok(err instanceof ModelportError);
        assert.equal(err.code, "MP_ERR_LLM_UPSTREAM_FAILED");
        assert.match(err.message, /after 4 attempt\(s\)/);
        assert.match(err.message, /HTTP 502: bad gateway/);
        assert.equal(err.details?.attempts, 4);
        return true;
      },
    );
  });

  it("does not retry a 4xx the request caused: MP_ERR_LLM_UPSTREAM_REJECTED", async () => {
    stub.failNext("/v1/chat/completions", { status: 401, message: "invalid api key" });
    const before = stub.requests.length;
    await assert.rejects(
      model.generate({ messages: [{ role: "user", content: "hi" }] }),
      (err: ModelportError) => {
        assert.equal(err.code, "MP_ERR_LLM_UPSTREAM_REJECTED");
        assert.match(err.message, /invalid api key/);
        assert.match(err.message, new RegExp(KEY_ENV));
        return true;
      },
    );
    assert.equal(stub.requests.length - before, 1);
  });

  it("counts tokens at the configured prices", () => {
    const c = model.cost();
    assert.ok(c.requests >= 6);
    assert.ok(c.inputTokens > 0 && c.outputTokens > 0);
    const expected = (c.inputTokens * 1 + c.outputTokens * 2) / 1e6;
    assert.ok(Math.abs(c.dollars - expected) < 1e-12);
  });
});

describe("upstream backend readiness", () => {
  it("says why in its status when the upstream has no GET /models", async () => {
    const stub = await startOpenAiStub();
    stub.hasModelsRoute = false;
    const model = new UpstreamLanguageModel(config(stub.url), log, { env: { [KEY_ENV]: "sk-x" } });
    await model.start();
    const s = model.status();
    assert.equal(s.ready, false);
    assert.equal(s.code, "MP_ERR_LLM_UPSTREAM_FAILED");
    assert.match(s.reason!, /no GET \/models route/);
    await assert.rejects(model.generate({ prompt: "x" }), { code: "MP_ERR_MODEL_NOT_READY" });
    await model.close();
    await stub.close();
  });

  it("is not ready when the key's environment variable is unset", async () => {
    const stub = await startOpenAiStub();
    const model = new UpstreamLanguageModel(config(stub.url), log, { env: {} });
    await model.start();
    assert.equal(model.status().ready, false);
    assert.match(model.status().reason!, new RegExp(`${KEY_ENV}.*unset or empty`));
    await model.close();
    await stub.close();
  });
});

describe("upstream model through a real server (openai client)", () => {
  let stub: OpenAiStub;
  let server: InProcessServer;
  let client: OpenAI;

  before(async () => {
    stub = await startOpenAiStub();
    stub.streamGapMs = 20;
    process.env[KEY_ENV] = "sk-through-server-7";
    const dir = mkdtempSync(join(tmpdir(), "modelport-upstream-"));
    const file = join(dir, "modelport.yaml");
    writeFileSync(
      file,
      stringify({
        server: { logLevel: "warn" },
        models: [
          {
            name: "hosted",
            backend: "upstream",
            upstream: { url: stub.url, apiKeyEnv: KEY_ENV, model: "stub-model", backoffMs: 10, retries: 2 },
            pricePerMillionInputTokens: 1,
            pricePerMillionOutputTokens: 2,
          },
        ],
      }),
    );
    server = await startInProcess({ file });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  after(async () => {
    await server?.close();
    await stub?.close();
    delete process.env[KEY_ENV];
  });

  it("is ready (GET /readyz) after its probe", async () => {
    const res = await fetch(`${server.url}/readyz`);
    assert.equal(res.status, 200, await res.text());
  });

  it("answers chat without streaming", async () => {
    const r = await client.chat.completions.create({
      model: "hosted",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(r.choices[0]!.message.content, "Hello from the stub.");
    assert.equal(r.usage?.prompt_tokens, 7);
    assert.equal(stub.requests.at(-1)!.headers.authorization, "Bearer sk-through-server-7");
  });

  it("passes a stream through chunk by chunk", async () => {
    const stream = await client.chat.completions.create({
      model: "hosted",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    const pieces: string[] = [];
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta?.content;
      if (d) pieces.push(d);
    }
    assert.deepEqual(pieces, ["Hello", " from", " the", " stub", "."]);
  });

  it("retries a 503 from the upstream and still answers", async () => {
    stub.failNext("/v1/chat/completions", { status: 503 });
    const r = await client.chat.completions.create({
      model: "hosted",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(r.choices[0]!.message.content, "Hello from the stub.");
  });

  it("an upstream that keeps failing gives 502 MP_ERR_LLM_UPSTREAM_FAILED", async () => {
    stub.failNext("/v1/chat/completions", { status: 500 }, { status: 500 }, { status: 500 });
    await assert.rejects(
      client.chat.completions.create({ model: "hosted", messages: [{ role: "user", content: "hi" }] }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError);
        assert.equal(err.status, 502);
        assert.equal(err.code, "MP_ERR_LLM_UPSTREAM_FAILED");
        assert.match(err.message, /after 3 attempt/);
        return true;
      },
    );
  });

  it("counts its cost in tokens", async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    const dollars = parsePrometheus(text).find(
      (s) => s.name === "modelport_cost_dollars_total" && s.labels.model === "hosted",
    );
    // 3 answered calls × (7 prompt tokens × $1 + 5 completion tokens × $2) per million.
    assert.ok(dollars && Math.abs(dollars.value - (3 * (7 + 10)) / 1e6) < 1e-12, JSON.stringify(dollars));
  });
});
