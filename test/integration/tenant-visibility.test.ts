// Who can see what, through a listening server with a key file made by `modelport keys create`:
// an admin key, a metrics key (role metrics), and client keys limited to different models. For
// each surface the question is "what did this key learn?": a client key's answers (bodies,
// headers, metric lines, gRPC statuses) name no model and no key outside its scope; a model it may
// not use is answered byte for byte as a name no model has, before any check that depends on the
// model (the prompt's size against the model's context); the request metric's model label names
// only a model the caller may use; /readyz names no model to a caller without a key; the metrics
// key reads every series with a bearer token, as Prometheus' `authorization: credentials_file`
// sends it, and nothing else.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import WebSocket from "ws";
import { parsePrometheus } from "../../src/cli/cost.js";
import { testModels } from "../helpers/models.js";
import { CLI, type InProcessServer, REPO_ROOT, startInProcess } from "../helpers/server.js";

const run = promisify(execFile);
const ROW = { rows: [[1, 2, 3, 1, 0, 4]] };
const SEGMENT_ROW = { rows: [[0.5, -1, 0.25, 1]] };
/** The served models; tiny-llama and tiny-embed load on first use, which no test here causes. */
const MODELS = ["churn-tree", "segment-mlp", "tiny-llama", "tiny-embed"];
/** alpha: churn-tree, tiny-llama and a name no model has; beta: segment-mlp; gamma: every model. */
const ALPHA_MODELS = ["churn-tree", "tiny-llama", "ghost-model"];
const KEY_NAMES = ["team-alpha", "team-beta", "team-gamma", "ops-admin", "prom-scraper"];
/** Over tiny-llama's prompt bound here: llm.contextSize 64 × 32 bytes per token = 2048 bytes. */
const LONG_PROMPT = "word ".repeat(1000);

let server: InProcessServer;
const keys: Record<string, string> = {};

interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
}

async function ask(
  method: string,
  path: string,
  key: string | undefined,
  body?: unknown,
  extra: Record<string, string> = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...extra };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (key !== undefined) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, headers: Object.fromEntries(res.headers), text: await res.text() };
}

const json = (a: Answer) => JSON.parse(a.text);
const metricsText = async (key: string | undefined) => (await ask("GET", "/metrics", key)).text;

/** Names outside a key's scope found in `text`. */
function leaked(text: string, outside: readonly string[]): string[] {
  return outside.filter((name) => text.includes(name));
}

/** `modelport keys create NAME ...`: the key it prints once. */
async function createKey(file: string, name: string, ...flags: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [CLI, "keys", "create", name, "--keys", file, ...flags]);
  return stdout.trim();
}

const definition = loadSync(join(REPO_ROOT, "src", "grpc", "inference.proto"), {
  keepCase: true,
  defaults: true,
});
const Service = (grpc.loadPackageDefinition(definition) as any).inference.GRPCInferenceService;
let channel: any;

interface GrpcAnswer {
  code: number;
  details: string;
  trailers: Record<string, unknown>;
  res: unknown;
}

