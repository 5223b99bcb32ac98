// POST /v1/embeddings through a real listening server, with the official `openai` package as the
// client: the tiny-embed folder on the transformers backend (real transformers.js, real files),
// an upstream embeddings model forwarding to a local stub, batching across concurrent requests
// (asserted from the batch metrics, not timing), OpenAI-shaped errors, readiness with a wrong
// golden file, and the cost figures in /metrics, model stats and `modelport cost`.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import OpenAI from "openai";
import { stringify } from "yaml";
import {
  TINY_EMBED_DIM,
  TINY_EMBED_GOLDEN_TEXT,
  tinyEmbedTokenize,
  tinyEmbedWeights,
} from "../../examples/build/models/tiny-embed.js";
import { parsePrometheus } from "../../src/cli/cost.js";
import { testModels } from "../helpers/models.js";
import { type OpenAiStub, startOpenAiStub, stubEmbedding } from "../helpers/openai-stub.js";
import { CLI, type InProcessServer, startInProcess } from "../helpers/server.js";

const run = promisify(execFile);
const KEY_ENV = "MODELPORT_TEST_EMBED_UPSTREAM_KEY";
const PRICE_PER_HOUR = 3.6;

const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
};

async function metric(url: string, name: string, model: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return parsePrometheus(text)
    .filter((s) => s.name === name && s.labels.model === model)
    .reduce((n, s) => n + s.value, 0);
}

