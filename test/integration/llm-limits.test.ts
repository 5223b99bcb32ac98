// Language-model limits through a real listening server with API keys on (real tiny-llama on
// node-llama-cpp, real tiny-embed on transformers.js, a real ONNX model): a huge prompt is
// refused from its size before any template or tokenizer runs while /livez keeps answering;
// message, stop and model-name bounds; llm.maxTokens and llm.batchSize as the library applies
// them; MP_ERR_LLM_CAPABILITY_UNSUPPORTED on each route; and `modelport cost --api-key`.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { stringify } from "yaml";
import type { LlmGoldenFile } from "../../src/lifecycle/text-golden.js";
import { testModels } from "../helpers/models.js";
import { CLI, type InProcessServer, startInProcess } from "../helpers/server.js";

const run = promisify(execFile);
const KEY = "llm-limits-test-key-0123";

interface OpenAiErrorBody {
  error: { code: string; message: string; param: string | null; type: string };
}

describe("language-model limits (real server, API keys on)", () => {
  let server: InProcessServer;
  let golden: LlmGoldenFile;

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  before(async () => {
    const dir = await testModels();
    golden = JSON.parse(readFileSync(join(dir, "tiny-llama.golden.json"), "utf8")) as LlmGoldenFile;
    const file = join(dir, "llm-limits.yaml");
    writeFileSync(
      file,
      stringify({
        server: { apiKeys: [KEY], logLevel: "warn" },
        models: [
          { name: "churn-tree", path: "churn-tree.onnx" },
          { name: "tiny-embed", backend: "transformers", path: "tiny-embed" },
          { name: "tiny-llama", path: "tiny-llama.gguf", llm: { contextSize: 2048 } },
          {
            name: "tiny-llama-capped",
            path: "tiny-llama.gguf",
            llm: {
              contextSize: 2048,
              maxTokens: 3,
              batchSize: 16,
              maxMessages: 4,
              maxStops: 2,
              maxStopChars: 8,
              maxPromptBytes: 1000,
            },
          },
        ],
      }),
    );
    server = await startInProcess({ file });
  });

  after(() => server?.close());

  /**
   * Runs `request` while polling /livez; returns its answer and the longest time between two
   * answered probes in ms. Client and server share this process, so a stall can start while the
   * poller sleeps: the gap between answers sees it either way.
   */
  async function whileProbing<T>(
    request: () => Promise<T>,
  ): Promise<{ result: T; worst: number; probes: number }> {
    let done = false;
    const gaps: number[] = [];
    const poller = (async () => {
      let last = performance.now();
      // Until the request has been answered, then a few more.
      for (let extra = 0; extra < 5; ) {
        const res = await fetch(`${server.url}/livez`);
        await res.arrayBuffer();
        const now = performance.now();
        gaps.push(now - last);
        last = now;
        if (done) extra++;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const result = await request();
    done = true;
    await poller;
    return { result, worst: Math.max(...gaps), probes: gaps.length };
  }

  it("refuses an 8 MB prompt from its size at once (400 MP_ERR_LLM_CONTEXT_OVERFLOW) while /livez keeps answering", async () => {
    const body = (model: string) =>
      JSON.stringify({
        model,
        messages: [{ role: "user", content: "the cat ".repeat(1 << 20) }],
        max_tokens: 4,
      });
    // The same 8 MB body to a model that does not exist: read and parsed, never templated. Its
    // stall is what receiving and parsing 8 MB costs on this machine now.
    const baseline = await whileProbing(() => post("/v1/chat/completions", body("no-such-model")));
    assert.equal(baseline.result.status, 404);
    const big = await whileProbing(() => post("/v1/chat/completions", body("tiny-llama")));
    const res = big.result;
    assert.equal(res.status, 400, JSON.stringify(res.body).slice(0, 300));
    const err = (res.body as OpenAiErrorBody).error;
    assert.equal(err.code, "MP_ERR_LLM_CONTEXT_OVERFLOW");
    assert.equal(err.param, "messages");
    // Refused from its size (bytes), not after tokenizing (the token count would be named).
    assert.match(err.message, /the prompt is 8388608 bytes; model 'tiny-llama' takes at most 65536 bytes/);
    assert.ok(big.probes >= 6, `${big.probes} probes`);
    // Templating and tokenizing 8 MB on the event loop stalled /livez for 17 s here; now the
    // request costs about what parsing it does: under 500 ms, or 3× the parse-only stall when
    // the machine is too busy for that.
    const bound = Math.max(500, 3 * baseline.worst);
    assert.ok(
      big.worst < bound,
      `slowest /livez: ${big.worst.toFixed(0)} ms (parse only: ${baseline.worst.toFixed(0)} ms)`,
    );
  });

  it("counts the bound in UTF-8 bytes, and llm.maxPromptBytes caps it below the context's", async () => {
    // 501 two-byte characters: 1,002 bytes, over llm.maxPromptBytes 1000.
    const over = await post("/v1/completions", { model: "tiny-llama-capped", prompt: "é".repeat(501) });
    assert.equal(over.status, 400);
    assert.equal(over.body.error.code, "MP_ERR_LLM_CONTEXT_OVERFLOW");
    assert.equal(over.body.error.param, "prompt");
    assert.match(over.body.error.message, /1002 bytes.*at most 1000 bytes \(llm\.maxPromptBytes\)/);
    // Exactly at the bound is served.
    const at = await post("/v1/completions", {
      model: "tiny-llama-capped",
      prompt: "the cat ".repeat(125),
      max_tokens: 1,
    });
    assert.equal(at.status, 200, JSON.stringify(at.body));
    // Under the byte bound but far over the context in tokens: counting stops soon after the
    // context (2048 × 1.25 + 64), without tokenizing the whole prompt.
    const far = await post("/v1/completions", {
      model: "tiny-llama",
      prompt: " the cat".repeat(8000),
      max_tokens: 1,
    });
    assert.equal(far.status, 400);
    assert.equal(far.body.error.code, "MP_ERR_LLM_CONTEXT_OVERFLOW");
    assert.match(far.body.error.message, /takes more than 2624 tokens \(counting stopped there\)/);
    // Just over the context: the exact count after templating answers.
    const near = await post("/v1/completions", {
      model: "tiny-llama",
      prompt: " the cat".repeat(1100),
      max_tokens: 1,
    });
    assert.equal(near.status, 400);
    assert.equal(near.body.error.code, "MP_ERR_LLM_CONTEXT_OVERFLOW");
    assert.match(
      near.body.error.message,
      /the prompt takes \d+ tokens; model 'tiny-llama' has a context of 2048/,
    );
  });

  it("bounds the number of messages and stops, each stop's length and the model name", async () => {
    const messages = Array.from({ length: 5 }, () => ({ role: "user", content: "hi" }));
    const many = await post("/v1/chat/completions", { model: "tiny-llama-capped", messages });
    assert.equal(many.status, 400);
    assert.equal(many.body.error.code, "MP_ERR_REQUEST_INVALID");
    assert.equal(many.body.error.param, "messages");
    assert.match(many.body.error.message, /5 messages; at most 4 \(llm\.maxMessages\)/);
    const four = await post("/v1/chat/completions", {
      model: "tiny-llama-capped",
      messages: messages.slice(0, 4),
    });
    assert.equal(four.status, 200, JSON.stringify(four.body));

    const stops = await post("/v1/completions", {
      model: "tiny-llama-capped",
      prompt: "x",
      stop: ["a", "b", "c"],
    });
    assert.equal(stops.status, 400);
    assert.equal(stops.body.error.param, "stop");
    assert.match(stops.body.error.message, /up to 2 strings \(llm\.maxStops\)/);
    const long = await post("/v1/completions", {
      model: "tiny-llama-capped",
      prompt: "x",
      stop: ["123456789"],
    });
    assert.equal(long.status, 400);
    assert.equal(long.body.error.param, "stop");
    assert.match(long.body.error.message, /stop\[0\] is 9 characters; at most 8 \(llm\.maxStopChars\)/);

    const name = "m".repeat(100_000);
    const bad = await post("/v1/completions", { model: name, prompt: "x" });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, "model");
    assert.ok(bad.body.error.message.length < 200, "the name is not echoed back");
  });

  it("llm.maxTokens caps max_tokens: the answer ends after 3 tokens with finish_reason length", async () => {
    const ask = (model: string) => post("/v1/completions", { model, prompt: golden.prompt, max_tokens: 50 });
    const capped = await ask("tiny-llama-capped");
    const free = await ask("tiny-llama");
    assert.equal(capped.status, 200);
    assert.equal(capped.body.usage.completion_tokens, 3);
    assert.equal(capped.body.choices[0].finish_reason, "length");
    assert.equal(free.body.usage.completion_tokens, 50, "the same request on an uncapped model runs on");
    // Greedy: the capped answer is the start of the uncapped one.
    assert.ok(free.body.choices[0].text.startsWith(capped.body.choices[0].text));
  });

  it("llm.batchSize reaches llama.cpp: the context's batch size is the configured one", async () => {
    const get = async (name: string) =>
      (await (
        await fetch(`${server.url}/v1/models/${name}`, { headers: { authorization: `Bearer ${KEY}` } })
      ).json()) as { batch_size?: number };
    assert.equal((await get("tiny-llama-capped")).batch_size, 16);
    const library = (await get("tiny-llama")).batch_size;
    assert.ok(library !== undefined && library !== 16, `library default ${library}`);
    // A prompt several batches long is evaluated and answered.
    const r = await post("/v1/completions", {
      model: "tiny-llama-capped",
      prompt: " the model will serve".repeat(12),
      max_tokens: 2,
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.ok(r.body.usage.prompt_tokens > 3 * 16, `${r.body.usage.prompt_tokens} prompt tokens`);
  });

  it("answers 400 MP_ERR_LLM_CAPABILITY_UNSUPPORTED for what a model does not do", async () => {
    const cases: [string, Record<string, unknown>][] = [
      ["/v1/chat/completions", { model: "churn-tree", messages: [{ role: "user", content: "hi" }] }],
      ["/v1/completions", { model: "churn-tree", prompt: "hi" }],
      ["/v1/chat/completions", { model: "tiny-embed", messages: [{ role: "user", content: "hi" }] }],
      ["/v1/completions", { model: "tiny-embed", prompt: "hi" }],
      ["/v1/embeddings", { model: "tiny-llama", input: "hi" }],
    ];
    for (const [path, body] of cases) {
      const r = await post(path, body);
      const what = `${path} ${String(body.model)}`;
      assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, "MP_ERR_LLM_CAPABILITY_UNSUPPORTED", what);
      assert.equal(r.body.error.param, "model", what);
    }
  });

  it("`modelport cost --api-key` reads /metrics of a server with keys on; without a key it fails", async () => {
    const predict = await post("/v1/models/churn-tree/predict", { rows: [[3, 95, 4, 1, 0, 20]] });
    assert.equal(predict.status, 200);
    const env = { ...process.env };
    delete env.MODELPORT_API_KEY;
    const { stdout } = await run(process.execPath, [CLI, "cost", server.url, "--api-key", KEY, "--json"], {
      env,
    });
    const json = JSON.parse(stdout) as { models: { model: string; requests: number }[] };
    const churn = json.models.find((m) => m.model === "churn-tree");
    assert.ok(churn && churn.requests >= 1, stdout);
    await assert.rejects(run(process.execPath, [CLI, "cost", server.url], { env }), (err: any) => {
      assert.equal(err.code, 1);
      assert.match(err.stderr, /answered HTTP 401/);
      return true;
    });
    const wrong = run(process.execPath, [CLI, "cost", server.url, "--api-key", "not-the-key-123"], { env });
    await assert.rejects(wrong, (err: any) => err.code === 1 && /HTTP 401/.test(err.stderr));
  });
});
