// Language models across tiers: a `--role runner` process serves tiny-llama (llama.cpp) and
// tiny-embed (transformers); a `--role api` process loads neither and forwards the OpenAI
// routes to it. Spoken to with the official `openai` client: answers through the API tier are
// the runner's own (greedy, token for token), streams arrive as chunks, embeddings match.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import { testModels } from "../helpers/models.js";
import { type ChildServer, startReadyChild, stopStartedChildren } from "../helpers/server.js";

describe("language models behind the API tier", () => {
  let runner: ChildServer;
  let api: ChildServer;
  let viaApi: OpenAI;
  let direct: OpenAI;

  before(async () => {
    const dir = await testModels();
    const file = join(dir, "scale-out-llm.yaml");
    // Stored responses go to the job store: a fresh one, not the working directory's.
    const store = mkdtempSync(join(tmpdir(), "modelport-scale-out-llm-"));
    writeFileSync(
      file,
      [
        "jobs:",
        `  sqlitePath: ${join(store, "jobs.db")}`,
        "models:",
        "  - name: tiny-llama",
        "    path: tiny-llama.gguf",
        "    llm: { sequences: 2, maxWaiting: 4, contextSize: 2048 }",
        "  - name: tiny-embed",
        "    backend: transformers",
        "    path: tiny-embed",
        "",
      ].join("\n"),
    );
    runner = await startReadyChild(["-c", file, "--role", "runner"]);
    api = await startReadyChild(["-c", file, "--role", "api", "--runner", runner.url]);
    viaApi = new OpenAI({ baseURL: `${api.url}/v1`, apiKey: "unused", maxRetries: 0 });
    direct = new OpenAI({ baseURL: `${runner.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });

  after(stopStartedChildren);

  it("the API tier loads no weights and lists the runner's language models as ready", async () => {
    assert.doesNotMatch(api.output(), /loaded tiny-llama|tiny-llama matches its golden/);
    const list = await viaApi.models.list();
    assert.deepEqual(list.data.map((m) => m.id).sort(), ["tiny-embed", "tiny-llama"]);
    const one = (await (await fetch(`${api.url}/v1/models/tiny-llama`)).json()) as {
      status: { ready: boolean };
      capabilities: unknown;
    };
    assert.equal(one.status.ready, true);
    assert.deepEqual(one.capabilities, { chat: true, completion: true, embeddings: false });
  });

  it("chat through the API tier is the runner's greedy answer, streamed or not", async () => {
    const ask = {
      model: "tiny-llama",
      messages: [{ role: "user" as const, content: "hello" }],
      max_tokens: 12,
      temperature: 0,
    };
    const want = (await direct.chat.completions.create(ask)).choices[0]!.message.content;
    const got = await viaApi.chat.completions.create(ask);
    assert.equal(got.choices[0]!.message.content, want);
    const stream = await viaApi.chat.completions.create({ ...ask, stream: true });
    const pieces: string[] = [];
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta?.content;
      if (d) pieces.push(d);
    }
    assert.ok(pieces.length > 1, `streamed in ${pieces.length} piece(s)`);
    assert.equal(pieces.join(""), want);
  });

  it("embeddings through the API tier equal the runner's", async () => {
    const input = ["the cat sat", "stock prices fell"];
    const want = await direct.embeddings.create({ model: "tiny-embed", input });
    const got = await viaApi.embeddings.create({ model: "tiny-embed", input });
    assert.equal(got.data.length, 2);
    for (let i = 0; i < 2; i++) {
      const a = got.data[i]!.embedding;
      const b = want.data[i]!.embedding;
      assert.equal(a.length, b.length);
      for (let k = 0; k < a.length; k++) assert.ok(Math.abs(a[k]! - b[k]!) < 1e-6);
    }
  });

  it("/v1/responses through the API tier is the runner's greedy answer, streamed or not, and is stored there", async () => {
    const body = { model: "tiny-llama", input: "hello", max_output_tokens: 12 };
    const post = async (url: string, extra: Record<string, unknown> = {}) => {
      const res = await fetch(`${url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...body, ...extra }),
      });
      return { status: res.status, text: await res.text() };
    };
    const textOf = (r: { output: { content: { text: string }[] }[] }) => r.output[0]!.content[0]!.text;
    const direct = await post(runner.url, { store: false });
    assert.equal(direct.status, 200, direct.text);
    const want = textOf(JSON.parse(direct.text));
    const viaApi = await post(api.url);
    assert.equal(viaApi.status, 200, viaApi.text);
    const answer = JSON.parse(viaApi.text) as { id: string; output: { content: { text: string }[] }[] };
    assert.equal(textOf(answer), want);
    const stored = await fetch(`${api.url}/v1/responses/${answer.id}`);
    assert.equal(stored.status, 200);
    assert.deepEqual(await stored.json(), answer);
    const streamed = await post(api.url, { stream: true, store: false });
    assert.equal(streamed.status, 200, streamed.text);
    const deltas = [...streamed.text.matchAll(/^data: (.*"type":"response\.output_text\.delta".*)$/gm)].map(
      (m) => (JSON.parse(m[1]!) as { delta: string }).delta,
    );
    assert.ok(deltas.length > 1, `streamed in ${deltas.length} delta(s)`);
    assert.equal(deltas.join(""), want);
    assert.match(streamed.text, /event: response\.(completed|incomplete)\n/);
  });

  it("a runner's refusal reaches the client with the runner's own code and status", async () => {
    const body = JSON.stringify({ model: "tiny-llama", prompt: "the cat ".repeat(3000), max_tokens: 4 });
    const ask = (url: string) =>
      fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
    const [fromRunner, fromApi] = await Promise.all([ask(runner.url), ask(api.url)]);
    const want = (await fromRunner.json()) as { error: { code: string } };
    const got = (await fromApi.json()) as { error: { code: string; message: string } };
    assert.equal(fromRunner.status, 400);
    assert.equal(want.error.code, "MP_ERR_LLM_CONTEXT_OVERFLOW");
    assert.equal(fromApi.status, 400);
    assert.equal(got.error.code, "MP_ERR_LLM_CONTEXT_OVERFLOW");
    assert.match(got.error.message, /context/);
  });

  it("with the runner gone, the API tier answers 503 MP_ERR_RUNNER_UNAVAILABLE in OpenAI's shape", async () => {
    await runner.stop("SIGKILL");
    const res = await fetch(`${api.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "tiny-llama",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 4,
      }),
    });
    assert.equal(res.status, 503);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, "MP_ERR_RUNNER_UNAVAILABLE");
  });
});
