// A query parameter given twice, on every route: 400 MP_ERR_REQUEST_INVALID naming it, in the
// shape of the route reached (native `details.param`, OpenAI `param`, OIP's message), never a
// 500 (a repeated job filter once reached SQLite as two values: "Too many parameter values") and
// never a silent pick of one value. Routes that read a query (jobs list and its filters, a job's
// `?wait`, usage, predict's `?outputs` and `?version`) and routes that read none alike.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

const KEY = `mp_${"q".repeat(43)}`;
const AUTH = { authorization: `Bearer ${KEY}` };
const ROW = [1, 2, 3, 1, 0, 4];

let server: InProcessServer;
let job: string;

before(async () => {
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-query-"));
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "server:",
      `  apiKeys: [${KEY}]`,
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      "models:",
      `  - {name: churn, path: ${join(models, "churn-tree.onnx")}}`,
      "",
    ].join("\n"),
  );
  server = await startInProcess({ file, env: {} });
  const submitted = await postJson(`${server.url}/v1/models/churn/jobs`, { rows: [ROW] }, AUTH);
  assert.equal(submitted.status, 202);
  job = submitted.body.id;
});

after(() => server?.close());

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { ...AUTH, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) };
}

describe("a repeated query parameter", () => {
  it("is a coded 400 naming it on every native route, whether it reads a query or not", async () => {
    const cases: [string, string, string, unknown?][] = [
      ["GET", "/v1/jobs?model=churn&model=other", "model"],
      ["GET", "/v1/jobs?status=queued&status=succeeded", "status"],
      ["GET", "/v1/jobs?limit=1&limit=2", "limit"],
      ["GET", "/v1/jobs?cursor=a&cursor=b&model=churn", "cursor"],
      ["GET", `/v1/jobs/${job}?wait=1&wait=2`, "wait"],
      ["GET", `/v1/jobs/${job}/result?x=1&x=1`, "x"],
      ["GET", "/v1/usage?group_by=key&group_by=model", "group_by"],
      ["GET", "/v1/usage?from=1&to=2&from=3", "from"],
      ["POST", "/v1/models/churn/predict?outputs=label&outputs=probabilities", "outputs", { rows: [ROW] }],
      ["POST", "/v1/models/churn/predict?version=1&version=1", "version", { rows: [ROW] }],
      ["POST", "/v1/models/churn/jobs?x=1&x=2", "x", { rows: [ROW] }],
      ["GET", "/v1/models?x=1&x=2", "x"],
      ["GET", "/v1/models/churn?x=&x=", "x"],
      ["GET", "/v1/jobs/ws?x=1&x=2", "x"],
      ["GET", "/metrics?name=a&name=b", "name"],
      ["GET", "/livez?x=1&x=2", "x"],
      ["GET", "/nowhere?x=1&x=2", "x"],
    ];
    for (const [method, path, param, body] of cases) {
      const res = await call(method, path, body);
      assert.deepEqual(
        [res.status, res.body.error?.code, res.body.error?.details?.param],
        [400, "MP_ERR_REQUEST_INVALID", param],
        `${method} ${path}: ${JSON.stringify(res.body)}`,
      );
    }
  });

  it("on an OpenAI route: OpenAI's shape, with the parameter in `param`", async () => {
    for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]) {
      const res = await call("POST", `${path}?stream=true&stream=false`, { model: "churn" });
      assert.equal(res.status, 400, path);
      assert.deepEqual(
        [res.body.error.code, res.body.error.type, res.body.error.param],
        ["MP_ERR_REQUEST_INVALID", "invalid_request_error", "stream"],
        `${path}: ${JSON.stringify(res.body)}`,
      );
    }
  });

  it("on an Open Inference Protocol route: its shape, the message naming the parameter", async () => {
    for (const [method, path] of [
      ["POST", "/v2/models/churn/infer?x=1&x=2"],
      ["GET", "/v2/models/churn?x=1&x=2"],
    ] as const) {
      const res = await call(
        method,
        path,
        method === "POST"
          ? { inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", data: ROW }] }
          : undefined,
      );
      assert.equal(res.status, 400, path);
      assert.equal(res.body.code, "MP_ERR_REQUEST_INVALID", path);
      assert.match(res.body.error, /'x' is given more than once/, path);
    }
  });

  it("given once, each parameter still works", async () => {
    assert.equal((await call("GET", "/v1/jobs?model=churn&limit=5")).status, 200);
    assert.equal((await call("GET", `/v1/jobs/${job}?wait=1`)).status, 200);
    assert.equal((await call("GET", "/v1/usage?group_by=key,model")).status, 200);
    const picked = await call("POST", "/v1/models/churn/predict?outputs=label", { rows: [ROW] });
    assert.equal(picked.status, 200);
    assert.deepEqual(Object.keys(picked.body.outputs), ["label"]);
  });
});
