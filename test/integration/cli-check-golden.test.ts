// `modelport check` verifies models without serving and fails on any mismatch;
// `modelport golden record` writes a golden file that a later check reproduces, and reports a
// bad input, a model it cannot take or a missing file as one line with a code, no stack trace
// unless --verbose.
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

  it("a bad input, a broken or missing inputs file and a GGUF are one line each, with a code and what to do", () => {
    const model = join(models, "churn-tree.onnx");
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const cases: [string[], RegExp][] = [
      [
        ["--inputs", file("short.json", '{"rows": [[1, 2]]}')],
        /^modelport: MP_ERR_INPUT_SHAPE: --inputs .*short\.json: input 'features' has shape \[1, 2\]; the model expects \[-1, 6\]/,
      ],
      [
        ["--inputs", file("broken.json", '{"rows": [[1, 2')],
        /^modelport: MP_ERR_REQUEST_MALFORMED_JSON: --inputs .*broken\.json is not valid JSON \(.*\); it must hold a predict body/,
      ],
      [
        ["--inputs", join(dir, "absent.json")],
        /^modelport: MP_ERR_CLI_USAGE: --inputs .*absent\.json: cannot read it \(ENOENT\); give a JSON file/,
      ],
    ];
    for (const [args, expected] of cases) {
      const r = run("golden", "record", model, "-o", join(dir, "never.golden.json"), ...args);
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, expected);
      assert.equal(r.stderr.trimEnd().split("\n").length, 1, `one line:\n${r.stderr}`);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    }
    const gguf = run(
      "golden",
      "record",
      join(models, "tiny-llama.gguf"),
      "--inputs",
      join(dir, "short.json"),
    );
    assert.equal(gguf.status, 1, gguf.stderr);
    assert.match(
      gguf.stderr,
      /^modelport: MP_ERR_CLI_USAGE: golden record scores tensor models .*not a llama-cpp model: .*tiny-llama\.golden\.json by hand/,
    );
    assert.equal(gguf.stderr.trimEnd().split("\n").length, 1, gguf.stderr);
    const usage = run("golden", "record", model);
    assert.equal(usage.status, 2);
    assert.match(usage.stderr, /^modelport: MP_ERR_CLI_USAGE: golden record needs MODEL and --inputs FILE/);
    // The stack trace, for a bug report, only when asked for.
    const verbose = run("golden", "record", model, "--inputs", join(dir, "short.json"), "--verbose");
    assert.equal(verbose.status, 1);
    assert.match(verbose.stderr, /^modelport: MP_ERR_INPUT_SHAPE: /);
    assert.match(verbose.stderr, /\n\s+at .*golden\.js/);
  });
});
