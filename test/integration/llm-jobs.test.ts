// Language-model work as jobs, end to end: a real listening server with named keys, the real
// tiny-llama GGUF on node-llama-cpp and the tiny-embed folder on transformers.js. A job's result
// is the JSON its OpenAI route answers the same greedy request with; `Prefer: respond-async` on
// each route makes such a job; a bad body is refused at submission; a canceled job frees its
// sequence; jobs are their key's own (and only for models the key may use) and count in its usage;
// webhooks, event streams and blob-stored results work as for tensor jobs; and a job waits behind
// interactive requests for a sequence (shown by order of events, never by timing). SQLite and
// Redis stores.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import type { LlmGoldenFile } from "../../src/lifecycle/text-golden.js";
import { testModels } from "../helpers/models.js";
import { deletePrefix, redisUrl, uniquePrefix } from "../helpers/redis.js";
import { CLI, type InProcessServer, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const run = promisify(execFile);

interface Setup {
  server: InProcessServer;
  keys: { alice: string; bob: string; carol: string };
  golden: LlmGoldenFile;
}

/** A server with keys alice and bob, tiny-llama (2 sequences), tiny-llama-1 (1) and tiny-embed. */
async function startServer(
  store: "sqlite" | "redis",
  redis?: { url: string; prefix: string },
): Promise<Setup> {
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), `modelport-llm-jobs-${store}-`));
  const keysFile = join(dir, "keys.yaml");
  const create = async (name: string, ...flags: string[]) =>
    (await run(process.execPath, [CLI, "keys", "create", name, "--keys", keysFile, ...flags])).stdout.trim();
  const keys = {
    alice: await create("alice"),
    bob: await create("bob"),
    carol: await create("carol", "--models", "tiny-embed"),
  };
  const golden = JSON.parse(readFileSync(join(models, "tiny-llama.golden.json"), "utf8")) as LlmGoldenFile;
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "server:",
      `  keys: ${keysFile}`,
      "jobs:",
      `  store: ${store}`,
      ...(redis ? [`  redisUrl: "${redis.url}"`, `  redisPrefix: "${redis.prefix}"`] : []),
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      // Results over 1 KiB (embeddings) go to the blob store, as large results do.
      "  inlineResultMaxBytes: 1024",
      '  webhooks: {secret: "llm-jobs-webhook-secret-0123456789", allowPrivate: ["127.0.0.1"]}',
      "models:",
      `  - name: tiny-llama`,
      `    path: ${join(models, "tiny-llama.gguf")}`,
      // Without a prefix cache: the same request's usage (cached_tokens) is then the same each time.
      "    llm: { sequences: 2, maxWaiting: 4, contextSize: 2048, prefixCache: false }",
      // One sequence: for cancellation and for the order of interactive requests and jobs.
      `  - name: tiny-llama-1`,
      `    path: ${join(models, "tiny-llama.gguf")}`,
      "    llm: { sequences: 1, maxWaiting: 4, contextSize: 8192 }",
      `  - {name: tiny-embed, backend: transformers, path: ${join(models, "tiny-embed")}}`,
      "",
    ].join("\n"),
  );
  const server = await startInProcess({ file, env: {} });
  return { server, keys, golden };
}

function client(setup: () => Setup) {
  const call = async (path: string, key: string, init: RequestInit = {}) => {
    const headers: Record<string, string> = {
      authorization: `Bearer ${key}`,
      ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
      ...(init.headers as Record<string, string> | undefined),
    };
    const res = await fetch(`${setup().server.url}${path}`, { ...init, headers });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  };
  const post = (path: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
    call(path, key, { method: "POST", body: JSON.stringify(body), headers });
  /** The job once final (long-polls). */
  const final = async (id: string, key: string) => {
    for (;;) {
      const job = await call(`/v1/jobs/${id}?wait=30`, key);
      assert.equal(job.status, 200, JSON.stringify(job.body));
      if (["succeeded", "failed", "canceled"].includes(job.body.status)) return job.body;
    }
  };
  const result = async (id: string, key: string) => {
    const res = await call(`/v1/jobs/${id}/result`, key);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  };
  const concurrency = async (model: string, key: string) =>
    (await call(`/v1/models/${model}`, key)).body.concurrency as { active: number; waiting: number };
  return { call, post, final, result, concurrency };
}

/** An answer without what differs between two answers of the same request (its id and time). */
function sameAnswer(a: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, created: _created, ...rest } = a;
  return rest;
}

