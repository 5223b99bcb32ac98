// Teams sharing one server, through a listening server and the real CLI: named keys from a key
// file made by `modelport keys create` (picked up while serving), the models a key may use (the
// same 404 as for no model), jobs seen only by the key that submitted them (404, not 403) with
// idempotency keys per key, per-key limits (429 MP_ERR_RATE_LIMITED with Retry-After and the
// RateLimit headers; other keys unaffected), usage per key in GET /v1/usage that survives a
// restart, and the audit log of admin actions.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { testModels } from "../helpers/models.js";
import { CLI, type InProcessServer, REPO_ROOT, startInProcess } from "../helpers/server.js";

const run = promisify(execFile);
const HANDLER = join(REPO_ROOT, "dist", "examples", "handlers", "latency-handler.js");
const ROW = { rows: [[1, 2, 3, 1, 0, 4]] };

let dir: string;
let keysFile: string;
let config: string;
let server: InProcessServer;
const keys: Record<string, string> = {};

/** `modelport keys create NAME ...`: the key it prints once. */
async function createKey(name: string, ...flags: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [CLI, "keys", "create", name, "--keys", keysFile, ...flags]);
  return stdout.trim();
}

async function call(path: string, key: string | undefined, init: RequestInit = {}) {
  const headers: Record<string, string> = {
    ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
    ...(init.headers as object),
  };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${server.url}${path}`, { ...init, headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

const predict = (key: string, model = "churn-tree") =>
  call(`/v1/models/${model}/predict`, key, { method: "POST", body: JSON.stringify(ROW) });

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-tenants-"));
  keysFile = join(dir, "keys.yaml");
  keys.alice = await createKey("alice", "--models", "churn-tree");
  keys.bob = await createKey("bob");
  keys.ops = await createKey("ops", "--role", "admin");
  keys.slow = await createKey("slow", "--requests-per-second", "1", "--burst", "2");
  keys.single = await createKey("single", "--concurrent", "1");
  keys.rpcslow = await createKey("rpcslow", "--requests-per-second", "0.1", "--burst", "1");
  const models = await testModels();
  config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "server:",
      `  keys: ${keysFile}`,
      `  auditLog: ${join(dir, "audit.jsonl")}`,
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      "models:",
      `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}}`,
      `  - {name: iris, path: ${join(models, "churn-tree.onnx")}}`,
      `  - {name: wait, backend: custom, path: ${HANDLER}, options: {waitMs: 1500}}`,
      "",
    ].join("\n"),
  );
  server = await startInProcess({ file: config, env: {} }, { grpc: true });
});

after(async () => {
  await server?.close();
});

describe("named keys", () => {
  it("keys create prints a key once and stores only its hash", () => {
    const file = readFileSync(keysFile, "utf8");
    for (const k of Object.values(keys)) {
      assert.match(k, /^mp_[A-Za-z0-9_-]{40,}$/);
      assert.ok(!file.includes(k), "the key itself is not in the file");
    }
    assert.match(file, /name: alice[\s\S]*hash: sha256:[0-9a-f]{64}/);
  });

  it("every key works; no key or a wrong one is a 401", async () => {
    for (const name of ["alice", "bob", "ops"]) assert.equal((await predict(keys[name]!)).status, 200, name);
    assert.equal((await predict("")).body.error.code, "MP_ERR_AUTH_REQUIRED");
    assert.equal((await predict("mp_not-a-key")).body.error.code, "MP_ERR_AUTH_INVALID");
  });

  it("a key limited to some models hears of no other: 404 as for no model, and its list shows only its own", async () => {
    const other = await predict(keys.alice!, "iris");
    assert.equal(other.status, 404);
    assert.equal(other.body.error.code, "MP_ERR_MODEL_NOT_FOUND");
    assert.ok(!JSON.stringify(other.body).includes("churn-tree"), "the error lists no model");
    assert.equal((await call("/v2/models/iris", keys.alice)).status, 404);
    const chat = await call("/v1/chat/completions", keys.alice, {
      method: "POST",
      body: JSON.stringify({ model: "iris", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(chat.status, 404);
    const listed = await call("/v1/models", keys.alice);
    assert.deepEqual(
      listed.body.data.map((m: { id: string }) => m.id),
      ["churn-tree"],
    );
    assert.equal((await predict(keys.bob!, "iris")).status, 200);
  });

  it("a key added while serving works within seconds (the file is watched)", async () => {
    const late = await createKey("late");
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await predict(late)).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 200);
  });

  it("an invalid key file at start is a config error naming the problem", async () => {
    const bad = join(dir, "bad.yaml");
    writeFileSync(bad, "keys:\n  - {name: x, hash: nothex}\n");
    const result = await run(process.execPath, [CLI, "check", "-c", config, "--keys", bad]).then(
      () => undefined,
      (err: { stderr: string }) => err.stderr,
    );
    assert.match(String(result), /server\.keys: key file .*bad\.yaml: keys\.0\.hash/);
  });
});

describe("jobs are their key's own", () => {
  it("another client key cannot see, cancel, retry or list a job (404); the admin and the owner can", async () => {
    const submitted = await call("/v1/models/churn-tree/jobs", keys.alice, {
      method: "POST",
      body: JSON.stringify(ROW),
    });
    assert.equal(submitted.status, 202);
    const id = submitted.body.id as string;
    for (const [path, method] of [
      [`/v1/jobs/${id}`, "GET"],
      [`/v1/jobs/${id}/result`, "GET"],
      [`/v1/jobs/${id}/events`, "GET"],
      [`/v1/jobs/${id}`, "DELETE"],
      [`/v1/jobs/${id}/retry`, "POST"],
    ] as const) {
      const r = await call(path, keys.bob, { method });
      assert.equal(r.status, 404, `${method} ${path}`);
      assert.equal(r.body.error.code, "MP_ERR_JOB_NOT_FOUND");
    }
    const missing = await call("/v1/jobs/00000000-0000-4000-8000-000000000000", keys.bob);
    assert.equal(
      missing.body.error.message.replace(/'[^']+'/, "ID"),
      (await call(`/v1/jobs/${id}`, keys.bob)).body.error.message.replace(/'[^']+'/, "ID"),
    );
    const bobs = await call("/v1/jobs", keys.bob);
    assert.ok(!bobs.body.jobs.some((j: { id: string }) => j.id === id));
    const alices = await call("/v1/jobs", keys.alice);
    assert.ok(alices.body.jobs.some((j: { id: string }) => j.id === id));
    assert.ok(alices.body.jobs.every((j: { owner: string }) => j.owner === "alice"));
    assert.equal((await call(`/v1/jobs/${id}?wait=10`, keys.alice)).body.owner, "alice");
    const all = await call("/v1/jobs", keys.ops);
    assert.ok(all.body.jobs.some((j: { id: string }) => j.id === id));
  });

  it("idempotency keys are per key: the same Idempotency-Key from two keys makes two jobs", async () => {
    const submit = (key: string, rows: number[][]) =>
      call("/v1/models/churn-tree/jobs", key, {
        method: "POST",
        headers: { "idempotency-key": "same-key-1" },
        body: JSON.stringify({ rows }),
      });
    const a = await submit(keys.alice!, [[1, 2, 3, 1, 0, 4]]);
    const b = await submit(keys.bob!, [[4, 3, 2, 1, 0, 1]]);
    assert.equal(a.status, 202);
    assert.equal(b.status, 202);
    assert.notEqual(a.body.id, b.body.id);
    const again = await submit(keys.alice!, [[1, 2, 3, 1, 0, 4]]);
    assert.equal(again.status, 200);
    assert.equal(again.body.id, a.body.id);
  });
});

describe("limits per key", () => {
  it("requests per second with burst: over it a 429 with Retry-After and RateLimit headers; other keys unaffected", async () => {
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await predict(keys.slow!));
    // A burst of 2 then about one per second: of 4 at once, 2 pass (3 if a second went by).
    const refused = answers.filter((a) => a.status === 429);
    assert.ok(refused.length >= 1 && refused.length <= 2, answers.map((a) => a.status).join(","));
    const r = refused[0]!;
    assert.equal(r.body.error.code, "MP_ERR_RATE_LIMITED");
    assert.ok(Number(r.headers.get("retry-after")) >= 1);
    assert.match(r.headers.get("ratelimit-policy") ?? "", /^"requests";q=2;w=2$/);
    assert.match(r.headers.get("ratelimit") ?? "", /^"requests";r=0;t=\d+$/);
    assert.match(answers[0]!.headers.get("ratelimit") ?? "", /^"requests";r=1;t=\d+$/);
    assert.equal((await predict(keys.bob!)).status, 200);
    assert.equal(answers[0]!.status, 200);
  });

  it("concurrent requests: a second call while one is in flight is a 429; after it, calls pass again", async () => {
    const first = predictWait(keys.single!);
    await new Promise((r) => setTimeout(r, 300));
    const second = await predict(keys.single!);
    assert.equal(second.status, 429);
    assert.match(second.body.error.message, /1 requests at once/);
    assert.equal((await predictWait(keys.bob!)).status, 200, "another key is not held up");
    assert.equal((await first).status, 200);
    assert.equal((await predict(keys.single!)).status, 200);
  });

  it("refusals are counted per key and limit", async () => {
    const metrics = await (
      await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${keys.ops}` } })
    ).text();
    assert.match(metrics, /modelport_rate_limited_total\{key="slow",limit="requestsPerSecond"\} [1-9]/);
    assert.match(metrics, /modelport_rate_limited_total\{key="single",limit="concurrent"\} [1-9]/);
  });
});

