// The OpenAI Batch API end to end (openai-batches-harness.ts: a real listening server with a key
// file, SQLite and the fs blob store, the real tiny-llama GGUF and tiny-embed), spoken to with the
// official `openai` client and fetch. Batches run as jobs: their outputs must equal what the
// synchronous routes answer for the same greedy bodies. Validation failures, a bad line, cancel,
// expiry, tenants, a restart mid-batch and one a dead process left behind; then a batch on the
// Redis job store. Waits are for states (until()), never for a length of time.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import OpenAI, { toFile } from "openai";
import { SqliteBatchStore } from "../../src/batches/sqlite-batch-store.js";
import { testModels } from "../helpers/models.js";
import { deletePrefix, REDIS_URL, redisUrl, uniquePrefix } from "../helpers/redis.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import {
  ask,
  batchJobs,
  chatLine,
  client,
  createBatch,
  embedLine,
  fileLines,
  finished,
  jsonl,
  setUp,
  startServer,
  state,
  upload,
} from "./openai-batches-harness.js";

before(setUp);
after(() => state.server.close());

describe("POST /v1/batches and the batch routes", () => {
  it("runs a 20-line chat batch as background jobs; each output body is the synchronous answer", async () => {
    const openai = client(state.keys.alice!);
    const lines = Array.from({ length: 20 }, (_, i) => chatLine(i));
    const file = await openai.files.create({
      file: await toFile(Buffer.from(jsonl(lines)), "chat.jsonl"),
      purpose: "batch",
    });
    const created = await openai.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { run: "nightly" },
    });
    assert.match(created.id, /^batch_/);
    assert.equal(created.object, "batch");
    assert.equal(created.status, "in_progress");
    assert.deepEqual(created.metadata, { run: "nightly" });
    assert.equal(created.expires_at, created.created_at + 24 * 3600);
    const batch = await finished(openai, created.id);
    assert.equal(batch.status, "completed");
    assert.deepEqual(batch.request_counts, { total: 20, completed: 20, failed: 0 });
    assert.equal(batch.error_file_id, null);
    for (const t of [batch.in_progress_at, batch.finalizing_at, batch.completed_at])
      assert.equal(typeof t, "number");
    const out = await fileLines(openai, batch.output_file_id);
    assert.deepEqual(
      out.map((l) => l.custom_id),
      lines.map((l) => l.custom_id),
    );
    const jobs = await batchJobs(created.id);
    assert.equal(jobs.length, 20);
    for (const job of jobs) {
      assert.equal(job.priority, -100, "below interactive traffic and default jobs");
      assert.equal(job.owner, "alice");
    }
    for (const [i, line] of out.entries()) {
      assert.match(line.id, /^batch_req_/);
      assert.equal(line.error, null);
      assert.equal(line.response.status_code, 200);
      assert.ok(jobs.some((j) => j.id === line.response.request_id));
      const sync = await openai.chat.completions.create(lines[i]!.body as any);
      const body = line.response.body;
      assert.equal(body.object, "chat.completion");
      assert.equal(body.model, sync.model);
      assert.deepEqual(body.choices, JSON.parse(JSON.stringify(sync.choices)));
      // Token counts alike; how much of the prompt the prefix cache held depends on what ran before.
      const { prompt_tokens, completion_tokens, total_tokens } = sync.usage!;
      assert.deepEqual(
        {
          prompt_tokens: body.usage.prompt_tokens,
          completion_tokens: body.usage.completion_tokens,
          total_tokens: body.usage.total_tokens,
        },
        { prompt_tokens, completion_tokens, total_tokens },
      );
    }
    const meta = await openai.files.retrieve(batch.output_file_id!);
    assert.equal(meta.purpose, "batch_output");
  });

  it("runs an embeddings batch whose vectors are the synchronous ones", async () => {
    const openai = client(state.keys.alice!);
    const lines = Array.from({ length: 3 }, (_, i) => embedLine(i));
    const created = await createBatch(state.keys.alice!, lines, "/v1/embeddings");
    assert.equal(created.status, 200, created.text);
    const batch = await finished(openai, created.body.id);
    assert.equal(batch.status, "completed");
    assert.deepEqual(batch.request_counts, { total: 3, completed: 3, failed: 0 });
    const out = await fileLines(openai, batch.output_file_id);
    for (const [i, line] of out.entries()) {
      assert.equal(line.custom_id, `embed-${i}`);
      const sync = await ask("POST", "/v1/embeddings", state.keys.alice!, lines[i]!.body);
      const body = line.response.body;
      assert.equal(body.object, "list");
      assert.equal(body.data.length, 2);
      assert.deepEqual(body.usage, sync.body.usage);
      for (const [k, d] of body.data.entries()) {
        const want = sync.body.data[k].embedding as number[];
        assert.equal(d.embedding.length, want.length);
        for (const [j, v] of (d.embedding as number[]).entries()) assert.ok(Math.abs(v - want[j]!) < 1e-5);
      }
    }
  });

  it("runs a Responses batch whose output bodies are the synchronous responses", async () => {
    const openai = client(state.keys.alice!);
    const lines = Array.from({ length: 3 }, (_, i) => ({
      custom_id: `resp-${i}`,
      method: "POST",
      url: "/v1/responses",
      body: { model: "tiny-llama", input: `count ${i}`, max_output_tokens: 4, temperature: 0 },
    }));
    const created = await createBatch(state.keys.alice!, lines, "/v1/responses");
    assert.equal(created.status, 200, created.text);
    const batch = await finished(openai, created.body.id);
    assert.equal(batch.status, "completed");
    assert.deepEqual(batch.request_counts, { total: 3, completed: 3, failed: 0 });
    const out = await fileLines(openai, batch.output_file_id);
    assert.equal(out.length, 3);
    for (const line of out) {
      const i = Number(line.custom_id.slice("resp-".length));
      const sync = await ask("POST", "/v1/responses", state.keys.alice!, { ...lines[i]!.body, store: false });
      assert.equal(sync.status, 200, sync.text);
      const body = line.response.body;
      assert.equal(line.response.status_code, 200);
      assert.equal(body.object, "response");
      assert.equal(body.status, sync.body.status);
      assert.deepEqual(body.output[0].content, sync.body.output[0].content);
      assert.equal(body.usage.output_tokens, sync.body.usage.output_tokens);
    }
  });

  it("puts a line whose body its route refuses in the error file, and runs the others", async () => {
    const openai = client(state.keys.alice!);
    const bad = { ...chatLine(1), body: { ...chatLine(1).body, temperature: "hot" } };
    const created = await createBatch(
      state.keys.alice!,
      [chatLine(0), bad, chatLine(2)],
      "/v1/chat/completions",
    );
    const batch = await finished(openai, created.body.id);
    assert.equal(batch.status, "completed");
    assert.deepEqual(batch.request_counts, { total: 3, completed: 2, failed: 1 });
    const out = await fileLines(openai, batch.output_file_id);
    assert.deepEqual(
      out.map((l) => l.custom_id),
      ["chat-0", "chat-2"],
    );
    const errors = await fileLines(openai, batch.error_file_id);
    assert.equal(errors.length, 1);
    assert.equal(errors[0].custom_id, "chat-1");
    assert.equal(errors[0].response, null);
    assert.equal(errors[0].error.code, "MP_ERR_REQUEST_INVALID");
    assert.match(errors[0].error.message, /temperature/);
    assert.match(errors[0].id, /^batch_req_/);
  });

  it("fails validation with errors.data naming each line at fault, and runs nothing", async () => {
    const mismatch = await createBatch(
      state.keys.alice!,
      [chatLine(0), { ...embedLine(1) }, { ...chatLine(2), body: { messages: [] } }],
      "/v1/chat/completions",
    );
    assert.equal(mismatch.status, 200, mismatch.text);
    assert.equal(mismatch.body.status, "failed");
    assert.equal(typeof mismatch.body.failed_at, "number");
    assert.deepEqual(
      mismatch.body.errors.data.map((e: any) => [e.line, e.code, e.param]),
      [
        [2, "MP_ERR_REQUEST_INVALID", "url"],
        [3, "MP_ERR_REQUEST_INVALID", "body.model"],
      ],
    );
    assert.deepEqual(await batchJobs(mismatch.body.id), []);
    // A model the key may not use is "not found", as one that does not exist.
    const foreign = await createBatch(state.keys.bob!, [embedLine(0)], "/v1/embeddings");
    const none = await createBatch(
      state.keys.bob!,
      [{ ...embedLine(0), body: { model: "nope", input: "x" } }],
      "/v1/embeddings",
    );
    assert.equal(foreign.body.status, "failed");
    assert.equal(foreign.body.errors.data[0].code, "MP_ERR_MODEL_NOT_FOUND");
    assert.equal(none.body.errors.data[0].code, "MP_ERR_MODEL_NOT_FOUND");
    assert.ok(!foreign.body.errors.data[0].message.includes("tiny-embed served"));
    // A model of the other family.
    const family = await createBatch(
      state.keys.alice!,
      [{ ...chatLine(0), body: { ...chatLine(0).body, model: "tiny-embed" } }],
      "/v1/chat/completions",
    );
    assert.equal(family.body.status, "failed");
    assert.equal(family.body.errors.data[0].code, "MP_ERR_LLM_CAPABILITY_UNSUPPORTED");
  });

  it("answers 400 naming the field for a bad request, 404 for a file the key may not see", async () => {
    const file = (await upload(state.keys.alice!, jsonl([chatLine(0)]))).body.id as string;
    const good = { input_file_id: file, endpoint: "/v1/chat/completions", completion_window: "24h" };
    for (const [change, param] of [
      [{ endpoint: "/v1/images" }, "endpoint"],
      [{ completion_window: "1h" }, "completion_window"],
      [{ input_file_id: undefined }, "input_file_id"],
      [{ metadata: { n: 1 } }, "metadata"],
    ] as const) {
      const res = await ask("POST", "/v1/batches", state.keys.alice!, { ...good, ...change });
      assert.equal(res.status, 400, JSON.stringify(change));
      assert.equal(res.body.error.param, param);
    }
    const other = await ask("POST", "/v1/batches", state.keys.bob!, good);
    assert.equal(other.status, 404);
    assert.equal(other.body.error.code, "MP_ERR_FILE_NOT_FOUND");
  });

  it("cancels: queued jobs end canceled, the batch cancelled with batch_cancelled error lines", async () => {
    const openai = client(state.keys.alice!);
    const lines = Array.from({ length: 3 }, (_, i) => ({
      ...chatLine(i),
      body: { ...chatLine(i).body, model: "stuck-llama" },
    }));
    const created = await createBatch(state.keys.alice!, lines, "/v1/chat/completions");
    assert.equal(created.body.status, "in_progress");
    await until("the batch's jobs to be queued", async () => (await batchJobs(created.body.id)).length === 3);
    const cancelling = await openai.batches.cancel(created.body.id);
    assert.equal(cancelling.status, "cancelling");
    assert.equal(typeof cancelling.cancelling_at, "number");
    const batch = await finished(openai, created.body.id);
    assert.equal(batch.status, "cancelled");
    assert.equal(typeof batch.cancelled_at, "number");
    assert.deepEqual(batch.request_counts, { total: 3, completed: 0, failed: 3 });
    assert.equal(batch.output_file_id, null);
    const errors = await fileLines(openai, batch.error_file_id);
    assert.deepEqual(
      errors.map((e) => [e.custom_id, e.error.code]),
      lines.map((l) => [l.custom_id, "batch_cancelled"]),
    );
    for (const job of await batchJobs(created.body.id)) assert.equal(job.status, "canceled");
    const again = await ask("POST", `/v1/batches/${created.body.id}/cancel`, state.keys.alice!);
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, "MP_ERR_BATCH_FINISHED");
  });

  it("expires a batch past its window: remaining jobs canceled, batch_expired error lines", async () => {
    const openai = client(state.keys.alice!);
    const line = { ...chatLine(0), body: { ...chatLine(0).body, model: "stuck-llama" } };
    const created = await createBatch(state.keys.alice!, [line], "/v1/chat/completions");
    await until("the batch's job to be queued", async () => (await batchJobs(created.body.id)).length === 1);
    // Its window ends now: as if 24 hours had passed.
    const store = new SqliteBatchStore(join(state.dir, "jobs.db"));
    const record = (await store.getBatch(created.body.id))!;
    assert.ok(await store.updateBatch({ ...record, expiresAt: Date.now() - 1 }, "in_progress"));
    await store.close();
    const batch = await finished(openai, created.body.id);
    assert.equal(batch.status, "expired");
    assert.equal(typeof batch.expired_at, "number");
    const errors = await fileLines(openai, batch.error_file_id);
    assert.deepEqual(
      errors.map((e) => [e.custom_id, e.error.code]),
      [["chat-0", "batch_expired"]],
    );
  });

  it("shows a key only its own batches: another key's id is the same 404 as an unknown one", async () => {
    const created = await createBatch(state.keys.alice!, [chatLine(0)], "/v1/chat/completions");
    const id = created.body.id as string;
    const unknown = await ask("GET", "/v1/batches/batch_0000", state.keys.bob!);
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, "MP_ERR_BATCH_NOT_FOUND");
    for (const [method, path] of [
      ["GET", `/v1/batches/${id}`],
      ["POST", `/v1/batches/${id}/cancel`],
    ] as const) {
      const res = await ask(method, path, state.keys.bob!);
      assert.equal(res.status, 404);
      assert.deepEqual(res.body.error, { ...unknown.body.error, message: `no batch '${id}'` });
    }
    const listed = await ask("GET", "/v1/batches?limit=100", state.keys.bob!);
    assert.ok(!listed.body.data.some((b: any) => b.id === id));
    assert.equal((await ask("GET", `/v1/batches/${id}`, state.keys.alice!)).status, 200);
    await finished(client(state.keys.alice!), id);
  });

  it("lists a key's batches newest first with after and limit", async () => {
    const openai = client(state.keys.alice!);
    const page = await openai.batches.list({ limit: 2 });
    assert.equal(page.data.length, 2);
    assert.ok(page.data[0]!.created_at >= page.data[1]!.created_at);
    const all = await ask("GET", "/v1/batches?limit=100", state.keys.alice!);
    assert.equal(all.body.object, "list");
    const ids = all.body.data.map((b: any) => b.id);
    assert.deepEqual(
      page.data.map((b) => b.id),
      ids.slice(0, 2),
    );
    const rest = await ask("GET", `/v1/batches?limit=100&after=${ids[1]}`, state.keys.alice!);
    assert.deepEqual(
      rest.body.data.map((b: any) => b.id),
      ids.slice(2),
    );
    const bad = await ask("GET", "/v1/batches?limit=101", state.keys.alice!);
    assert.equal(bad.status, 400);
  });

  it("finishes a batch across a restart: the new server resumes it, no line runs twice", async () => {
    const openai = () => client(state.keys.alice!);
    const lines = Array.from({ length: 12 }, (_, i) => chatLine(100 + i));
    const created = await createBatch(state.keys.alice!, lines, "/v1/chat/completions");
    assert.equal(created.body.status, "in_progress");
    // Closed while its lines are being submitted or run; a new server on the same store.
    await state.server.close();
    state.server = await startServer();
    const batch = await finished(openai(), created.body.id);
    assert.equal(batch.status, "completed");
    assert.deepEqual(batch.request_counts, { total: 12, completed: 12, failed: 0 });
    const out = await fileLines(openai(), batch.output_file_id);
    assert.deepEqual(
      out.map((l) => l.custom_id),
      lines.map((l) => l.custom_id),
    );
    const jobs = await batchJobs(created.body.id);
    assert.equal(jobs.length, 12, "one job per line");
    assert.deepEqual(new Set(out.map((l) => l.response.request_id)), new Set(jobs.map((j) => j.id)));
  });

  it("takes up at start a batch a dead process left in progress; lines it had submitted are not run twice", async () => {
    const openai = () => client(state.keys.alice!);
    const lines = Array.from({ length: 4 }, (_, i) => ({ ...chatLine(200 + i), custom_id: `r-${i}` }));
    const file = (await upload(state.keys.alice!, jsonl(lines))).body.id as string;
    const id = `batch_${randomUUID().replaceAll("-", "")}`;
    // The process submitted lines 0 and 1 as jobs (with the batch's idempotency keys) and died
    // before it stored which jobs they were.
    const early: string[] = [];
    for (const l of lines.slice(0, 2)) {
      const res = await fetch(`${state.server.url}/v1/models/tiny-llama/jobs`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${state.keys.alice}`,
          "content-type": "application/json",
          "idempotency-key": `${id}/${l.custom_id}`,
        },
        body: JSON.stringify({
          endpoint: l.url,
          body: l.body,
          metadata: { batch_id: id, custom_id: l.custom_id },
        }),
      });
      const job = (await res.json()) as any;
      assert.equal(res.status, 202, JSON.stringify(job));
      early.push(job.id);
    }
    // Finished before the restart: no job event will bring this batch to the new server's notice.
    for (const jobId of early)
      await until(
        `job ${jobId} to succeed`,
        async () => (await ask("GET", `/v1/jobs/${jobId}`, state.keys.alice!)).body.status === "succeeded",
      );
    await state.server.close();
    const store = new SqliteBatchStore(join(state.dir, "jobs.db"));
    const now = Date.now();
    await store.createBatch({
      id,
      owner: "alice",
      endpoint: "/v1/chat/completions",
      inputFileId: file,
      completionWindow: "24h",
      status: "in_progress",
      createdAt: now,
      inProgressAt: now,
      expiresAt: now + 86_400_000,
      requestCounts: { total: 4, completed: 0, failed: 0 },
    });
    await store.close();
    state.server = await startServer();
    const batch = await finished(openai(), id);
    assert.equal(batch.status, "completed");
    assert.deepEqual(batch.request_counts, { total: 4, completed: 4, failed: 0 });
    const jobs = await batchJobs(id);
    assert.equal(jobs.length, 4, "lines 0 and 1 are the jobs submitted before, not new ones");
    const out = await fileLines(openai(), batch.output_file_id);
    assert.deepEqual(
      out.slice(0, 2).map((l) => l.response.request_id),
      early,
    );
  });
});

describe("batches on the Redis job store", () => {
  let redisServer: InProcessServer;
  let prefix: string;

  before(async () => {
    const url = await redisUrl();
    prefix = uniquePrefix("batches");
    const models = await testModels();
    const file = join(state.dir, "modelport-redis.yaml");
    writeFileSync(
      file,
      [
        "jobs:",
        `  store: redis`,
        `  redisUrl: "${url}"`,
        `  redisPrefix: "${prefix}"`,
        `  blobs: {backend: fs, dir: ${join(state.dir, "blobs-redis")}}`,
        "  batches: {checkMs: 200}",
        "models:",
        `  - {name: tiny-embed, backend: transformers, path: ${join(models, "tiny-embed")}}`,
        "",
      ].join("\n"),
    );
    redisServer = await startInProcess({ file, env: {} });
  });

  after(async () => {
    await redisServer?.close();
    await deletePrefix(REDIS_URL, prefix);
  });

  it("keeps files and batches in Redis and completes an embeddings batch", async () => {
    const openai = new OpenAI({ baseURL: `${redisServer.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const lines = Array.from({ length: 3 }, (_, i) => embedLine(i));
    const file = await openai.files.create({
      file: await toFile(Buffer.from(jsonl(lines)), "e.jsonl"),
      purpose: "batch",
    });
    const created = await openai.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/embeddings",
      completion_window: "24h",
    });
    const batch = await finished(openai, created.id);
    assert.equal(batch.status, "completed");
    assert.deepEqual(batch.request_counts, { total: 3, completed: 3, failed: 0 });
    const out = await fileLines(openai, batch.output_file_id);
    assert.deepEqual(
      out.map((l) => l.custom_id),
      ["embed-0", "embed-1", "embed-2"],
    );
    const redis = new Redis(REDIS_URL);
    try {
      assert.ok(await redis.exists(`${prefix}b:${created.id}`), "the batch's record is in Redis");
      assert.ok(await redis.exists(`${prefix}bf:${file.id}`), "the file's record is in Redis");
    } finally {
      redis.disconnect();
    }
    const listed = await openai.batches.list();
    assert.deepEqual(
      listed.data.map((b) => b.id),
      [created.id],
    );
  });
});
