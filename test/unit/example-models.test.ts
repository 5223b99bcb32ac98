// The example models: built into a temp dir, each one run in onnxruntime-node on its golden inputs
// must reproduce the TypeScript reference outputs; the trained ones must actually have learned
// something; and two builds must give byte-identical files.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import ort from "onnxruntime-node";
import { churnData, majorityRate, segmentData } from "../../examples/build/datasets.js";
import { buildModels } from "../../examples/build-models.js";
import type { GoldenFile, GoldenTensor, ModelManifest } from "../../src/golden.js";

const MODELS = ["churn-tree", "segment-mlp", "wide-mlp", "multi-io", "slow"];
const DEFAULT_TOLERANCE = 1e-5;
const SESSION_OPTIONS: ort.InferenceSession.SessionOptions = {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: "sequential",
};

const ORT_TYPE: Record<string, ort.Tensor.Type> = {
  FP32: "float32",
  FP64: "float64",
  INT64: "int64",
  BOOL: "bool",
  UINT8: "uint8",
};

function toOrt(t: GoldenTensor): ort.Tensor {
  const type = ORT_TYPE[t.datatype];
  assert.ok(type, `unexpected datatype ${t.datatype}`);
  const values = t.data as (number | boolean)[];
  switch (t.datatype) {
    case "FP32":
      return new ort.Tensor("float32", Float32Array.from(values as number[]), t.shape);
    case "FP64":
      return new ort.Tensor("float64", Float64Array.from(values as number[]), t.shape);
    case "INT64":
      return new ort.Tensor(
        "int64",
        BigInt64Array.from(values as number[], (v) => BigInt(v)),
        t.shape,
      );
    case "BOOL":
      return new ort.Tensor(
        "bool",
        Uint8Array.from(values, (v) => (v ? 1 : 0)),
        t.shape,
      );
    default:
      return new ort.Tensor(type, Uint8Array.from(values as number[]), t.shape);
  }
}

/** Asserts |actual - expected| <= tol * max(1, |expected|) element-wise (exact for BOOL and INT64). */
function assertClose(name: string, actual: ort.Tensor, expected: GoldenTensor, tol: number): void {
  assert.equal(actual.type, ORT_TYPE[expected.datatype], `${name}: type`);
  assert.deepEqual([...actual.dims], expected.shape, `${name}: shape`);
  const data = actual.data as ArrayLike<number | bigint>;
  assert.equal(data.length, expected.data.length, `${name}: length`);
  for (let i = 0; i < data.length; i++) {
    const e = expected.data[i];
    if (typeof e === "boolean") {
      assert.equal(data[i] !== 0, e, `${name}[${i}]`);
    } else if (typeof data[i] === "bigint") {
      assert.equal(data[i], BigInt(e as number), `${name}[${i}]`);
    } else {
      const a = data[i] as number;
      const x = e as number;
      assert.ok(
        Math.abs(a - x) <= tol * Math.max(1, Math.abs(x)),
        `${name}[${i}]: got ${a}, expected ${x} (tolerance ${tol})`,
      );
    }
  }
}

function toleranceFor(golden: GoldenFile, output: string): number {
  const tol = golden.tolerance;
  if (typeof tol === "number") return tol;
  return tol?.[output] ?? DEFAULT_TOLERANCE;
}

function readJson<T>(file: string): T {
  return JSON.parse(fs.readFileSync(file, "utf8")) as T;
}

const sessions = new Map<string, ort.InferenceSession>();
let outDir = "";
const tempDirs: string[] = [];

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "modelport-example-models-"));
  tempDirs.push(dir);
  return dir;
}

async function session(name: string): Promise<ort.InferenceSession> {
  let s = sessions.get(name);
  if (!s) {
    s = await ort.InferenceSession.create(path.join(outDir, `${name}.onnx`), SESSION_OPTIONS);
    sessions.set(name, s);
  }
  return s;
}

/** Predicted labels for `rows` from the model's `label` output. */
async function predictLabels(name: string, rows: number[][]): Promise<number[]> {
  const s = await session(name);
  const features = new ort.Tensor("float32", Float32Array.from(rows.flat()), [rows.length, rows[0]!.length]);
  const out = await s.run({ features });
  return Array.from(out["label"]!.data as BigInt64Array, Number);
}

function accuracyOf(predicted: number[], labels: number[]): number {
  return predicted.filter((p, i) => p === labels[i]).length / labels.length;
}