describe("gRPC: the same keys, models and limits", () => {
  const definition = loadSync(join(REPO_ROOT, "src", "grpc", "inference.proto"), {
    keepCase: true,
    defaults: true,
  });
  const Service = (grpc.loadPackageDefinition(definition) as any).inference.GRPCInferenceService;
  const infer = (key: string, model: string) => {
    const client = new Service(server.grpc, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${key}`);
    const request = {
      model_name: model,
      inputs: [
        {
          name: "features",
          datatype: "FP32",
          shape: [1, 6],
          contents: { fp32_contents: [1, 2, 3, 1, 0, 4] },
        },
      ],
    };
    return new Promise<grpc.ServiceError | null>((resolve) =>
      client.ModelInfer(request, md, (err: grpc.ServiceError | null) => {
        client.close();
        resolve(err);
      }),
    );
  };

  it("a model the key may not use is NOT_FOUND; over its rate, RESOURCE_EXHAUSTED", async () => {
    assert.equal(await infer(keys.alice!, "churn-tree"), null);
    assert.equal((await infer(keys.alice!, "iris"))?.code, grpc.status.NOT_FOUND);
    assert.equal(await infer(keys.rpcslow!, "churn-tree"), null);
    assert.equal((await infer(keys.rpcslow!, "churn-tree"))?.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.equal(await infer(keys.bob!, "churn-tree"), null, "another key is unaffected");
  });
});

function predictWait(key: string) {
  return call("/v1/models/wait/predict", key, { method: "POST", body: JSON.stringify({ rows: [[1]] }) });
}

describe("usage per key", () => {
  it("GET /v1/usage: requests and rows per key and model; a client key sees only its own; kept across a restart", async () => {
    const before = await call("/v1/usage?group_by=key,model", keys.ops);
    assert.equal(before.status, 200);
    const count = (
      body: { data: { key: string; model: string; requests: number }[] },
      key: string,
      model: string,
    ) => body.data.find((d) => d.key === key && d.model === model)?.requests ?? 0;
    const bobBefore = count(before.body, "bob", "iris");
    for (let i = 0; i < 3; i++) assert.equal((await predict(keys.bob!, "iris")).status, 200);
    const afterCalls = await call("/v1/usage?group_by=key,model", keys.ops);
    assert.equal(count(afterCalls.body, "bob", "iris"), bobBefore + 3);
    const row = afterCalls.body.data.find(
      (d: { key: string; model: string }) => d.key === "bob" && d.model === "iris",
    );
    assert.ok(row.rows >= 3 && row.compute_ms > 0, JSON.stringify(row));
    const own = await call("/v1/usage?group_by=key", keys.alice);
    assert.deepEqual(
      own.body.data.map((d: { key: string }) => d.key),
      ["alice"],
    );
    await server.close();
    server = await startInProcess({ file: config, env: {} }, { grpc: true });
    const restarted = await call("/v1/usage?group_by=key,model", keys.ops);
    assert.equal(count(restarted.body, "bob", "iris"), bobBefore + 3);
  });

  it("bad periods and groups are 400s naming the parameter", async () => {
    assert.equal((await call("/v1/usage?from=yesterday", keys.ops)).body.error.details.param, "from");
    assert.equal((await call("/v1/usage?group_by=color", keys.ops)).body.error.details.param, "group_by");
    // Past what a Date holds, and a parameter given twice: coded 400s, not internal errors.
    for (const [query, param] of [
      ["to=9999999999999999", "to"],
      ["group_by=key&group_by=model", "group_by"],
      ["from=1&from=2", "from"],
    ]) {
      const res = await call(`/v1/usage?${query}`, keys.ops);
      assert.deepEqual(
        [res.status, res.body.error.code, res.body.error.details.param],
        [400, "MP_ERR_REQUEST_INVALID", param],
        query,
      );
    }
  });

  it("modelport cost --by key prints usage per key from a running server", async () => {
    const { stdout } = await run(process.execPath, [CLI, "cost", server.url, "--by", "key"], {
      env: { ...process.env, MODELPORT_API_KEY: keys.ops },
    });
    assert.match(stdout, /bob/);
    assert.match(stdout, /alice/);
  });
});

describe("audit log", () => {
  it("admin actions and refused attempts are audit lines with key, action, target and result", async () => {
    const unload = await call("/v2/repository/models/iris/unload", keys.ops, { method: "POST", body: "{}" });
    assert.equal(unload.status, 200);
    const load = await call("/v2/repository/models/iris/load", keys.ops, { method: "POST", body: "{}" });
    assert.equal(load.status, 200);
    const refused = await call("/v2/repository/models/iris/unload", keys.bob, { method: "POST", body: "{}" });
    assert.equal(refused.status, 403);
    await server.close();
    const lines = readFileSync(join(dir, "audit.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const pick = (l: Record<string, unknown>) => [l.key, l.action, l.target, l.result];
    assert.deepEqual(lines.map(pick).slice(-3), [
      ["ops", "unload", "iris", "ok"],
      ["ops", "load", "iris", "ok"],
      ["bob", "unload", "iris", "MP_ERR_ADMIN_REQUIRED"],
    ]);
    server = await startInProcess({ file: config, env: {} }, { grpc: true });
  });
});
