// Payload capture on the OpenAI-compatible routes (docs/Capture.md): chat and completions on the
// real tiny-llama GGUF, streamed and not (a stream is captured as its assembled text), and
// embeddings on the tiny-embed folder; the model is named by the body, not the path.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

type Rec = Record<string, any>;

describe("capture on the OpenAI routes", () => {
  let srv: InProcessServer;
  let out: string;

  const records = (): Rec[] => {
    let names: string[] = [];
    try {
      names = readdirSync(out).filter((n) => n.endsWith(".jsonl"));
    } catch {}
    return names
      .sort()
      .flatMap((n) => readFileSync(join(out, n), "utf8").split("\n").filter(Boolean))
      .map((l) => JSON.parse(l) as Rec);
  };
  const recordOf = async (id: string): Promise<Rec> => {
    await until(`the record of ${id}`, () => records().some((r) => r.requestId === id));
    return records().find((r) => r.requestId === id)!;
  };

  before(async () => {
    const models = await testModels();
    const dir = mkdtempSync(join(tmpdir(), "modelport-capture-openai-"));
    out = join(dir, "captured");
    const file = join(dir, "modelport.yaml");
    writeFileSync(
      file,
      stringify({
        server: { capture: { dir: "captured" } },
        models: [
          {
            name: "tiny-llama",
            path: join(models, "tiny-llama.gguf"),
            llm: { sequences: 1, contextSize: 2048 },
            capture: { redact: ["messages.*.content"] },
          },
          { name: "tiny-embed", backend: "transformers", path: join(models, "tiny-embed"), capture: {} },
        ],
      }),
    );
    srv = await startInProcess({ file, env: {} });
  });
  after(() => srv.close());

  it("chat: the request (redacted) and the answer", async () => {
    const res = await postJson(
      `${srv.url}/v1/chat/completions`,
      { model: "tiny-llama", messages: [{ role: "user", content: "my secret" }], max_tokens: 4 },
      { "x-request-id": "chat-1" },
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const rec = await recordOf("chat-1");
    assert.equal(rec.model, "tiny-llama");
    assert.equal(rec.protocol, "openai");
    assert.equal(rec.route, "/v1/chat/completions");
    assert.equal(rec.version, "1");
    assert.equal(rec.status, 200);
    assert.deepEqual(rec.request.messages, [{ role: "user", content: "[redacted]" }]);
    assert.equal(rec.request.max_tokens, 4);
    assert.deepEqual(rec.response, res.body);
  });

  it("a streamed chat: the assembled text, as the stream's deltas add up", async () => {
    const res = await fetch(`${srv.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "chat-stream" },
      body: JSON.stringify({
        model: "tiny-llama",
        messages: [{ role: "user", content: "hello" }],
        max_tokens: 6,
        stream: true,
      }),
    });
    assert.equal(res.status, 200);
    let text = "";
    for (const line of (await res.text()).split("\n")) {
      if (!line.startsWith("data: {")) continue;
      const chunk = JSON.parse(line.slice(6)) as { choices: { delta?: { content?: string } }[] };
      text += chunk.choices[0]?.delta?.content ?? "";
    }
    assert.ok(text.length > 0);
    const rec = await recordOf("chat-stream");
    assert.equal(rec.status, 200);
    assert.equal(rec.response.streamed, true);
    assert.equal(rec.response.choices[0].message.content, text);
    assert.ok(["stop", "length"].includes(rec.response.choices[0].finish_reason));
    assert.equal(rec.response.usage.completion_tokens > 0, true);
  });

  it("completions, streamed: the assembled text", async () => {
    const res = await fetch(`${srv.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "cmpl-stream" },
      body: JSON.stringify({ model: "tiny-llama", prompt: "once upon", max_tokens: 5, stream: true }),
    });
    assert.equal(res.status, 200);
    let text = "";
    for (const line of (await res.text()).split("\n")) {
      if (!line.startsWith("data: {")) continue;
      text += (JSON.parse(line.slice(6)) as { choices: { text?: string }[] }).choices[0]?.text ?? "";
    }
    const rec = await recordOf("cmpl-stream");
    assert.equal(rec.request.prompt, "once upon");
    assert.equal(rec.response.choices[0].text, text);
  });

  it("a refused request: its error code and message", async () => {
    const res = await postJson(
      `${srv.url}/v1/chat/completions`,
      { model: "tiny-llama", messages: [], max_tokens: 4 },
      { "x-request-id": "chat-bad" },
    );
    assert.equal(res.status, 400);
    const rec = await recordOf("chat-bad");
    assert.equal(rec.status, 400);
    assert.equal(rec.error.code, res.body.error.code);
    assert.equal(rec.response, null);
  });

  it("embeddings", async () => {
    const res = await postJson(
      `${srv.url}/v1/embeddings`,
      { model: "tiny-embed", input: ["a cat", "a dog"] },
      { "x-request-id": "embed-1" },
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const rec = await recordOf("embed-1");
    assert.equal(rec.model, "tiny-embed");
    assert.deepEqual(rec.request.input, ["a cat", "a dog"]);
    assert.deepEqual(rec.response, res.body);
  });
});
