// Split tiers with real ONNX models: a `--role runner` process runs onnxruntime, a `--role api`
// process validates and forwards. For each request the answer through the API tier must equal
// the runner's own answer (deep-equal for JSON, byte for byte for raw tensors): INT64 and BOOL
// outputs (multi-io), string (BYTES) inputs and outputs (a StringNormalizer graph built here),
// and an application/octet-stream body (churn-tree), in and out.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { attr, BATCH, encodeModel, node, type ValueInfoProto } from "../../examples/build/onnx-graph.js";
import { testModels } from "../helpers/models.js";
import { type ChildServer, postJson, startChild, waitReady } from "../helpers/server.js";

const ONNX_STRING = 8;
const children: ChildServer[] = [];
let runner: ChildServer;
let api: ChildServer;

const stringInfo = (name: string, dim = BATCH): ValueInfoProto => ({
  name,
  type: { tensorType: { elemType: ONNX_STRING, shape: { dim: [{ dimParam: dim }] } } },
});

/**
 * strings: s STRING [batch] → same = Identity(s), twice = Concat(s, s) [2 × batch]. (Operators
 * that need no locale: onnxruntime's StringNormalizer fails to load where en_US.UTF-8 is missing.)
 */
function writeStringsModel(dir: string): string {
  const path = join(dir, "strings.onnx");
  writeFileSync(
    path,
    encodeModel({
      name: "strings",
      inputs: [stringInfo("s")],
      outputs: [stringInfo("same"), stringInfo("twice", "twice_batch")],
      nodes: [
        node("Identity", ["s"], ["same"]),
        node("Concat", ["s", "s"], ["twice"], [attr.int("axis", 0)]),
      ],
    }),
  );
  return path;
}

before(async () => {
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-split-onnx-"));
  const config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "server:",
      "  runnerPollMs: 300",
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      "models:",
      `  - {name: multi-io, path: ${join(models, "multi-io.onnx")}}`,
      `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}}`,
      `  - {name: strings, path: ${writeStringsModel(dir)}}`,
    ].join("\n"),
  );
  runner = await startChild(["-c", config, "--role", "runner"]);
  children.push(runner);
  assert.equal((await waitReady(runner.url, 90_000)).status, 200, runner.output().slice(-2000));
  api = await startChild(["-c", config, "--role", "api", "--runner", runner.url]);
  children.push(api);
  assert.equal((await waitReady(api.url, 90_000)).status, 200, api.output().slice(-2000));
});

after(async () => {
  for (const c of children) await c.stop("SIGKILL");
});

/** POSTs the same JSON body to the runner and the API tier; both must answer 200. */
async function both(path: string, body: unknown): Promise<[any, any]> {
  const direct = await postJson(`${runner.url}${path}`, body);
  const viaApi = await postJson(`${api.url}${path}`, body);
  assert.equal(direct.status, 200, JSON.stringify(direct.body));
  assert.equal(viaApi.status, 200, JSON.stringify(viaApi.body));
  return [direct.body, viaApi.body];
}

const MULTI = {
  inputs: {
    a: [
      [1, 2, 3],
      [-0.5, 0, 0.25],
    ],
    b: [
      [0.1, 0.2, 0.3],
      [-1e10, 1e-10, Math.PI],
    ],
    ids: [123456789012, -5],
    mask: [true, false],
    pixels: [
      [0, 1, 2, 255],
      [10, 20, 30, 40],
    ],
    scale: 2.5,
  },
};