describe("POST /v1/embeddings (openai client, real server)", () => {
  let server: InProcessServer;
  let stub: OpenAiStub;
  let client: OpenAI;
  const vocab = tinyEmbedWeights().vocab;
  const tokens = (t: string) => tinyEmbedTokenize(t, vocab).length;

  before(async () => {
    const models = await testModels();
    stub = await startOpenAiStub();
    process.env[KEY_ENV] = "sk-embed-test-42";
    const dir = mkdtempSync(join(tmpdir(), "modelport-embed-"));
    // A golden file that no longer matches the model: that model must stay not ready.
    const golden = JSON.parse(readFileSync(join(models, "tiny-embed.golden.json"), "utf8"));
    golden.outputs.embedding.data[0] += 0.5;
    writeFileSync(join(dir, "wrong.golden.json"), JSON.stringify(golden));
    const config = {
      server: { pricePerHour: PRICE_PER_HOUR, logLevel: "warn" },
      models: [
        { name: "churn-tree", path: join(models, "churn-tree.onnx") },
        { name: "tiny-embed", backend: "transformers", path: join(models, "tiny-embed") },
        {
          // Classic batching, full batches of 8 or a 2 s wait: concurrent requests share batches
          // however slowly they arrive, so the batching test does not depend on machine speed.
          name: "tiny-embed-batched",
          backend: "transformers",
          path: join(models, "tiny-embed"),
          batching: { adaptive: false, maxDelayMs: 2000, maxBatchRows: 8 },
        },
        {
          name: "tiny-embed-wrong-golden",
          backend: "transformers",
          path: join(models, "tiny-embed"),
          golden: join(dir, "wrong.golden.json"),
        },
        {
          name: "hosted-embed",
          backend: "upstream",
          upstream: { url: stub.url, apiKeyEnv: KEY_ENV, model: "stub-model", backoffMs: 10 },
          pricePerMillionInputTokens: 20,
        },
      ],
    };
    const file = join(dir, "modelport.yaml");
    writeFileSync(file, stringify(config));
    server = await startInProcess({ file });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });

  after(async () => {
    await server?.close();
    await stub?.close();
    delete process.env[KEY_ENV];
  });

  it("is ready once the golden text matches; a wrong golden file keeps a model out with the reason", async () => {
    const res = await fetch(`${server.url}/readyz`);
    const body = (await res.json()) as {
      models: Record<string, { ready: boolean; reason?: string; code?: string }>;
    };
    assert.equal(body.models["tiny-embed"]?.ready, true, JSON.stringify(body));
    assert.equal(body.models["hosted-embed"]?.ready, true, JSON.stringify(body));
    const wrong = body.models["tiny-embed-wrong-golden"];
    assert.equal(wrong?.ready, false);
    assert.equal(wrong?.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
    assert.match(wrong?.reason ?? "", /golden check failed.*embedding/);
  });

  it("embeds a string: one unit-norm vector, usage counts the tokens (base64 via the SDK)", async () => {
    const r = await client.embeddings.create({ model: "tiny-embed", input: TINY_EMBED_GOLDEN_TEXT });
    assert.equal(r.object, "list");
    assert.equal(r.model, "tiny-embed");
    assert.equal(r.data.length, 1);
    assert.equal(r.data[0]!.index, 0);
    assert.equal(r.data[0]!.object, "embedding");
    const v = r.data[0]!.embedding;
    assert.equal(v.length, TINY_EMBED_DIM);
    assert.ok(Math.abs(Math.sqrt(dot(v, v)) - 1) < 1e-5);
    assert.equal(r.usage.prompt_tokens, tokens(TINY_EMBED_GOLDEN_TEXT));
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
  });

  it("embeds an array in order; texts that share words are closer than unrelated ones", async () => {
    const input = ["my cat likes the dog", "the dog and the cat", "bank loan prices and tax"];
    const r = await client.embeddings.create({ model: "tiny-embed", input, encoding_format: "float" });
    assert.deepEqual(
      r.data.map((d) => d.index),
      [0, 1, 2],
    );
    const [a, b, c] = r.data.map((d) => d.embedding);
    assert.ok(dot(a!, b!) > dot(a!, c!) + 0.3, `related ${dot(a!, b!)} vs unrelated ${dot(a!, c!)}`);
    assert.equal(
      r.usage.prompt_tokens,
      input.reduce((n, t) => n + tokens(t), 0),
    );
  });

  it("float and base64 encodings carry the same vector", async () => {
    const body = (format: string) =>
      fetch(`${server.url}/v1/embeddings`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "tiny-embed", input: "hello cat", encoding_format: format }),
      }).then((r) => r.json() as Promise<{ data: { embedding: number[] | string }[] }>);
    const f = (await body("float")).data[0]!.embedding as number[];
    const b64 = (await body("base64")).data[0]!.embedding as string;
    const buf = Buffer.from(b64, "base64");
    const decoded = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    assert.deepEqual(Array.from(decoded), f);
  });

  it("concurrent requests share batches (batch metrics: fewer batches than requests)", async () => {
    const model = "tiny-embed-batched";
    const rowsBefore = await metric(server.url, "modelport_batch_rows_sum", model);
    const batchesBefore = await metric(server.url, "modelport_batch_rows_count", model);
    const n = 32;
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) => client.embeddings.create({ model, input: `cat number ${i}` })),
    );
    assert.equal(answers.length, n);
    assert.ok(answers.every((a) => a.data[0]!.embedding.length === TINY_EMBED_DIM));
    const rows = (await metric(server.url, "modelport_batch_rows_sum", model)) - rowsBefore;
    const batches = (await metric(server.url, "modelport_batch_rows_count", model)) - batchesBefore;
    assert.equal(rows, n);
    // Full batches of 8 make 4; a few partial ones if the 2 s wait ran out are fine.
    assert.ok(batches <= n / 4 + 2, `${n} requests went in ${batches} batches`);
  });

  it("forwards to an upstream embeddings model with the key from its environment variable", async () => {
    const r = await client.embeddings.create({
      model: "hosted-embed",
      input: ["abc", "hello"],
      encoding_format: "float",
    });
    assert.deepEqual(r.data[1]!.embedding, stubEmbedding("hello"));
    assert.equal(r.usage.prompt_tokens, 6);
    const sent = stub.requests.filter((q) => q.path === "/v1/embeddings").at(-1)!;
    assert.equal(sent.headers.authorization, "Bearer sk-embed-test-42");
    assert.equal(sent.body?.model, "stub-model");
  });

  it("token ids: passed on by an upstream model, refused by a model that embeds text", async () => {
    const r = await client.embeddings.create({
      model: "hosted-embed",
      input: [[5, 6], [7]],
      encoding_format: "float",
    });
    assert.equal(r.data.length, 2);
    assert.deepEqual(r.data[0]!.embedding, stubEmbedding("[5,6]"));
    const sent = stub.requests.filter((q) => q.path === "/v1/embeddings").at(-1)!;
    assert.deepEqual(sent.body?.input, [[5, 6], [7]]);
  });

  it("token ids on a local model: the same vector as the text they tokenize, batched with other ids", async () => {
    const texts = ["hello cat", "The dog likes warm milk."];
    const ids = texts.map((t) => tinyEmbedTokenize(t, vocab));
    const byText = await client.embeddings.create({
      model: "tiny-embed",
      input: texts,
      encoding_format: "float",
    });
    const byIds = await client.embeddings.create({
      model: "tiny-embed",
      input: ids,
      encoding_format: "float",
    });
    const close = (a: number[], b: number[]) => a.every((x, i) => Math.abs(x - b[i]!) < 1e-5);
    assert.ok(close(byIds.data[0]!.embedding, byText.data[0]!.embedding));
    assert.ok(close(byIds.data[1]!.embedding, byText.data[1]!.embedding));
    assert.equal(byIds.usage.prompt_tokens, ids[0]!.length + ids[1]!.length);
    // Padding in a batch of ids of different lengths changes nothing (the mask excludes it).
    const batched = await Promise.all(
      ids.map((row) =>
        client.embeddings.create({ model: "tiny-embed-batched", input: row, encoding_format: "float" }),
      ),
    );
    for (const [i, r] of batched.entries()) assert.ok(close(r.data[0]!.embedding, byText.data[i]!.embedding));
  });

  it("token ids a local model cannot take: a 400 naming the row, and a batched neighbour unharmed", async () => {
    const bad = [[vocab.length], Array.from({ length: 5_000 }, () => 5)];
    for (const input of bad) {
      await assert.rejects(
        client.embeddings.create({ model: "tiny-embed", input: [[5, 6], input] as unknown as string[] }),
        (err: unknown) =>
          err instanceof OpenAI.BadRequestError && err.param === "input" && /input\[1\]/.test(err.message),
        JSON.stringify(input).slice(0, 40),
      );
    }
    const good = tinyEmbedTokenize("hello cat", vocab);
    const [refused, fine] = await Promise.allSettled([
      client.embeddings.create({
        model: "tiny-embed-batched",
        input: [[vocab.length + 7]] as unknown as string[],
      }),
      client.embeddings.create({ model: "tiny-embed-batched", input: good }),
    ]);
    assert.equal(refused.status, "rejected");
    assert.equal(fine.status, "fulfilled");
  });

  it("lists the embedding models", async () => {
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.ok(ids.includes("tiny-embed"), ids.join(", "));
    assert.ok(ids.includes("hosted-embed"), ids.join(", "));
  });

  it("dimensions: the first d dimensions, renormalised; more than the model has is a 400", async () => {
    const full = (
      await client.embeddings.create({ model: "tiny-embed", input: "hello cat", encoding_format: "float" })
    ).data[0]!.embedding;
    const short = (
      await client.embeddings.create({
        model: "tiny-embed",
        input: "hello cat",
        dimensions: 8,
        encoding_format: "float",
      })
    ).data[0]!.embedding;
    assert.equal(short.length, 8);
    assert.ok(Math.abs(Math.sqrt(dot(short, short)) - 1) < 1e-5);
    const head = full.slice(0, 8);
    const norm = Math.sqrt(dot(head, head));
    for (const [i, x] of short.entries()) assert.ok(Math.abs(x - head[i]! / norm) < 1e-6);
    await assert.rejects(
      client.embeddings.create({ model: "tiny-embed", input: "x", dimensions: TINY_EMBED_DIM + 1 }),
      (err: unknown) => err instanceof OpenAI.BadRequestError && err.param === "dimensions",
    );
  });

  it("answers OpenAI-shaped errors with MP_ERR_* codes", async () => {
    await assert.rejects(client.embeddings.create({ model: "no-such-model", input: "x" }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError);
      assert.equal(err.code, "MP_ERR_MODEL_NOT_FOUND");
      return true;
    });
    await assert.rejects(client.embeddings.create({ model: "tiny-embed", input: [] }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.code, "MP_ERR_INPUT_EMPTY_BATCH");
      assert.equal(err.param, "input");
      return true;
    });
    const res = await fetch(`${server.url}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "tiny-embed", input: 42 }),
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { error: Record<string, unknown> };
    assert.deepEqual(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
    assert.equal(body.error.type, "invalid_request_error");
    assert.equal(body.error.code, "MP_ERR_REQUEST_INVALID");
  });

  it("reports cost: metrics, model stats and `modelport cost`", async () => {
    const predict = await fetch(`${server.url}/v1/models/churn-tree/predict`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rows: [[3, 95, 4, 1, 0, 20]] }),
    });
    assert.equal(predict.status, 200);
    for (const model of ["tiny-embed", "churn-tree"]) {
      const requests = await metric(server.url, "modelport_cost_requests_total", model);
      const seconds = await metric(server.url, "modelport_cost_compute_seconds_total", model);
      const dollars = await metric(server.url, "modelport_cost_dollars_total", model);
      assert.ok(requests >= 2, `${model}: ${requests} requests`);
      assert.ok(seconds > 0, `${model}: ${seconds} s`);
      assert.ok(Math.abs(dollars - (seconds * PRICE_PER_HOUR) / 3600) < 1e-12, `${model}: ${dollars}`);
    }
    // Upstream: tokens × price (the stub counts 3 prompt tokens per input, at $20 per million).
    const hosted = await metric(server.url, "modelport_cost_dollars_total", "hosted-embed");
    const inputs = stub.requests
      .filter((q) => q.path === "/v1/embeddings")
      .reduce((n, q) => n + ((q.body?.input as unknown[] | undefined)?.length ?? 0), 0);
    assert.ok(Math.abs(hosted - (3 * inputs * 20) / 1e6) < 1e-12, `${hosted} for ${inputs} inputs`);

    const stats = (await (await fetch(`${server.url}/v1/models/churn-tree`)).json()) as {
      cost: { requests: number; computeMsPerRequest: number; prices: { pricePerHour: number } };
    };
    assert.ok(stats.cost.requests >= 2);
    assert.ok(stats.cost.computeMsPerRequest > 0);
    assert.equal(stats.cost.prices.pricePerHour, PRICE_PER_HOUR);
    // Language models carry the same figures in their stats.
    const embedStats = (await (await fetch(`${server.url}/v1/models/tiny-embed`)).json()) as {
      cost: { requests: number; inputTokens: number; dollars: number };
    };
    assert.ok(
      embedStats.cost.requests >= 5 && embedStats.cost.inputTokens > 0 && embedStats.cost.dollars > 0,
    );

    const { stdout } = await run(process.execPath, [CLI, "cost", server.url]);
    const lines = stdout.split("\n");
    assert.match(lines[0]!, /model\s+requests\s+cost \/ 1,000 req\s+compute ms \/ req/);
    for (const model of ["churn-tree", "hosted-embed", "tiny-embed"]) {
      assert.ok(
        lines.some((l) => l.startsWith(`${model} `)),
        `${model} missing from:\n${stdout}`,
      );
    }
    const json = JSON.parse((await run(process.execPath, [CLI, "cost", server.url, "--json"])).stdout) as {
      models: { model: string; requests: number; costPer1000Requests: number; computeMsPerRequest: number }[];
    };
    const embed = json.models.find((m) => m.model === "tiny-embed")!;
    assert.ok(embed.requests >= 5);
    assert.ok(embed.costPer1000Requests > 0 && embed.computeMsPerRequest > 0);
    // cost per 1,000 requests = compute ms per request × 1,000 × price per ms.
    const expected = (embed.computeMsPerRequest * 1000 * PRICE_PER_HOUR) / 3_600_000;
    assert.ok(Math.abs(embed.costPer1000Requests - expected) / expected < 1e-9);
  });
});