function rpc(method: string, message: object, key: string): Promise<GrpcAnswer> {
  channel ??= new Service(server.grpc, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${key}`);
  return new Promise((resolve) =>
    channel[method](message, md, (err: grpc.ServiceError | null, res: unknown) =>
      resolve({
        code: err?.code ?? 0,
        details: err?.details ?? "",
        trailers: err?.metadata.getMap() ?? {},
        res,
      }),
    ),
  );
}

const inferMessage = (model: string) => ({
  model_name: model,
  inputs: [
    { name: "features", datatype: "FP32", shape: [1, 6], contents: { fp32_contents: [1, 2, 3, 1, 0, 4] } },
  ],
});

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelport-visibility-"));
  const keysFile = join(dir, "keys.yaml");
  keys.alpha = await createKey(keysFile, "team-alpha", "--models", ALPHA_MODELS.join(","));
  keys.beta = await createKey(keysFile, "team-beta", "--models", "segment-mlp");
  keys.gamma = await createKey(keysFile, "team-gamma");
  keys.admin = await createKey(keysFile, "ops-admin", "--role", "admin");
  keys.metrics = await createKey(keysFile, "prom-scraper", "--role", "metrics");
  const models = await testModels();
  const config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "server:",
      `  keys: ${keysFile}`,
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "models:",
      `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}}`,
      `  - {name: segment-mlp, path: ${join(models, "segment-mlp.onnx")}}`,
      `  - {name: tiny-llama, backend: llama-cpp, path: ${join(models, "tiny-llama.gguf")}, load: lazy, llm: {contextSize: 64}}`,
      `  - {name: tiny-embed, backend: transformers, path: ${join(models, "tiny-embed")}, load: lazy}`,
      "",
    ].join("\n"),
  );
  server = await startInProcess({ file: config, env: {} }, { grpc: true });
  // Traffic of every key on its models, so each has series of its own in /metrics.
  for (const [key, model, row] of [
    [keys.alpha, "churn-tree", ROW],
    [keys.beta, "segment-mlp", SEGMENT_ROW],
    [keys.gamma, "churn-tree", ROW],
    [keys.gamma, "segment-mlp", SEGMENT_ROW],
    [keys.admin, "segment-mlp", SEGMENT_ROW],
  ] as const) {
    const res = await ask("POST", `/v1/models/${model}/predict`, key, row);
    assert.equal(res.status, 200, res.text);
  }
});

after(async () => {
  channel?.close();
  await server?.close();
});

describe("the metrics key (role metrics)", () => {
  it("reads every series of /metrics with a bearer token, as a Prometheus scrape sends it", async () => {
    const res = await ask("GET", "/metrics", keys.metrics, undefined, {
      accept: "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1",
      "user-agent": "Prometheus/2.53.0",
    });
    assert.equal(res.status, 200);
    assert.match(res.headers["content-type"] ?? "", /^text\/plain; version=0\.0\.4/);
    for (const name of ["team-alpha", "team-beta", "team-gamma", "ops-admin", "churn-tree", "segment-mlp"])
      assert.ok(res.text.includes(`"${name}"`), `${name} is in the metrics key's scrape`);
    assert.match(res.text, /^process_cpu|^modelport_process_cpu_seconds_total \d/m);
  });

  it("reads the whole /readyz body", async () => {
    const res = await ask("GET", "/readyz", keys.metrics);
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(json(res).models).sort(), [...MODELS].sort());
  });

  it("every other route and gRPC call: 403 MP_ERR_ROLE_FORBIDDEN, before any model is looked up", async () => {
    for (const [method, path, body] of [
      ["GET", "/v1/models", undefined],
      ["GET", "/v1/models/churn-tree", undefined],
      ["POST", "/v1/models/churn-tree/predict", ROW],
      ["POST", "/v1/models/no-such-model/predict", ROW],
      ["GET", "/v2/models/churn-tree", undefined],
      ["GET", "/v2", undefined],
      ["POST", "/v1/chat/completions", { model: "tiny-llama", messages: [{ role: "user", content: "hi" }] }],
      ["GET", "/openapi.json", undefined],
      ["GET", "/docs", undefined],
      ["GET", "/v1/usage", undefined],
      ["GET", "/v1/jobs", undefined],
      ["POST", "/v2/repository/index", {}],
      ["GET", "/no/such/route", undefined],
    ] as const) {
      const res = await ask(method, path, keys.metrics, body);
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
      assert.match(res.text, /MP_ERR_ROLE_FORBIDDEN/, `${method} ${path}`);
    }
    for (const [method, message] of [
      ["ModelInfer", inferMessage("churn-tree")],
      ["ModelMetadata", { name: "churn-tree" }],
      ["ServerMetadata", {}],
    ] as const) {
      const res = await rpc(method, message, keys.metrics!);
      assert.equal(res.code, grpc.status.PERMISSION_DENIED, `${method}: ${res.details}`);
      assert.deepEqual(res.trailers["mp-error-code"], "MP_ERR_ROLE_FORBIDDEN");
    }
  });

  it("keys create refuses a metrics key with models (a usage error), and keys list shows its role", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelport-metrics-key-"));
    const file = join(dir, "keys.yaml");
    const refused = await run(process.execPath, [
      CLI,
      "keys",
      "create",
      "scrape",
      "--keys",
      file,
      "--role",
      "metrics",
      "--models",
      "churn-tree",
    ]).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(refused?.code, 2);
    assert.match(refused?.stderr ?? "", /--models does not go with --role metrics/);
    await createKey(file, "scrape", "--role", "metrics");
    const { stdout } = await run(process.execPath, [CLI, "keys", "list", "--keys", file]);
    assert.equal(stdout, "scrape\tmetrics\t-\tno limits\n");
  });
});

