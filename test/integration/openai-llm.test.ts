// The OpenAI-compatible routes end to end: a real listening server serving the real tiny-llama
// GGUF through node-llama-cpp (no mocks), spoken to with the official `openai` client.
// Assertions are about order and content, never about how fast this machine is.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import type { LlmGoldenFile } from "../../src/lifecycle/text-golden.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";

describe("OpenAI-compatible routes on llama.cpp", () => {
  let server: InProcessServer;
  let client: OpenAI;
  let golden: LlmGoldenFile;

  before(async () => {
    const dir = await testModels();
    golden = JSON.parse(readFileSync(join(dir, "tiny-llama.golden.json"), "utf8")) as LlmGoldenFile;
    const file = join(dir, "openai-llm.yaml");
    writeFileSync(
      file,
      [
        "models:",
        "  - name: churn-tree",
        "    path: churn-tree.onnx",
        "  - name: tiny-llama",
        "    path: tiny-llama.gguf",
        "    llm: { sequences: 2, maxWaiting: 4, contextSize: 2048 }",
        // One sequence and one place in line: for the disconnect and overflow cases.
        "  - name: tiny-llama-1",
        "    path: tiny-llama.gguf",
        "    llm: { sequences: 1, maxWaiting: 1, contextSize: 8192 }",
        // The same model without a prefix cache: its answers are what the cache must not change.
        "  - name: tiny-llama-fresh",
        "    path: tiny-llama.gguf",
        "    llm: { sequences: 2, maxWaiting: 4, contextSize: 2048, prefixCache: false }",
        "",
      ].join("\n"),
    );
    server = await startInProcess({ file });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });

  after(() => server.close());

  it("is ready once the golden prompt gives the stored greedy text", async () => {
    const res = await fetch(`${server.url}/readyz`);
    const body = (await res.json()) as { ready: boolean; models: Record<string, { ready: boolean }> };
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.models["tiny-llama"]?.ready, true);
    assert.equal(body.models["tiny-llama-1"]?.ready, true);
  });

  it("lists every served model, tensor and language, in the OpenAI shape and keeps `models`", async () => {
    const list = await client.models.list();
    const ids = list.data.map((m) => m.id).sort();
    assert.deepEqual(ids, ["churn-tree", "tiny-llama", "tiny-llama-1", "tiny-llama-fresh"]);
    for (const m of list.data) {
      assert.equal(m.object, "model");
      assert.equal(typeof m.created, "number");
      assert.equal(m.owned_by, "modelport");
    }
    const raw = (await (await fetch(`${server.url}/v1/models`)).json()) as {
      object: string;
      models: { name: string }[];
    };
    assert.equal(raw.object, "list");
    assert.deepEqual(
      raw.models.map((m) => m.name),
      ["churn-tree"],
    );
    const one = (await (await fetch(`${server.url}/v1/models/tiny-llama`)).json()) as Record<string, unknown>;
    assert.equal(one.backend, "llama-cpp");
    assert.deepEqual(one.capabilities, { chat: true, completion: true, embeddings: false });
  });

  it("describes the OpenAI routes in /openapi.json and each language model on /docs", async () => {
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      paths: Record<string, { post: { requestBody: { content: { "application/json": { schema: any } } } } }>;
    };
    const model = (path: string) =>
      doc.paths[path]?.post.requestBody?.content["application/json"].schema.properties.model.enum;
    assert.deepEqual(model("/v1/chat/completions"), ["tiny-llama", "tiny-llama-1", "tiny-llama-fresh"]);
    assert.deepEqual(model("/v1/completions"), ["tiny-llama", "tiny-llama-1", "tiny-llama-fresh"]);
    // No served model embeds: the route is listed (every registered route is), without a model enum.
    assert.equal(model("/v1/embeddings"), undefined, "no served model embeds");
    assert.ok(doc.paths["/v1/embeddings"]?.post, "the registered route is in the document");
    // The body schema is the one that validates requests: what it allows is what the route takes.
    const chat = doc.paths["/v1/chat/completions"]!.post.requestBody.content["application/json"].schema;
    assert.deepEqual(chat.required, ["model", "messages"]);
    for (const field of [
      "tools",
      "tool_choice",
      "response_format",
      "logprobs",
      "top_logprobs",
      "logit_bias",
      "n",
    ])
      assert.ok(chat.properties[field], field);
    assert.deepEqual(chat.properties.temperature.anyOf[0], { type: "number", minimum: 0, maximum: 2 });
    assert.deepEqual(chat.properties.top_logprobs.anyOf[0], { type: "integer", minimum: 0, maximum: 20 });
    assert.ok(doc.paths["/v1/models/churn-tree/predict"]);
    const html = await (await fetch(`${server.url}/docs`)).text();
    assert.match(html, /<h2>tiny-llama <small>llama-cpp · chat, completion · ready/);
    assert.match(html, /\/v1\/chat\/completions/);
  });

  it("completes a prompt greedily: the golden text, the same on every run", async () => {
    const ask = () =>
      client.completions.create({
        model: "tiny-llama",
        prompt: golden.prompt!,
        max_tokens: golden.max_tokens,
      });
    const first = await ask();
    const second = await ask();
    assert.equal(first.object, "text_completion");
    assert.equal(first.choices[0]!.text, golden.text);
    assert.equal(second.choices[0]!.text, golden.text);
    assert.equal(first.choices[0]!.finish_reason, "length");
    assert.equal(first.usage?.completion_tokens, golden.max_tokens);
    assert.equal(first.usage?.prompt_tokens, 5); // BOS and four word pieces
  });

  it("streams a completion whose chunks add up to the non-streamed text", async () => {
    const stream = await client.completions.create({
      model: "tiny-llama",
      prompt: golden.prompt!,
      max_tokens: golden.max_tokens,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined | null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.choices[0]) {
        text += chunk.choices[0].text;
        finish = chunk.choices[0].finish_reason ?? finish;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, golden.text);
    assert.ok(chunks > 3, `expected one chunk per piece of text, got ${chunks}`);
    assert.equal(finish, "length");
    assert.equal(usage?.completion_tokens, golden.max_tokens);
  });

  it("answers a chat with and without streaming, the same text both ways", async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "system", content: "answer in words" },
      { role: "user", content: "hello world" },
    ];
    const full = await client.chat.completions.create({ model: "tiny-llama", messages, max_tokens: 10 });
    assert.equal(full.object, "chat.completion");
    const text = full.choices[0]!.message.content ?? "";
    assert.ok(text.length > 0);
    assert.equal(full.choices[0]!.message.role, "assistant");
    assert.equal(full.choices[0]!.finish_reason, "length");
    assert.equal(full.usage?.completion_tokens, 10);

    const { data: stream, response } = await client.chat.completions
      .create(
        { model: "tiny-llama", messages, max_tokens: 10, stream: true },
        { headers: { "x-request-id": "chat-42" } },
      )
      .withResponse();
    assert.equal(response.headers.get("x-request-id"), "chat-42");
    assert.equal(response.headers.get("x-accel-buffering"), "no");
    assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
    let streamed = "";
    let role: string | undefined;
    let finish: string | null = null;
    for await (const chunk of stream) {
      assert.equal(chunk.object, "chat.completion.chunk");
      assert.equal(chunk.id, "chatcmpl-chat-42");
      role ??= chunk.choices[0]?.delta.role;
      streamed += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(role, "assistant");
    assert.equal(streamed, text);
    assert.equal(finish, "length");
  });

  it("stops at a stop sequence, even one across pieces, streamed or not; the stop is not in the answer", async () => {
    const words = golden.text.split(" ");
    // The end of one piece, the space, the start of the next: it crosses a piece boundary.
    const stop = `${words[1]!.slice(1)} ${words[2]!.slice(0, 1)}`;
    const expected = golden.text.slice(0, golden.text.indexOf(stop));
    const request = {
      model: "tiny-llama",
      prompt: golden.prompt!,
      max_tokens: golden.max_tokens,
      stop: [stop, "zzz"],
    };
    const res = await client.completions.create(request);
    assert.equal(res.choices[0]!.text, expected);
    assert.equal(res.choices[0]!.finish_reason, "stop");
    let streamed = "";
    let finish: string | null = null;
    for await (const chunk of await client.completions.create({ ...request, stream: true })) {
      streamed += chunk.choices[0]?.text ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(streamed, expected);
    assert.equal(finish, "stop");
  });

  it("samples with temperature and seed: the same seed repeats, other seeds and greedy differ", async () => {
    const ask = async (seed: number, temperature = 1.5) =>
      (
        await client.completions.create({
          model: "tiny-llama",
          prompt: " the",
          max_tokens: 40,
          temperature,
          top_p: 0.95,
          seed,
        })
      ).choices[0]!.text;
    const seven = await ask(7);
    assert.equal(await ask(7), seven, "the same seed gives the same text");
    // Ignoring temperature or seed would make these all equal (greedy text).
    const texts = [seven, await ask(8), await ask(9), await ask(10)];
    assert.equal(new Set(texts).size, texts.length, `each seed its own text: ${JSON.stringify(texts)}`);
    const greedy = await ask(7, 0);
    assert.ok(!texts.includes(greedy), "greedy (temperature 0) differs from every sampled text");
  });

  it("answers an unknown model with an OpenAI-shaped 404", async () => {
    await assert.rejects(
      client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "hi" }] }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.NotFoundError, String(err));
        assert.equal(err.status, 404);
        assert.equal(err.code, "MP_ERR_MODEL_NOT_FOUND");
        assert.equal(err.type, "invalid_request_error");
        assert.equal(err.param, "model");
        assert.match(err.message, /no language model named 'nope'/);
        return true;
      },
    );
  });

  it("n: independent choices at once, each seeded seed + index, streamed as the same choices", async () => {
    const request = { model: "tiny-llama", prompt: "hello", max_tokens: 12, temperature: 1, seed: 5, n: 3 };
    const res = await client.completions.create(request);
    assert.deepEqual(
      res.choices.map((c) => c.index),
      [0, 1, 2],
    );
    const texts = res.choices.map((c) => c.text);
    assert.ok(new Set(texts).size >= 2, `sampled choices differ: ${JSON.stringify(texts)}`);
    // Seeded: the same choices again, and choice 0 is the n = 1 answer with the same seed.
    assert.deepEqual(
      (await client.completions.create(request)).choices.map((c) => c.text),
      texts,
    );
    const single = await client.completions.create({ ...request, n: 1 });
    assert.equal(single.choices[0]!.text, texts[0]);
    // The prompt counted once, the completions summed.
    assert.equal(res.usage!.prompt_tokens, single.usage!.prompt_tokens);
    assert.equal(res.usage!.completion_tokens, 3 * 12);
    const streamed = ["", "", ""];
    const finished: (string | null)[] = [null, null, null];
    for await (const chunk of await client.completions.create({ ...request, stream: true })) {
      for (const c of chunk.choices) {
        streamed[c.index] += c.text;
        finished[c.index] = c.finish_reason ?? finished[c.index]!;
      }
    }
    assert.deepEqual(streamed, texts);
    assert.deepEqual(finished, ["length", "length", "length"]);
    // Chat too; more than llm.maxChoices is refused.
    const chat = await client.chat.completions.create({
      model: "tiny-llama",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
      n: 2,
    });
    assert.equal(chat.choices.length, 2);
    await assert.rejects(
      client.completions.create({ ...request, n: 9 }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && err.param === "n",
    );
  });

  it("prompts as token arrays and as several strings, and echo", async () => {
    const tokens = await client.completions.create({
      model: "tiny-llama",
      prompt: [5, 60, 70],
      max_tokens: 6,
    });
    assert.equal(tokens.choices[0]!.finish_reason, "length");
    assert.equal(tokens.usage!.prompt_tokens, 4); // the ids and the BOS in front
    const again = await client.completions.create({
      model: "tiny-llama",
      prompt: [[5, 60, 70]],
      max_tokens: 6,
    });
    assert.equal(again.choices[0]!.text, tokens.choices[0]!.text);
    await assert.rejects(
      client.completions.create({ model: "tiny-llama", prompt: [5, 10_000_000], max_tokens: 2 }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && /not in model/.test(err.message),
    );
    // Two prompts × n 2: choices 0-1 answer the first prompt, 2-3 the second (greedy: equal pairs).
    const two = await client.completions.create({
      model: "tiny-llama",
      prompt: ["hello", "world"],
      n: 2,
      max_tokens: 5,
    });
    const texts = two.choices.map((c) => c.text);
    const hello = (await client.completions.create({ model: "tiny-llama", prompt: "hello", max_tokens: 5 }))
      .choices[0]!.text;
    const world = (await client.completions.create({ model: "tiny-llama", prompt: "world", max_tokens: 5 }))
      .choices[0]!.text;
    assert.deepEqual(texts, [hello, hello, world, world]);
    // echo: the prompt, then the answer, streamed or not.
    const echoed = await client.completions.create({
      model: "tiny-llama",
      prompt: "hello",
      max_tokens: 5,
      echo: true,
    });
    assert.equal(echoed.choices[0]!.text, `hello${hello}`);
    let streamed = "";
    for await (const c of await client.completions.create({
      model: "tiny-llama",
      prompt: "hello",
      max_tokens: 5,
      echo: true,
      stream: true,
    }))
      streamed += c.choices[0]?.text ?? "";
    assert.equal(streamed, `hello${hello}`);
  });

  it("logit_bias: a token biased +100 is the only one generated; a bias outside the vocabulary is a 400", async () => {
    const only = async (token: number) =>
      (
        await client.completions.create({
          model: "tiny-llama",
          prompt: "hello",
          max_tokens: 4,
          logit_bias: { [token]: 100 },
        })
      ).choices[0]!.text;
    const [a, b] = [await only(300), await only(301)];
    for (const text of [a, b]) {
      const piece = text.slice(0, text.length / 4);
      assert.equal(text, piece.repeat(4), JSON.stringify(text));
    }
    assert.notEqual(a, b);
    await assert.rejects(
      client.completions.create({ model: "tiny-llama", prompt: "x", logit_bias: { 99999999: 5 } }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && err.param === "logit_bias",
    );
  });

  it("prefix cache: a chat growing turn by turn reuses its evaluated prefix, and answers as without the cache", async () => {
    const system = `You are a careful assistant. ${"Keep every answer short and plain. ".repeat(20)}`;
    const history: { role: "system" | "user" | "assistant"; content: string }[] = [
      { role: "system", content: system },
    ];
    const cached: number[] = [];
    for (const question of ["hello there", "and then?", "one more"]) {
      history.push({ role: "user", content: question });
      const request = { messages: history, max_tokens: 6 };
      const res = await client.chat.completions.create({ model: "tiny-llama", ...request });
      const fresh = await client.chat.completions.create({ model: "tiny-llama-fresh", ...request });
      // The cache changes how much is evaluated, never the answer.
      assert.equal(res.choices[0]!.message.content, fresh.choices[0]!.message.content);
      assert.equal(res.usage!.prompt_tokens, fresh.usage!.prompt_tokens);
      assert.equal(fresh.usage!.prompt_tokens_details, undefined);
      cached.push(res.usage!.prompt_tokens_details!.cached_tokens!);
      history.push({ role: "assistant", content: res.choices[0]!.message.content! });
    }
    // From the second turn on, at least the system prompt (hundreds of tokens) comes from the cache.
    assert.ok(cached[1]! > 200 && cached[2]! > cached[1]!, `cached tokens per turn: ${cached}`);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(
      metrics,
      /modelport_llm_prefix_cache_requests_total\{[^}]*model="tiny-llama"[^}]*result="hit"[^}]*\} [1-9]/,
    );
    assert.match(metrics, /modelport_llm_prompt_cached_tokens_total\{[^}]*model="tiny-llama"[^}]*\} [1-9]/);
  });

  it("logprobs: each generated token's, with the likeliest alternatives; greedy picks the likeliest", async () => {
    const chat = await client.chat.completions.create({
      model: "tiny-llama",
      messages: [{ role: "user", content: "hello" }],
      max_tokens: 5,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = chat.choices[0]!.logprobs!.content!;
    assert.equal(content.length, 5);
    for (const t of content) {
      assert.ok(t.logprob <= 0 && t.logprob > -9999, String(t.logprob));
      assert.equal(t.top_logprobs.length, 3);
      // Greedy: the chosen token is the likeliest one.
      assert.equal(t.top_logprobs[0]!.token, t.token);
      assert.ok(Math.abs(t.top_logprobs[0]!.logprob - t.logprob) < 1e-6);
      assert.ok(t.top_logprobs[1]!.logprob <= t.top_logprobs[0]!.logprob);
      assert.deepEqual(t.bytes, [...Buffer.from(t.token, "utf8")]);
    }
    assert.equal(
      content
        .map((t) => t.token)
        .join("")
        .trim(),
      chat.choices[0]!.message.content!.trim(),
    );
    // Streamed: the same figures, with the last chunk.
    let streamed: typeof content = [];
    for await (const chunk of await client.chat.completions.create({
      model: "tiny-llama",
      messages: [{ role: "user", content: "hello" }],
      max_tokens: 5,
      logprobs: true,
      top_logprobs: 3,
      stream: true,
    }))
      streamed = [...streamed, ...(chunk.choices[0]?.logprobs?.content ?? [])];
    assert.deepEqual(streamed, content);
    // Completions: OpenAI's legacy shape; the tokens spell the text.
    const completion = await client.completions.create({
      model: "tiny-llama",
      prompt: "hello",
      max_tokens: 6,
      logprobs: 2,
    });
    const lp = completion.choices[0]!.logprobs!;
    assert.equal(lp.tokens!.join(""), completion.choices[0]!.text);
    assert.equal(lp.token_logprobs!.length, 6);
    assert.ok(lp.top_logprobs!.every((m) => Object.keys(m).length <= 2));
    assert.deepEqual(
      lp.text_offset,
      lp.tokens!.map((_, i) => lp.tokens!.slice(0, i).join("").length),
    );
    await assert.rejects(
      client.chat.completions.create({
        model: "tiny-llama",
        messages: [{ role: "user", content: "x" }],
        logprobs: true,
        top_logprobs: 21,
      }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && err.param === "top_logprobs",
    );
  });

  it("refuses bad parameters with a 400 naming the field", async () => {
    await assert.rejects(
      client.completions.create({ model: "tiny-llama", prompt: "x", temperature: 9 }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError);
        assert.equal(err.code, "MP_ERR_REQUEST_INVALID");
        assert.equal(err.param, "temperature");
        return true;
      },
    );
    const raw = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    assert.equal(raw.status, 400);
    const body = (await raw.json()) as {
      error: { code: string; type: string; message: string; param: null };
    };
    assert.equal(body.error.code, "MP_ERR_REQUEST_MALFORMED_JSON");
    assert.equal(body.error.type, "invalid_request_error");
    assert.equal(body.error.param, null);
  });

  it("runs two streams at once on two sequences: their chunks interleave", async () => {
    const arrivals: string[] = [];
    const run = async (name: string, prompt: string) => {
      const stream = await client.completions.create({
        model: "tiny-llama",
        prompt,
        max_tokens: 400,
        stream: true,
      });
      let text = "";
      for await (const chunk of stream) {
        if (chunk.choices[0]?.text) {
          arrivals.push(name);
          text += chunk.choices[0].text;
        }
      }
      return text;
    };
    const [a, b] = await Promise.all([run("a", " the model"), run("b", " a cat")]);
    assert.ok(a.length > 0 && b.length > 0);
    // Both were in flight together: each one's first chunk came before the other's last.
    assert.ok(arrivals.indexOf("a") < arrivals.lastIndexOf("b"), "a started before b ended");
    assert.ok(arrivals.indexOf("b") < arrivals.lastIndexOf("a"), "b started before a ended");
    // And the greedy text does not depend on sharing the context with another sequence.
    const alone = await client.completions.create({
      model: "tiny-llama",
      prompt: " the model",
      max_tokens: 400,
    });
    assert.equal(alone.choices[0]!.text, a);
  });

  it("queues beyond the free sequences, refuses beyond the line with 503, and frees a sequence when its client leaves", async () => {
    // A long answer holds the only sequence of tiny-llama-1.
    const ac = new AbortController();
    const long = await client.completions.create(
      { model: "tiny-llama-1", prompt: " the", max_tokens: 8000, stream: true },
      { signal: ac.signal },
    );
    const iterator = long[Symbol.asyncIterator]();
    await iterator.next(); // generating now
    // The next request waits in line (maxWaiting 1)...
    const waiting = client.completions.create({
      model: "tiny-llama-1",
      prompt: golden.prompt!,
      max_tokens: golden.max_tokens,
    });
    await waitFor(async () => (await languageStatus("tiny-llama-1")).waiting === 1);
    // ...and one more is refused at once, retryably, in the OpenAI shape.
    const refused = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "tiny-llama-1", prompt: "x", max_tokens: 1 }),
    });
    assert.equal(refused.status, 503);
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    const body = (await refused.json()) as { error: { code: string; type: string } };
    assert.equal(body.error.code, "MP_ERR_MODEL_OVERLOADED");
    assert.equal(body.error.type, "rate_limit_error");
    // The long answer's client leaves: its generation stops and the waiting request gets the sequence.
    ac.abort();
    const res = await waiting;
    assert.equal(res.choices[0]!.text, golden.text);
    const canceled = server.logs.find(
      (l) => l.msg === "generation canceled: the client left; sequence freed",
    );
    assert.ok(canceled, "the server logged the cancellation");
    assert.ok((canceled.generated as number) < 8000, `stopped early (${String(canceled.generated)} tokens)`);
    await waitFor(async () => (await languageStatus("tiny-llama-1")).active === 0);
  });

  it("exports time to first token, token counts and sequence gauges per model", async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(
      text,
      /modelport_llm_time_to_first_token_seconds_count\{[^}]*model="tiny-llama"[^}]*\} [1-9]/,
    );
    assert.match(text, /modelport_llm_generated_tokens_total\{[^}]*model="tiny-llama"[^}]*\} [1-9]/);
    assert.match(text, /modelport_llm_generation_seconds_total\{[^}]*model="tiny-llama"/);
    assert.match(text, /modelport_llm_active_sequences\{[^}]*model="tiny-llama-1"[^}]*\} 0/);
    assert.match(text, /modelport_llm_waiting_requests\{[^}]*model="tiny-llama-1"[^}]*\} 0/);
  });

  async function languageStatus(name: string): Promise<{ active: number; waiting: number }> {
    const m = (await (await fetch(`${server.url}/v1/models/${name}`)).json()) as {
      concurrency: { active: number; waiting: number };
    };
    return m.concurrency;
  }
});

