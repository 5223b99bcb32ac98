// The bundled example models, served by a real listening server: each is ready only after
// its golden example matched, and answers the native and Open Inference Protocol routes.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { GoldenFile } from "../../src/golden.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, REPO_ROOT, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;
let models: string;

function golden(name: string): GoldenFile {
  return JSON.parse(readFileSync(join(models, `${name}.golden.json`), "utf8")) as GoldenFile;
}

function close(actual: number[], expected: number[], tol = 1e-5): void {
  assert.equal(actual.length, expected.length);
  actual.forEach((a, i) => {
    assert.ok(Math.abs(a - expected[i]!) <= tol, `index ${i}: ${a} vs ${expected[i]}`);
  });
}

before(async () => {
  models = await testModels();
  const file = join(models, "examples.yaml");
  writeFileSync(
    file,
    [
      "models:",
      "  - name: churn-tree",
      `    path: ${join(models, "churn-tree.onnx")}`,
      "  - name: segment-mlp",
      `    path: ${join(models, "segment-mlp.onnx")}`,
      "    version: '2'",
      "  - name: churn",
      "    backend: custom",
      `    path: ${join(REPO_ROOT, "examples/handlers/churn-handler.ts")}`,
      "    options:",
      `      model: ${join(models, "churn-tree.onnx")}`,
    ].join("\n"),
  );
  srv = await startInProcess({ file });
});

after(() => srv.close());