describe("/metrics for a client key: its own series only", () => {
  /** The label sets of a scrape, with the rule a client key's scrape must keep. */
  const samples = (text: string) => parsePrometheus(text);

  it("a key limited to some models reads only series of its key or its models; nothing names another", async () => {
    const admin = await metricsText(keys.admin);
    // What the filter drops exists: the admin sees the other keys' and models' series.
    for (const name of ["team-beta", "team-gamma", "segment-mlp"])
      assert.ok(admin.includes(`"${name}"`), `${name} in the admin's scrape`);
    const text = await metricsText(keys.alpha);
    const outside = ["team-beta", "team-gamma", "ops-admin", "prom-scraper", "segment-mlp", "tiny-embed"];
    assert.deepEqual(leaked(text, outside), []);
    const all = samples(text);
    assert.ok(all.length > 0);
    for (const s of all) {
      const { key, model } = s.labels;
      assert.ok(key !== undefined || model !== undefined, `${s.name} has neither label`);
      if (key !== undefined) assert.equal(key, "team-alpha", s.name);
      if (model !== undefined) assert.ok(ALPHA_MODELS.includes(model), `${s.name}{model="${model}"}`);
    }
    assert.match(
      text,
      /^modelport_requests_total\{model="churn-tree",route="\/v1\/models\/:model\/predict",status="200"\} \d+$/m,
    );
    assert.match(text, /^modelport_key_requests_total\{key="team-alpha",model="churn-tree"\} 1$/m);
  });

  it("its scrape is the full one less what it may not see, in the registry's own format", async () => {
    const full = await metricsText(keys.admin);
    const own = await metricsText(keys.alpha);
    // The admin's scrape filtered here by the documented rule: sample lines kept when their key
    // label is alpha's and their model label one of its models; a family without samples goes.
    const keep = (line: string) => {
      const [s] = samples(line);
      if (!s) return false;
      const { key, model } = s.labels;
      if (key === undefined && model === undefined) return false;
      return (
        (key === undefined || key === "team-alpha") && (model === undefined || ALPHA_MODELS.includes(model))
      );
    };
    const families = full.trimEnd().split("\n\n");
    const expected = families
      .map((family) => family.split("\n").filter((line) => line.startsWith("#") || keep(line)))
      .filter((lines) => lines.some((line) => !line.startsWith("#")))
      .map((lines) => lines.join("\n"));
    assert.equal(own, `${expected.join("\n\n")}\n`);
  });

  it("a key with no model list reads every model's series, but only its own key's", async () => {
    const text = await metricsText(keys.gamma);
    assert.deepEqual(leaked(text, ["team-alpha", "team-beta", "ops-admin", "prom-scraper"]), []);
    assert.match(text, /modelport_requests_total\{model="segment-mlp",[^}]*status="200"\}/);
    assert.match(text, /modelport_key_requests_total\{key="team-gamma",model="churn-tree"\} 1/);
    assert.doesNotMatch(text, /model=""/);
  });
});

describe("/readyz and /v2/health/ready", () => {
  it("the same status for every caller; without a key the body names no model and gives counts", async () => {
    const answers = {
      none: await ask("GET", "/readyz", undefined),
      wrong: await ask("GET", "/readyz", "mp_not-a-key"),
      alpha: await ask("GET", "/readyz", keys.alpha),
      admin: await ask("GET", "/readyz", keys.admin),
    };
    for (const a of Object.values(answers)) assert.equal(a.status, 200);
    for (const who of ["none", "wrong"] as const) {
      assert.deepEqual(leaked(answers[who].text, MODELS), [], who);
      assert.deepEqual(json(answers[who]), {
        ready: true,
        counts: { models: 4, ready: 2 },
        jobs: { store: "sqlite", reachable: true, blobs: { backend: "fs", reachable: true } },
      });
    }
    assert.deepEqual(Object.keys(json(answers.alpha).models).sort(), ["churn-tree", "tiny-llama"]);
    assert.deepEqual(leaked(answers.alpha.text, ["segment-mlp", "tiny-embed"]), []);
    assert.deepEqual(Object.keys(json(answers.admin).models).sort(), [...MODELS].sort());
    const ready = await ask("GET", "/v2/health/ready", undefined);
    assert.equal(ready.status, 200);
    assert.deepEqual(json(ready), { ready: true });
  });
});