describe("llama-cpp readiness", () => {
  it("stays not ready, saying why, when the golden prompt no longer gives the stored text", async () => {
    const dir = await testModels();
    const golden = JSON.parse(readFileSync(join(dir, "tiny-llama.golden.json"), "utf8")) as LlmGoldenFile;
    const wrong = join(dir, "tiny-llama.wrong.golden.json");
    writeFileSync(wrong, JSON.stringify({ ...golden, text: `${golden.text} and more` }));
    const server = await startInProcess({
      modelPath: join(dir, "tiny-llama.gguf"),
      flags: { golden: wrong },
    });
    try {
      const res = await fetch(`${server.url}/readyz`);
      const body = (await res.json()) as {
        ready: boolean;
        reasons: string[];
        models: Record<string, { code?: string }>;
      };
      assert.equal(res.status, 503);
      assert.equal(body.models["tiny-llama"]?.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
      assert.match(body.reasons.join("\n"), /tiny-llama: golden check failed .*expected ".* and more"/);
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
      await assert.rejects(
        client.completions.create({ model: "tiny-llama", prompt: "x" }),
        (err: unknown) => {
          assert.ok(err instanceof OpenAI.APIError);
          assert.equal(err.status, 503);
          assert.equal(err.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
          return true;
        },
      );
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(metrics, /modelport_model_ready\{[^}]*model="tiny-llama"[^}]*\} 0/);
    } finally {
      await server.close();
    }
  });
});

/** Polls `check` every 10 ms until it holds (fails after 20 s: a hang, not slowness). */
async function waitFor(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not reached in 20 s");
    await new Promise((r) => setTimeout(r, 10));
  }
}
