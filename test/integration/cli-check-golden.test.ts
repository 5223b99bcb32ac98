// `modelport check` verifies models without serving and fails on any mismatch;
// `modelport golden record` writes a golden file that a later check reproduces.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import type { GoldenFile } from "../../src/golden.js";
import { testModels } from "../helpers/models.js";
import { CLI } from "../helpers/server.js";

let models: string;
let dir: string;

before(async () => {
  models = await testModels();
  dir = mkdtempSync(join(tmpdir(), "modelport-cli-"));
});

const run = (...args: string[]) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 60_000 });

describe("modelport check", () => {
  it("exits 0 when the model matches its sha256 and golden file", () => {
    const r = run("check", join(models, "churn-tree.onnx"));
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /churn-tree\s+ok\s+golden passed/);
  });

  it("exits 1 and says why when the golden output differs", () => {
    for (const ext of [".onnx", ".manifest.json"])
      copyFileSync(join(models, `segment-mlp${ext}`), join(dir, `seg${ext}`));
    const golden = JSON.parse(readFileSync(join(models, "segment-mlp.golden.json"), "utf8")) as GoldenFile;
    golden.outputs.label!.data[0] = 2 - (golden.outputs.label!.data[0] as number);
    writeFileSync(join(dir, "seg.golden.json"), JSON.stringify(golden));
    const r = run("check", join(dir, "seg.onnx"), "--json");
    assert.equal(r.status, 1);
    const out = JSON.parse(r.stdout) as { models: { code: string; goldenDiff: { output: string }[] }[] };
    assert.equal(out.models[0]!.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
    assert.equal(out.models[0]!.goldenDiff[0]!.output, "label");
  });
});

describe("modelport golden record", () => {
  it("records outputs for given inputs; check then passes, and fails if the model changes", () => {
    copyFileSync(join(models, "multi-io.onnx"), join(dir, "mio.onnx"));
    const inputs = join(dir, "inputs.json");
    writeFileSync(
      inputs,
      JSON.stringify({
        inputs: {
          a: [[1, 2, 3]],
          b: [[4, 5, 6]],
          ids: [9],
          mask: [true],
          pixels: [[1, 1, 1, 1]],
          scale: 0.5,
        },
      }),
    );
    const rec = run("golden", "record", join(dir, "mio.onnx"), "--inputs", inputs);
    assert.equal(rec.status, 0, rec.stderr);
    const golden = JSON.parse(readFileSync(join(dir, "mio.golden.json"), "utf8")) as GoldenFile;
    assert.deepEqual(golden.outputs.ids_next, { datatype: "INT64", shape: [1], data: [10] });
    assert.deepEqual(golden.outputs.scaled!.data, [0.5, 1, 1.5]);
    assert.equal(run("check", join(dir, "mio.onnx")).status, 0);

    // Another model under the same name (same signature? no: check must fail on load or golden).
    copyFileSync(join(models, "churn-tree.onnx"), join(dir, "mio.onnx"));
    const bad = run("check", join(dir, "mio.onnx"));
    assert.equal(bad.status, 1);
    assert.match(bad.stdout, /FAIL\s+MP_ERR_MODEL_GOLDEN_MISMATCH/);
  });
});