describe("/openapi.json and /docs", () => {
  it("list only the caller's models; the admin's list every one", async () => {
    for (const path of ["/openapi.json", "/docs"]) {
      const beta = await ask("GET", path, keys.beta);
      assert.equal(beta.status, 200);
      assert.deepEqual(leaked(beta.text, ["churn-tree", "tiny-llama", "tiny-embed"]), [], path);
      assert.ok(beta.text.includes("/v1/models/segment-mlp/predict"), path);
      const alpha = await ask("GET", path, keys.alpha);
      assert.deepEqual(leaked(alpha.text, ["segment-mlp", "tiny-embed"]), [], path);
      assert.ok(alpha.text.includes("/v1/models/churn-tree/predict"), path);
      // (The language models, not loaded yet, show on /docs; /openapi.json lists their routes once loaded.)
      const admin = await ask("GET", path, keys.admin);
      const every = path === "/docs" ? MODELS : ["churn-tree", "segment-mlp"];
      assert.deepEqual(leaked(admin.text, every), every, path);
    }
  });
});

/** `answer` with `name` and its request id written as placeholders, and no Date header. */
function normal(a: Answer, name: string): Answer {
  const id = a.headers["x-request-id"] ?? "";
  const swap = (s: string) => s.replaceAll(id, "REQUEST-ID").replaceAll(name, "NAME");
  const { date: _date, ...headers } = a.headers;
  return {
    status: a.status,
    headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, swap(v)])),
    text: swap(a.text),
  };
}