describe("example models", () => {
  it("are ready only after their golden checks passed", async () => {
    const res = await fetch(`${srv.url}/readyz`);
    assert.equal(res.status, 200);
    const list = (await (await fetch(`${srv.url}/v1/models`)).json()) as { models: any[] };
    const byName = Object.fromEntries(list.models.map((m) => [m.name, m]));
    assert.equal(byName["churn-tree"].status.golden, "passed");
    assert.equal(byName["segment-mlp"].status.golden, "passed");
    assert.equal(byName.churn.status.golden, "passed");
    assert.match(byName["churn-tree"].file.sha256, /^[0-9a-f]{64}$/);
    assert.ok(byName["churn-tree"].load_ms > 0);
    assert.deepEqual(byName["churn-tree"].inputs, [
      { name: "features", datatype: "FP32", shape: [-1, 6], dimNames: ["batch", null] },
    ]);
  });

  for (const name of ["churn-tree", "segment-mlp"]) {
    it(`${name}: native predict with rows reproduces the golden outputs`, async () => {
      const g = golden(name);
      const features = g.inputs.features!;
      const width = features.shape[1]!;
      const rows: number[][] = [];
      for (let i = 0; i < features.shape[0]!; i++)
        rows.push(features.data.slice(i * width, (i + 1) * width) as number[]);
      const res = await postJson(`${srv.url}/v1/models/${name}/predict`, { rows });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body.outputs.label, g.outputs.label!.data);
      close(res.body.outputs.probabilities.flat(), g.outputs.probabilities!.data as number[]);
      assert.equal(res.body.outputs.probabilities.length, rows.length);
    });

    it(`${name}: Open Inference Protocol infer round trip echoes the id`, async () => {
      const g = golden(name);
      const f = g.inputs.features!;
      const res = await postJson(`${srv.url}/v2/models/${name}/infer`, {
        id: "req-42",
        inputs: [{ name: "features", shape: f.shape, datatype: "FP32", data: f.data }],
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.id, "req-42");
      assert.equal(res.body.model_name, name);
      const probs = res.body.outputs.find((o: { name: string }) => o.name === "probabilities");
      assert.equal(probs.datatype, "FP32");
      assert.deepEqual(probs.shape, g.outputs.probabilities!.shape);
      close(probs.data, g.outputs.probabilities!.data as number[]);
      const label = res.body.outputs.find((o: { name: string }) => o.name === "label");
      assert.equal(label.datatype, "INT64");
      assert.deepEqual(label.data, g.outputs.label!.data);
    });
  }

  it("OIP: nested data, version paths, requested outputs and metadata", async () => {
    const g = golden("segment-mlp");
    const f = g.inputs.features!;
    const nested = [f.data.slice(0, 4)];
    const ok = await postJson(`${srv.url}/v2/models/segment-mlp/versions/2/infer`, {
      inputs: [{ name: "features", shape: [1, 4], datatype: "FP32", data: nested }],
      outputs: [{ name: "label" }],
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.model_version, "2");
    assert.deepEqual(
      ok.body.outputs.map((o: { name: string }) => o.name),
      ["label"],
    );
    assert.equal(typeof ok.body.id, "string", "an id is always returned");
    const wrong = await postJson(`${srv.url}/v2/models/segment-mlp/versions/7/infer`, {
      inputs: [{ name: "features", shape: [1, 4], datatype: "FP32", data: nested }],
    });
    assert.equal(wrong.status, 404);
    assert.match(wrong.body.error, /no version '7' loaded; loaded: 2/);
    const meta = (await (await fetch(`${srv.url}/v2/models/segment-mlp`)).json()) as any;
    assert.deepEqual(meta.versions, ["2"]);
    assert.deepEqual(meta.inputs, [{ name: "features", datatype: "FP32", shape: [-1, 4] }]);
    assert.equal(meta.platform, "onnxruntime_onnx");
    assert.equal((await fetch(`${srv.url}/v2/models/segment-mlp/versions/2/ready`)).status, 200);
    assert.equal((await fetch(`${srv.url}/v2/health/ready`)).status, 200);
    assert.equal((await fetch(`${srv.url}/v2/health/live`)).status, 200);
    const server = (await (await fetch(`${srv.url}/v2`)).json()) as any;
    assert.equal(server.name, "modelport");
  });

  it("custom handler: feature engineering around the tree, decoded outputs", async () => {
    const res = await postJson(`${srv.url}/v1/models/churn/predict`, {
      rows: [
        {
          tenure_months: 3,
          monthly_charges: 95,
          support_calls: 4,
          contract: "month-to-month",
          autopay: false,
          data_gb: 20,
        },
      ],
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const tree = await postJson(`${srv.url}/v1/models/churn-tree/predict`, { rows: [[3, 95, 4, 1, 0, 20]] });
    close(res.body.outputs.probability, [tree.body.outputs.probabilities[0][1]]);
    assert.deepEqual(res.body.outputs.churn, [tree.body.outputs.label[0] === 1]);
    assert.ok(["low", "medium", "high"].includes(res.body.outputs.risk[0]));
    const bad = await postJson(`${srv.url}/v1/models/churn/predict`, {
      rows: [
        {
          tenure_months: 3,
          monthly_charges: 95,
          support_calls: 4,
          contract: "weekly",
          autopay: false,
          data_gb: 20,
        },
      ],
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, "MP_ERR_HANDLER_BAD_INPUT");
    assert.match(bad.body.error.message, /weekly/);
  });

  it("OpenAPI document and /docs show each model's real input schema", async () => {
    const doc = (await (await fetch(`${srv.url}/openapi.json`)).json()) as any;
    const schema =
      doc.paths["/v1/models/churn-tree/predict"].post.requestBody.content["application/json"].schema;
    const rows = schema.oneOf.find((s: any) => s.required[0] === "rows");
    assert.deepEqual(rows.properties.rows.items, {
      type: "array",
      items: { type: "number" },
      minItems: 6,
      maxItems: 6,
    });
    const churnRows =
      doc.paths["/v1/models/churn/predict"].post.requestBody.content["application/json"].schema.oneOf[0];
    assert.deepEqual(churnRows.properties.rows.items.properties.contract, { type: "string" });
    // The management routes, for admin keys.
    const promote = doc.paths["/v1/models/{model}/promote"].post;
    assert.deepEqual(promote.requestBody.content["application/json"].schema.required, ["version"]);
    assert.ok(promote.responses[403]);
    assert.ok(doc.paths["/v2/repository/index"].post);
    const html = await (await fetch(`${srv.url}/docs`)).text();
    assert.match(html, /segment-mlp/);
    assert.match(html, /tenure_months/);
    assert.match(html, /FP32/);
  });
});
