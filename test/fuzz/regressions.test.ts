// Inputs the fuzz suite found that crashed request decoding with a 500, kept as fixed cases
// through a real listening server so they stay fixed whatever the seed.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;
let dir: string;

before(async () => {
  const models = await testModels();
  dir = mkdtempSync(join(tmpdir(), "modelport-fuzz-regressions-"));
  // A handler whose inputs are named like Object.prototype's keys.
  writeFileSync(
    join(dir, "proto.mjs"),
    [
      "export function load() {",
      "  return {",
      '    inputs: [{ name: "constructor", datatype: "FP32", shape: [-1, 1] }, { name: "toString", datatype: "FP32", shape: [-1, 1] }],',
      '    outputs: [{ name: "y", datatype: "FP32", shape: [-1, 1] }],',
      "  };",
      "}",
      "export async function predict(batch) { return { y: batch.constructor }; }",
    ].join("\n"),
  );
  const file = join(dir, "regressions.yaml");
  // limits.maxJsonDepth at its maximum, so the deep bodies below get past the parser and reach
  // the decoder, which must refuse them by itself (a server may be configured so).
  writeFileSync(
    file,
    [
      "limits: {maxJsonDepth: 1000}",
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "models:",
      `  - {name: tree, path: ${join(models, "churn-tree.onnx")}}`,
      `  - {name: proto, backend: custom, path: ${join(dir, "proto.mjs")}}`,
    ].join("\n"),
  );
  srv = await startInProcess({ file });
});

after(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

const PREDICT = "/v1/models/tree/predict";
/** Nesting the decoder must refuse: within limits.maxJsonDepth's maximum (1,000), wrapper included. */
const DEEP = 990;
const INFER = "/v2/models/tree/infer";

async function expect400(path: string, text: string, code: string): Promise<void> {
  const res = await postJson(`${srv.url}${path}`, text);
  assert.equal(res.status, 400, `${text.slice(0, 60)} → ${JSON.stringify(res.body).slice(0, 300)}`);
  const got = path.startsWith("/v2") ? res.body.code : res.body.error.code;
  assert.equal(got, code);
}

describe("decoding refuses, never crashes on", () => {
  // The nested arrays were walked recursively: 10,000 levels overflowed the stack (500, retryable).
  it("rows nested 990 deep, with a message of a few lines", async () => {
    const text = `{"rows":${"[".repeat(DEEP)}1${"]".repeat(DEEP)}}`;
    await expect400(PREDICT, text, "MP_ERR_INPUT_SHAPE");
    const res = await postJson(`${srv.url}${PREDICT}`, text);
    assert.match(res.body.error.message, /\(990 dims\)/);
    assert.ok(JSON.stringify(res.body).length < 1000, `${JSON.stringify(res.body).length} bytes of error`);
  });

  it("an explicit shape of 10,000 dims, with a message of a few lines", async () => {
    const res = await postJson(`${srv.url}${PREDICT}`, {
      inputs: { features: { data: [1, 2, 3, 4, 5, 6], shape: Array(10_000).fill(1) } },
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, "MP_ERR_INPUT_SHAPE");
    assert.ok(JSON.stringify(res.body).length < 1000, `${JSON.stringify(res.body).length} bytes of error`);
  });

  it("a named tensor nested 990 deep, with and without a shape", async () => {
    await expect400(
      PREDICT,
      `{"inputs":{"features":${"[".repeat(DEEP)}${"]".repeat(DEEP)}}}`,
      "MP_ERR_INPUT_SHAPE",
    );
    await expect400(
      PREDICT,
      `{"inputs":{"features":{"data":${"[".repeat(DEEP)}2${"]".repeat(DEEP)},"shape":[1,6]}}}`,
      "MP_ERR_INPUT_SHAPE",
    );
  });

  it("OIP data nested 990 deep", () =>
    expect400(
      INFER,
      `{"inputs":[{"name":"features","datatype":"FP32","shape":[1,6],"data":${"[".repeat(DEEP)}1${"]".repeat(DEEP)}}]}`,
      "MP_ERR_INPUT_SHAPE",
    ));

  it("a deeply nested ragged row still names where it is ragged", async () => {
    const res = await postJson(`${srv.url}${PREDICT}`, { rows: [[[1, 2]], [[1]]] });
    assert.equal(res.status, 400);
    assert.match(res.body.error.message, /element \[1\]\[0\] has 1 items but its siblings have 2/);
  });

  // The message described a wrong element with String(value), which throws for an object whose
  // own "toString" is not a function.
  it("an object with its own toString key where a number belongs", () =>
    expect400(
      PREDICT,
      '{"inputs":{"features":{"data":[1,2,{"toString":1},4,5,6],"shape":[1,6]}}}',
      "MP_ERR_INPUT_DATATYPE",
    ));

  it("an object with its own valueOf key in rows and in OIP data", async () => {
    await expect400(PREDICT, '{"rows":[[1,2,{"valueOf":{},"toString":2},4,5,6]]}', "MP_ERR_INPUT_DATATYPE");
    await expect400(
      INFER,
      '{"inputs":[{"name":"features","datatype":"FP32","shape":[1,6],"data":[1,2,3,4,5,{"toString":[]}]}]}',
      "MP_ERR_INPUT_DATATYPE",
    );
  });

  // Inputs were looked up with `in`, which also finds Object.prototype's "constructor" and
  // "toString": an input of that name was never missing, its "value" was a function.
  it("an input named like an Object.prototype key is missing when the body has none", async () => {
    await expect400("/v1/models/proto/predict", '{"inputs":{}}', "MP_ERR_INPUT_MISSING");
    await expect400("/v1/models/proto/predict", '{"inputs":{"constructor":[[1]]}}', "MP_ERR_INPUT_MISSING");
    const ok = await postJson(`${srv.url}/v1/models/proto/predict`, {
      inputs: { constructor: [[1]], toString: [[2]] },
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });

  // Naming the input in a shared memory error message turned an object name whose toString is no
  // function into a TypeError (500) before the name itself was checked.
  it("an OIP input or output named by an object whose toString is no function", async () => {
    const input = '{"name":{"toString":1},"datatype":"FP32","shape":[1,6],"data":[1,2,3,4,5,6]}';
    await expect400(INFER, `{"inputs":[${input}]}`, "MP_ERR_REQUEST_INVALID");
    await expect400(
      INFER,
      '{"inputs":[{"name":"features","datatype":"FP32","shape":[1,6],"data":[1,2,3,4,5,6]}],"outputs":[{"name":{"toString":1}}]}',
      "MP_ERR_REQUEST_INVALID",
    );
  });
});