/** Every request that names a model, HTTP and OpenAI routes, with `model` in it. */
function modelRequests(model: string): [string, string, unknown, Record<string, string>?][] {
  const chat = { model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 };
  return [
    ["GET", `/v1/models/${model}`, undefined],
    ["POST", `/v1/models/${model}/predict`, ROW],
    ["POST", `/v1/models/${model}/versions/1/predict`, ROW],
    ["POST", `/v1/models/${model}/predict`, ROW, { prefer: "respond-async" }],
    ["POST", `/v1/models/${model}/jobs`, ROW],
    ["POST", `/v1/models/${model}/promote`, { version: "2" }],
    ["GET", `/v2/models/${model}`, undefined],
    ["GET", `/v2/models/${model}/versions/1`, undefined],
    ["GET", `/v2/models/${model}/ready`, undefined],
    [
      "POST",
      `/v2/models/${model}/infer`,
      { inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", data: [1, 2, 3, 1, 0, 4] }] },
    ],
    ["POST", "/v1/chat/completions", chat],
    ["POST", "/v1/chat/completions", { ...chat, stream: true }],
    ["POST", "/v1/chat/completions", { ...chat, messages: [{ role: "user", content: LONG_PROMPT }] }],
    ["POST", "/v1/completions", { model, prompt: "Once", max_tokens: 4 }],
    ["POST", "/v1/completions", { model, prompt: LONG_PROMPT, max_tokens: 4 }],
    ["POST", "/v1/embeddings", { model, input: "a text" }],
  ];
}

/** A name no model has, as long as `name`, so that both answers are the same length too. */
const unknownLike = (name: string) => `q${"z".repeat(name.length - 1)}`;

describe("a model the key may not use is answered exactly as a name no model has", () => {
  it("HTTP, OIP, OpenAI and jobs routes: byte for byte the same answer (status, headers, body)", async () => {
    for (const [key, forbidden] of [
      [keys.beta!, "churn-tree"],
      [keys.beta!, "tiny-llama"],
      [keys.beta!, "tiny-embed"],
      [keys.alpha!, "segment-mlp"],
      // Listed in alpha's key, served by no one: never the catalogue's own 404, which lists every model.
      [keys.alpha!, "ghost-model"],
    ] as const) {
      const unknown = unknownLike(forbidden);
      // The same requests in the same order, with the unknown name in place of the forbidden one.
      const twins = modelRequests(unknown);
      for (const [i, [method, path, body, headers]] of modelRequests(forbidden).entries()) {
        const asForbidden = normal(await ask(method, path, key, body, headers), forbidden);
        const [, unknownPath, unknownBody] = twins[i]!;
        const asUnknown = normal(await ask(method, unknownPath, key, unknownBody, headers), unknown);
        assert.equal(
          asForbidden.status,
          404,
          `${method} ${path} ${JSON.stringify(body)}: ${asForbidden.text}`,
        );
        assert.deepEqual(asForbidden, asUnknown, `${method} ${path} ${JSON.stringify(body)}`);
        assert.deepEqual(leaked(asForbidden.text, MODELS), [], `${method} ${path}`);
      }
    }
  });

  it("gRPC ModelInfer, ModelMetadata and ModelReady: the same status, message and trailers", async () => {
    for (const forbidden of ["churn-tree", "tiny-llama"]) {
      const unknown = unknownLike(forbidden);
      for (const [method, message] of [
        ["ModelInfer", (m: string) => inferMessage(m)],
        ["ModelMetadata", (m: string) => ({ name: m })],
        ["ModelReady", (m: string) => ({ name: m })],
      ] as const) {
        const a = await rpc(method, message(forbidden), keys.beta!);
        const b = await rpc(method, message(unknown), keys.beta!);
        assert.equal(a.code, grpc.status.NOT_FOUND, `${method} ${forbidden}: ${a.details}`);
        assert.deepEqual(
          { ...a, details: a.details.replaceAll(forbidden, "NAME") },
          { ...b, details: b.details.replaceAll(unknown, "NAME") },
          method,
        );
      }
    }
  });

  it("the access check comes before the prompt's size: a long prompt is a 404 to a key that may not use the model", async () => {
    const chat = (key: string, model: string) =>
      ask("POST", "/v1/chat/completions", key, { model, messages: [{ role: "user", content: LONG_PROMPT }] });
    const allowed = await chat(keys.alpha!, "tiny-llama");
    assert.equal(allowed.status, 400, allowed.text);
    assert.equal(json(allowed).error.code, "MP_ERR_LLM_CONTEXT_OVERFLOW");
    const forbidden = await chat(keys.beta!, "tiny-llama");
    assert.equal(forbidden.status, 404, forbidden.text);
    assert.equal(json(forbidden).error.code, "MP_ERR_MODEL_NOT_FOUND");
    const completion = await ask("POST", "/v1/completions", keys.beta, {
      model: "tiny-llama",
      prompt: LONG_PROMPT,
    });
    assert.equal(json(completion).error.code, "MP_ERR_MODEL_NOT_FOUND");
  });
});

describe("the request metric's model label", () => {
  /** modelport_requests_total by model, route and status, read with the admin key. */
  const count = async (model: string, route: string, status: number) =>
    parsePrometheus(await metricsText(keys.admin)).find(
      (s) =>
        s.name === "modelport_requests_total" &&
        s.labels.model === model &&
        s.labels.route === route &&
        s.labels.status === String(status),
    )?.value ?? 0;

  it("names a model only for a caller that may use it: a forbidden model's 404 is labelled as an unknown name's", async () => {
    const route = "/v1/models/:model/predict";
    const before = await count("", route, 404);
    for (let i = 0; i < 3; i++)
      assert.equal((await ask("POST", "/v1/models/churn-tree/predict", keys.beta, ROW)).status, 404);
    assert.equal(await count("churn-tree", route, 404), 0);
    assert.equal(await count("", route, 404), before + 3);
    const grpcBefore = await count("", "grpc:ModelInfer", 404);
    assert.equal(
      (await rpc("ModelInfer", inferMessage("churn-tree"), keys.beta!)).code,
      grpc.status.NOT_FOUND,
    );
    assert.equal(await count("churn-tree", "grpc:ModelInfer", 404), 0);
    assert.equal(await count("", "grpc:ModelInfer", 404), grpcBefore + 1);
    // The key's own model is still named.
    assert.equal((await ask("POST", "/v1/models/segment-mlp/predict", keys.beta, SEGMENT_ROW)).status, 200);
    assert.ok((await count("segment-mlp", route, 200)) >= 1);
  });
});

describe("what a client key learns, surface by surface", () => {
  it("no answer to beta (bodies, headers, metric lines, gRPC statuses, WebSocket frames) names a model or key outside its scope", async () => {
    const outside = [
      "churn-tree",
      "tiny-llama",
      "tiny-embed",
      "ghost-model",
      ...KEY_NAMES.filter((k) => k !== "team-beta"),
    ];
    // A job of alpha's, which beta must not see either.
    const alphaJob = json(await ask("POST", "/v1/models/churn-tree/jobs", keys.alpha, ROW)).id as string;
    const betaJob = await ask("POST", "/v1/models/segment-mlp/jobs", keys.beta, SEGMENT_ROW);
    assert.equal(betaJob.status, 202, betaJob.text);
    const seen: string[] = [];
    const record = (what: string, a: Answer) =>
      seen.push(`${what} ${a.status} ${JSON.stringify(a.headers)} ${a.text}`);
    for (const path of [
      "/v1/models",
      "/v1/models/segment-mlp",
      "/v2",
      "/v2/models/segment-mlp",
      "/v2/models/segment-mlp/ready",
      "/v1/usage?group_by=key,model",
      "/v1/jobs",
      `/v1/jobs/${alphaJob}`,
      `/v1/jobs/${alphaJob}/result`,
      `/v1/jobs/${alphaJob}/events`,
      `/v1/jobs/${json(betaJob).id}?wait=10`,
      "/openapi.json",
      "/docs",
      "/metrics",
      "/readyz",
      "/v2/health/ready",
      "/livez",
    ])
      record(`GET ${path}`, await ask("GET", path, keys.beta));
    // The name a request carried comes back in its 404 (as any unknown name's does): it is the
    // caller's own word, so it is set aside; anything else named is what the key learned.
    for (const model of ["churn-tree", "tiny-llama", "tiny-embed", "ghost-model"])
      for (const [method, path, body, headers] of modelRequests(model))
        record(
          `${method} ${path.replaceAll(model, "NAME")}`,
          normal(await ask(method, path, keys.beta, body, headers), model),
        );
    for (const [method, message, asked] of [
      ["ServerMetadata", {}, ""],
      ["ModelMetadata", { name: "segment-mlp" }, ""],
      ["ModelMetadata", { name: "churn-tree" }, "churn-tree"],
      ["ModelInfer", inferMessage("churn-tree"), "churn-tree"],
      ["ModelReady", { name: "tiny-llama" }, "tiny-llama"],
    ] as const) {
      const r = await rpc(method, message, keys.beta!);
      const said = `${r.code} ${r.details} ${JSON.stringify(r.trailers)} ${JSON.stringify(r.res)}`;
      seen.push(`gRPC ${method} ${asked === "" ? said : said.replaceAll(asked, "NAME")}`);
    }
    // The jobs WebSocket: alpha's job is "no job", as an id that does not exist.
    const ws = new WebSocket(`${server.url.replace("http", "ws")}/v1/jobs/ws`, {
      headers: { authorization: `Bearer ${keys.beta}` },
    });
    const frames: string[] = [];
    await new Promise<void>((resolve, reject) => {
      ws.on("open", () => ws.send(JSON.stringify({ subscribe: [alphaJob] })));
      ws.on("message", (data) => {
        frames.push(String(data));
        ws.close();
        resolve();
      });
      ws.on("error", reject);
    });
    assert.match(frames[0]!, /MP_ERR_JOB_NOT_FOUND/);
    seen.push(...frames);
    assert.ok(seen.length > 80, `${seen.length} answers`);
    for (const line of seen) assert.deepEqual(leaked(line, outside), [], line.slice(0, 300));
  });
});