/** A streamed completion on `model` that holds its sequence until aborted; resolves once it generates. */
async function holdSequence(url: string, key: string, model: string, prompt: string) {
  const ac = new AbortController();
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, prompt, max_tokens: 8000, stream: true }),
    signal: ac.signal,
  });
  assert.equal(res.status, 200);
  // Headers come with the first text: it is generating now.
  const reader = res.body!.getReader();
  await reader.read();
  return () => {
    ac.abort();
    void reader.cancel().catch(() => {});
  };
}

function suite(store: "sqlite" | "redis", full: boolean) {
  let setup: Setup;
  let redis: { url: string; prefix: string } | undefined;
  const { call, post, final, result, concurrency } = client(() => setup);
  // On Redis, the cases where the store takes part (submit, idempotency, cancel, ownership).
  const sqliteOnly = (name: string, fn: () => Promise<void>) => {
    if (full) it(name, fn);
  };

  before(async () => {
    if (store === "redis") redis = { url: await redisUrl(), prefix: uniquePrefix("llm-jobs") };
    setup = await startServer(store, redis);
  });

  after(async () => {
    await setup?.server.close();
    if (redis) await deletePrefix(redis.url, redis.prefix);
  });

  const chatBody = { messages: [{ role: "user", content: "the cat" }], max_tokens: 12, temperature: 0 };

  it("a chat job's result is what POST /v1/chat/completions answers for the same greedy body", async () => {
    const { alice } = setup.keys;
    const sync = await post("/v1/chat/completions", alice, { model: "tiny-llama", ...chatBody });
    assert.equal(sync.status, 200, JSON.stringify(sync.body));
    const submitted = await post("/v1/models/tiny-llama/jobs", alice, {
      endpoint: "/v1/chat/completions",
      body: chatBody,
      metadata: { order: 7 },
    });
    assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
    assert.equal(submitted.headers.get("location"), `/v1/jobs/${submitted.body.id}`);
    assert.deepEqual(submitted.body.metadata, { order: 7 });
    const job = await final(submitted.body.id, alice);
    assert.equal(job.status, "succeeded", JSON.stringify(job));
    const out = await result(job.id, alice);
    assert.equal(out.model, "tiny-llama");
    assert.equal(out.endpoint, "/v1/chat/completions");
    assert.equal(typeof out.model_version, "string");
    assert.equal(out.response.object, "chat.completion");
    assert.equal(out.response.id, `chatcmpl-${job.id}`);
    assert.deepEqual(sameAnswer(out.response), sameAnswer(sync.body));
  });

  it("an embeddings job's result is what POST /v1/embeddings answers", async () => {
    const { alice } = setup.keys;
    const body = { input: ["hello cat", "the dog"], encoding_format: "float" };
    const sync = await post("/v1/embeddings", alice, { model: "tiny-embed", ...body });
    assert.equal(sync.status, 200, JSON.stringify(sync.body));
    const submitted = await post("/v1/models/tiny-embed/jobs", alice, { endpoint: "/v1/embeddings", body });
    assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
    assert.equal((await final(submitted.body.id, alice)).status, "succeeded");
    const out = await result(submitted.body.id, alice);
    assert.equal(out.endpoint, "/v1/embeddings");
    assert.deepEqual(out.response, sync.body);
  });

  sqliteOnly("a completion job's result is what POST /v1/completions answers: the golden text", async () => {
    const { alice } = setup.keys;
    const body = { prompt: setup.golden.prompt!, max_tokens: setup.golden.max_tokens, logprobs: 2 };
    const sync = await post("/v1/completions", alice, { model: "tiny-llama", ...body });
    assert.equal(sync.status, 200, JSON.stringify(sync.body));
    assert.equal(sync.body.choices[0].text, setup.golden.text);
    const submitted = await post("/v1/models/tiny-llama/jobs", alice, {
      endpoint: "/v1/completions",
      body: { model: "tiny-llama", ...body },
    });
    assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
    assert.equal((await final(submitted.body.id, alice)).status, "succeeded");
    const out = await result(submitted.body.id, alice);
    assert.equal(out.response.object, "text_completion");
    assert.deepEqual(sameAnswer(out.response), sameAnswer(sync.body));
  });

  it("Prefer: respond-async on each OpenAI route answers 202 with the job, honouring Idempotency-Key", async () => {
    const { alice } = setup.keys;
    const cases = [
      { path: "/v1/chat/completions", body: { model: "tiny-llama", ...chatBody }, object: "chat.completion" },
      {
        path: "/v1/completions",
        body: { model: "tiny-llama", prompt: setup.golden.prompt!, max_tokens: setup.golden.max_tokens },
        object: "text_completion",
      },
      { path: "/v1/embeddings", body: { model: "tiny-embed", input: "hello cat" }, object: "list" },
    ];
    for (const c of cases) {
      const sync = await post(c.path, alice, c.body);
      assert.equal(sync.status, 200, JSON.stringify(sync.body));
      const key = `llm-jobs-${store}-${c.path}`;
      const headers = { prefer: "respond-async", "idempotency-key": key };
      const accepted = await post(c.path, alice, c.body, headers);
      assert.equal(accepted.status, 202, `${c.path}: ${JSON.stringify(accepted.body)}`);
      assert.equal(accepted.headers.get("preference-applied"), "respond-async");
      assert.equal(accepted.headers.get("location"), `/v1/jobs/${accepted.body.id}`);
      assert.equal(accepted.body.model, c.body.model);
      const replayed = await post(c.path, alice, c.body, headers);
      assert.equal(replayed.status, 200);
      assert.equal(replayed.headers.get("idempotent-replayed"), "true");
      assert.equal(replayed.body.id, accepted.body.id);
      assert.equal((await final(accepted.body.id, alice)).status, "succeeded");
      const out = await result(accepted.body.id, alice);
      assert.equal(out.endpoint, c.path);
      assert.equal(out.response.object, c.object);
      assert.deepEqual(sameAnswer(out.response), sameAnswer(sync.body), c.path);
    }
  });

  sqliteOnly("refuses a bad body at submission with a 400 naming the field, and stream: true", async () => {
    const { alice } = setup.keys;
    const refused = async (
      path: string,
      body: unknown,
      param: string,
      headers: Record<string, string> = {},
    ) => {
      const res = await post(path, alice, body, headers);
      assert.equal(res.status, 400, `${path} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
      const error = res.body.error;
      // The native jobs route answers {error: {code, details}}; the OpenAI routes {error: {code, param}}.
      assert.equal(error.details?.param ?? error.param, param, JSON.stringify(res.body));
      return error;
    };
    const jobs = "/v1/models/tiny-llama/jobs";
    await refused(jobs, { endpoint: "/v1/chat/completions", body: { messages: "hi" } }, "messages");
    await refused(jobs, { endpoint: "/v1/chat/completions", body: { ...chatBody, n: 99 } }, "n");
    await refused(jobs, { endpoint: "/v1/chat/completions", body: { ...chatBody, stream: true } }, "stream");
    await refused(jobs, { body: chatBody }, "endpoint");
    await refused(jobs, { endpoint: "/v1/images", body: chatBody }, "endpoint");
    const responses = await refused(jobs, { endpoint: "/v1/responses", body: { input: "hi" } }, "endpoint");
    assert.match(responses.message, /\/v1\/responses/);
    await refused(jobs, { endpoint: "/v1/chat/completions" }, "body");
    await refused(
      jobs,
      { endpoint: "/v1/chat/completions", body: { ...chatBody, model: "tiny-embed" } },
      "body.model",
    );
    await refused("/v1/models/tiny-embed/jobs", { endpoint: "/v1/embeddings", body: { input: [] } }, "input");
    await refused("/v1/chat/completions", { model: "tiny-llama", ...chatBody, stream: true }, "stream", {
      prefer: "respond-async",
    });
    // Nothing was queued by any of them.
    const listed = await call("/v1/jobs?status=queued", alice);
    assert.equal(listed.body.jobs.length, 0, JSON.stringify(listed.body));
  });

  sqliteOnly("a tensor body for a language model names only the routes the model serves", async () => {
    const { alice } = setup.keys;
    const embedJob = await post("/v1/models/tiny-embed/jobs", alice, { rows: [[1, 2]] });
    assert.equal(embedJob.status, 400);
    assert.equal(embedJob.body.error.code, "MP_ERR_LLM_CAPABILITY_UNSUPPORTED");
    assert.match(embedJob.body.error.message, /\/v1\/embeddings/);
    assert.doesNotMatch(embedJob.body.error.message, /chat|\/v1\/completions/);
    const embedPredict = await post("/v1/models/tiny-embed/predict", alice, { rows: [[1, 2]] });
    assert.equal(embedPredict.status, 400);
    assert.match(embedPredict.body.error.message, /\/v1\/embeddings/);
    assert.doesNotMatch(embedPredict.body.error.message, /chat|\/v1\/completions/);
    const llamaPredict = await post("/v1/models/tiny-llama/predict", alice, { rows: [[1, 2]] });
    assert.match(llamaPredict.body.error.message, /\/v1\/chat\/completions or \/v1\/completions/);
    assert.doesNotMatch(llamaPredict.body.error.message, /embeddings/);
  });

  it("canceling a running job stops its generation and frees the sequence for the next request", async () => {
    const { alice } = setup.keys;
    const submitted = await post("/v1/models/tiny-llama-1/jobs", alice, {
      endpoint: "/v1/completions",
      body: { prompt: " the", max_tokens: 8000 },
    });
    assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
    const id = submitted.body.id;
    await until("the job generating", async () => (await concurrency("tiny-llama-1", alice)).active === 1);
    const canceled = await call(`/v1/jobs/${id}`, alice, { method: "DELETE" });
    assert.equal(canceled.status, 200);
    const job = await final(id, alice);
    assert.equal(job.status, "canceled", JSON.stringify(job));
    const next = await post("/v1/completions", alice, {
      model: "tiny-llama-1",
      prompt: setup.golden.prompt!,
      max_tokens: setup.golden.max_tokens,
    });
    assert.equal(next.status, 200);
    assert.equal(next.body.choices[0].text, setup.golden.text);
    const stopped = setup.server.logs.find(
      (l) =>
        l.msg === "generation canceled: the client left; sequence freed" && (l.generated as number) < 8000,
    );
    assert.ok(stopped, "the generation stopped early");
    await until("the sequence free", async () => (await concurrency("tiny-llama-1", alice)).active === 0);
  });

  it("a job is its key's own: another key gets 404 for it, as for no job", async () => {
    const { alice, bob } = setup.keys;
    const submitted = await post("/v1/models/tiny-llama/jobs", alice, {
      endpoint: "/v1/chat/completions",
      body: chatBody,
    });
    assert.equal(submitted.status, 202);
    const id = submitted.body.id;
    for (const [path, method] of [
      [`/v1/jobs/${id}`, "GET"],
      [`/v1/jobs/${id}/result`, "GET"],
      [`/v1/jobs/${id}`, "DELETE"],
    ] as const) {
      const res = await call(path, bob, { method });
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal(res.body.error.code, "MP_ERR_JOB_NOT_FOUND");
    }
    assert.equal((await final(id, alice)).status, "succeeded");
  });

  sqliteOnly(
    "counts a job's tokens against the key that submitted it, as the route counts a request's",
    async () => {
      const { bob } = setup.keys;
      const row = async () => {
        const usage = await call("/v1/usage?group_by=key,model", bob);
        assert.equal(usage.status, 200, JSON.stringify(usage.body));
        return (
          usage.body.data.find(
            (d: { key: string; model: string }) => d.key === "bob" && d.model === "tiny-llama",
          ) ?? {
            requests: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
          }
        );
      };
      const before = await row();
      const submitted = await post("/v1/models/tiny-llama/jobs", bob, {
        endpoint: "/v1/chat/completions",
        body: chatBody,
      });
      assert.equal((await final(submitted.body.id, bob)).status, "succeeded");
      const used = (await result(submitted.body.id, bob)).response.usage;
      assert.ok(used.completion_tokens > 0);
      await until("the job's usage recorded", async () => (await row()).requests === before.requests + 1);
      const now = await row();
      assert.equal(now.prompt_tokens - before.prompt_tokens, used.prompt_tokens);
      assert.equal(now.completion_tokens - before.completion_tokens, used.completion_tokens);
      // The same request answered by the route counts the same tokens.
      const sync = await post("/v1/chat/completions", bob, { model: "tiny-llama", ...chatBody });
      assert.equal(sync.status, 200);
      await until("the request's usage recorded", async () => (await row()).requests === before.requests + 2);
      const both = await row();
      assert.equal(both.completion_tokens - now.completion_tokens, used.completion_tokens);
    },
  );

  sqliteOnly(
    "a key may submit jobs only for the models it may use: the 404 of no model otherwise",
    async () => {
      const { carol } = setup.keys;
      const job = await post("/v1/models/tiny-llama/jobs", carol, {
        endpoint: "/v1/chat/completions",
        body: chatBody,
      });
      assert.equal(job.status, 404);
      assert.equal(job.body.error.code, "MP_ERR_MODEL_NOT_FOUND");
      const chat = await post(
        "/v1/chat/completions",
        carol,
        { model: "tiny-llama", ...chatBody },
        { prefer: "respond-async" },
      );
      assert.equal(chat.status, 404);
      const embed = await post(
        "/v1/embeddings",
        carol,
        { model: "tiny-llama", input: "x" },
        { prefer: "respond-async" },
      );
      assert.equal(embed.status, 404);
      assert.equal(embed.body.error.code, "MP_ERR_MODEL_NOT_FOUND");
      const own = await post(
        "/v1/embeddings",
        carol,
        { model: "tiny-embed", input: "x" },
        { prefer: "respond-async" },
      );
      assert.equal(own.status, 202);
      assert.equal((await final(own.body.id, carol)).status, "succeeded");
    },
  );

  sqliteOnly(
    "a job's webhook carries the answer, its event stream ends with it, a large one comes from the blob store",
    async () => {
      const { alice } = setup.keys;
      const deliveries: string[] = [];
      const receiver = createServer((req, res) => {
        let body = "";
        req.on("data", (c) => {
          body += c;
        });
        req.on("end", () => {
          deliveries.push(body);
          res.end("ok");
        });
      });
      receiver.listen(0, "127.0.0.1");
      await once(receiver, "listening");
      try {
        const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
        const chat = await post("/v1/models/tiny-llama/jobs", alice, {
          endpoint: "/v1/chat/completions",
          body: chatBody,
          callback_url: hook,
        });
        assert.equal(chat.status, 202, JSON.stringify(chat.body));
        const events = await fetch(`${setup.server.url}/v1/jobs/${chat.body.id}/events`, {
          headers: { authorization: `Bearer ${alice}` },
        });
        const stream = await events.text();
        assert.match(stream, /"status":"succeeded"/);
        assert.match(stream, /event: end/);
        await until("the webhook delivered", () => deliveries.length === 1);
        const payload = JSON.parse(deliveries[0]!);
        assert.equal(payload.event, "job.finished");
        assert.equal(payload.job.result.endpoint, "/v1/chat/completions");
        assert.deepEqual(payload.job.result, await result(chat.body.id, alice));
        // 16 inputs of tiny-embed: over jobs.inlineResultMaxBytes, so stored as a blob.
        const input = Array.from({ length: 16 }, (_, i) => `the cat ${i}`);
        const embed = await post("/v1/models/tiny-embed/jobs", alice, {
          endpoint: "/v1/embeddings",
          body: { input },
        });
        const done = await final(embed.body.id, alice);
        assert.equal(done.status, "succeeded");
        assert.ok(done.result_bytes > 1024, JSON.stringify(done));
        const stored = await result(embed.body.id, alice);
        assert.equal(stored.response.data.length, 16);
        const sync = await post("/v1/embeddings", alice, { model: "tiny-embed", input });
        assert.deepEqual(stored.response, sync.body);
      } finally {
        receiver.close();
      }
    },
  );

  sqliteOnly(
    "a waiting interactive request gets the next free sequence before a job that waited longer",
    async () => {
      const { alice } = setup.keys;
      const url = setup.server.url;
      // A long interactive answer holds the only sequence of tiny-llama-1.
      const releaseFirst = await holdSequence(url, alice, "tiny-llama-1", " the");
      // A job (tiny-llama-1 runs one job at a time) claims its work and waits for the sequence...
      const submitted = await post("/v1/models/tiny-llama-1/jobs", alice, {
        endpoint: "/v1/completions",
        body: { prompt: setup.golden.prompt!, max_tokens: setup.golden.max_tokens },
      });
      assert.equal(submitted.status, 202);
      const id = submitted.body.id;
      await until(
        "the job waiting for the sequence",
        async () => (await concurrency("tiny-llama-1", alice)).waiting === 1,
      );
      assert.equal((await call(`/v1/jobs/${id}`, alice)).body.status, "running");
      // ...then an interactive request comes and waits too.
      const second = holdSequence(url, alice, "tiny-llama-1", " a");
      await until("both waiting", async () => (await concurrency("tiny-llama-1", alice)).waiting === 2);
      releaseFirst();
      // The interactive request generates first: while it does, the job has not had the sequence.
      const releaseSecond = await second;
      const during = await call(`/v1/jobs/${id}`, alice);
      assert.equal(during.body.status, "running", JSON.stringify(during.body));
      assert.equal((await concurrency("tiny-llama-1", alice)).waiting, 1);
      releaseSecond();
      const job = await final(id, alice);
      assert.equal(job.status, "succeeded", JSON.stringify(job));
      assert.equal((await result(id, alice)).response.choices[0].text, setup.golden.text);
    },
  );
}

describe("language-model jobs (SQLite store)", () => suite("sqlite", true));
describe("language-model jobs (Redis store)", () => suite("redis", false));