describe("API tier and runner give the same answers for real ONNX models", () => {
  it("INT64 and BOOL outputs (native JSON route)", async () => {
    const [direct, viaApi] = await both("/v1/models/multi-io/predict", MULTI);
    assert.deepEqual(viaApi, direct);
    assert.deepEqual(viaApi.outputs.ids_next, [123456789013, -4]);
    assert.deepEqual(viaApi.outputs.mask_inverted, [false, true]);
    assert.deepEqual(viaApi.outputs.pixel_total, [258, 100]);
  });

  it("INT64 and BOOL outputs (Open Inference Protocol, datatypes kept)", async () => {
    const body = {
      id: "req-1",
      inputs: [
        { name: "a", shape: [1, 3], datatype: "FP32", data: [1, 2, 3] },
        { name: "b", shape: [1, 3], datatype: "FP64", data: [0.1, 0.2, 0.3] },
        { name: "ids", shape: [1], datatype: "INT64", data: [123456789012] },
        { name: "mask", shape: [1], datatype: "BOOL", data: [true] },
        { name: "pixels", shape: [1, 4], datatype: "UINT8", data: [1, 2, 3, 4] },
        { name: "scale", shape: [], datatype: "FP32", data: [2] },
      ],
    };
    const [direct, viaApi] = await both("/v2/models/multi-io/infer", body);
    assert.deepEqual(viaApi.outputs, direct.outputs);
    assert.equal(viaApi.id, "req-1");
    const out = Object.fromEntries(viaApi.outputs.map((o: any) => [o.name, o]));
    assert.equal(out.ids_next.datatype, "INT64");
    assert.equal(out.mask_inverted.datatype, "BOOL");
    assert.deepEqual(out.mask_inverted.data, [false]);
    assert.deepEqual(out.ids_next.data, [123456789013]);
  });

  it("string (BYTES) inputs and outputs", async () => {
    const s = ["hello", "Grüße", "", "MiXeD 123"];
    const [direct, viaApi] = await both("/v1/models/strings/predict", { inputs: { s } });
    assert.deepEqual(viaApi, direct);
    assert.deepEqual(viaApi.outputs.same, s);
    assert.deepEqual(viaApi.outputs.twice, [...s, ...s]);
    const oip = { inputs: [{ name: "s", shape: [2], datatype: "BYTES", data: ["abc", "x y"] }] };
    const [d2, a2] = await both("/v2/models/strings/infer", oip);
    assert.deepEqual(a2.outputs, d2.outputs);
    const twice = a2.outputs.find((o: any) => o.name === "twice");
    assert.deepEqual(twice, {
      name: "twice",
      shape: [4],
      datatype: "BYTES",
      data: ["abc", "x y", "abc", "x y"],
    });
  });

  it("an application/octet-stream body, answered as JSON and as raw bytes", async () => {
    const rows = new Float32Array([3, 95, 4, 1, 0, 20, 60, 30, 0, 24, 1, 5]);
    const send = (base: string, accept: string) =>
      fetch(`${base}/v1/models/churn-tree/predict?outputs=probabilities`, {
        method: "POST",
        headers: { "content-type": "application/octet-stream", "x-tensor-shape": "2,6", accept },
        body: Buffer.from(rows.buffer),
      });
    const [dj, aj] = await Promise.all([
      send(runner.url, "application/json"),
      send(api.url, "application/json"),
    ]);
    assert.equal(dj.status, 200);
    assert.equal(aj.status, 200, await aj.clone().text());
    const directJson = (await dj.json()) as any;
    assert.deepEqual(await aj.json(), directJson);
    assert.equal(directJson.outputs.probabilities.length, 2);

    const [db, ab] = await Promise.all([
      send(runner.url, "application/octet-stream"),
      send(api.url, "application/octet-stream"),
    ]);
    assert.equal(db.status, 200);
    assert.equal(ab.status, 200, await ab.clone().text());
    for (const h of ["content-type", "x-tensor-name", "x-tensor-shape", "x-tensor-datatype"])
      assert.equal(ab.headers.get(h), db.headers.get(h), h);
    assert.equal(ab.headers.get("x-tensor-shape"), "2,2");
    const [direct, viaApi] = [Buffer.from(await db.arrayBuffer()), Buffer.from(await ab.arrayBuffer())];
    assert.equal(direct.length, 16);
    assert.ok(viaApi.equals(direct), "byte for byte");
  });
});