describe("example models", () => {
  before(async () => {
    outDir = tempDir();
    // The ONNX models come first; the language models after them (the tiny-embed folder, a GGUF
    // file) are checked by their own tests.
    assert.deepEqual((await buildModels(outDir)).slice(0, MODELS.length), MODELS);
  });

  after(async () => {
    for (const s of sessions.values()) await s.release();
    for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  test("every manifest matches its model file", () => {
    for (const name of MODELS) {
      const manifest = readJson<ModelManifest>(path.join(outDir, `${name}.manifest.json`));
      const bytes = fs.readFileSync(path.join(outDir, manifest.file));
      assert.equal(manifest.name, name);
      assert.equal(manifest.file, `${name}.onnx`);
      assert.equal(manifest.backend, "onnx");
      assert.equal(manifest.golden, `${name}.golden.json`);
      assert.equal(manifest.bytes, bytes.length);
      assert.equal(manifest.sha256, createHash("sha256").update(bytes).digest("hex"));
      assert.ok(manifest.description && manifest.description.length > 20);
    }
  });

  for (const name of MODELS) {
    test(`${name}: onnxruntime reproduces the golden outputs`, async () => {
      const golden = readJson<GoldenFile>(path.join(outDir, `${name}.golden.json`));
      const s = await session(name);
      assert.deepEqual([...s.inputNames].sort(), Object.keys(golden.inputs).sort());
      assert.deepEqual([...s.outputNames].sort(), Object.keys(golden.outputs).sort());
      const feeds: Record<string, ort.Tensor> = {};
      for (const [input, t] of Object.entries(golden.inputs)) feeds[input] = toOrt(t);
      const results = await s.run(feeds);
      for (const [output, expected] of Object.entries(golden.outputs)) {
        assertClose(`${name}.${output}`, results[output]!, expected, toleranceFor(golden, output));
      }
      const rows = Object.values(golden.inputs).find((t) => t.shape.length > 0)!.shape[0]!;
      assert.ok(rows >= 3 && rows <= 8, `${name}: ${rows} golden rows`);
    });
  }

  test("churn-tree beats the majority class on a fresh sample", async () => {
    // A seed the build never uses: these customers were not seen in training.
    const fresh = churnData(1000, 987654);
    const acc = accuracyOf(await predictLabels("churn-tree", fresh.rows), fresh.labels);
    const majority = majorityRate(fresh.labels);
    assert.ok(acc >= majority + 0.05, `accuracy ${acc} vs majority ${majority}`);
    const manifest = readJson<ModelManifest>(path.join(outDir, "churn-tree.manifest.json"));
    const recorded = Number(/Held-out accuracy (\d\.\d+)/.exec(manifest.description ?? "")?.[1]);
    assert.ok(recorded >= 0.75 && Math.abs(recorded - acc) < 0.05, `recorded ${recorded}, fresh ${acc}`);
  });

  test("segment-mlp separates the segments on a fresh sample", async () => {
    const fresh = segmentData(900, 13579);
    const acc = accuracyOf(await predictLabels("segment-mlp", fresh.rows), fresh.labels);
    // Three balanced classes: guessing scores 1/3.
    assert.ok(acc >= 0.8, `accuracy ${acc}`);
    const manifest = readJson<ModelManifest>(path.join(outDir, "segment-mlp.manifest.json"));
    const recorded = Number(/Held-out accuracy (\d\.\d+)/.exec(manifest.description ?? "")?.[1]);
    assert.ok(recorded >= 0.8 && Math.abs(recorded - acc) < 0.05, `recorded ${recorded}, fresh ${acc}`);
  });

  test("slow takes well over 10 ms for one row", async () => {
    const s = await session("slow");
    const x = new ort.Tensor("float32", new Float32Array(8).fill(0.5), [1, 8]);
    await s.run({ x });
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      await s.run({ x });
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    // About 50 ms on the machine it was calibrated on; a loose bound that only a broken
    // (or constant-folded) model would miss, even on a much faster CPU.
    assert.ok(times[1]! > 10, `median ${times[1]} ms`);
  });

  test("building twice gives byte-identical files", async () => {
    const again = tempDir();
    await buildModels(again);
    // Every file, including those inside model folders (tiny-embed/onnx/model.onnx).
    const list = (dir: string) =>
      fs
        .readdirSync(dir, { recursive: true, encoding: "utf8" })
        .filter((f) => fs.statSync(path.join(dir, f)).isFile())
        .sort();
    const files = list(outDir);
    assert.deepEqual(list(again), files);
    assert.ok(files.length >= MODELS.length * 3);
    for (const file of files) {
      assert.ok(
        fs.readFileSync(path.join(again, file)).equals(fs.readFileSync(path.join(outDir, file))),
        file,
      );
    }
  });
});
