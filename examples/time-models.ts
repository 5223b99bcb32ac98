// Times the built example models in onnxruntime-node the way the calibration comments quote them:
// one intra-op and one inter-op thread, sequential execution, median of repeated runs at batch 1 and
// batch 32. Inputs are the golden rows repeated to the batch size (a scalar input stays a scalar).
//
//   node dist/examples/time-models.js [--dir DIR] [--runs N]    (default: ./examples/models, 7 runs)
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import ort from "onnxruntime-node";
import type { GoldenFile, GoldenTensor, ModelManifest } from "../src/golden.js";

function batchOf(t: GoldenTensor, batch: number): ort.Tensor {
  const values = t.data as (number | boolean)[];
  let shape = t.shape;
  let data = values;
  if (shape.length > 0) {
    const rowSize = values.length / shape[0]!;
    data = Array.from({ length: batch * rowSize }, (_, i) => values[i % values.length]!);
    shape = [batch, ...shape.slice(1)];
  }
  switch (t.datatype) {
    case "FP32":
      return new ort.Tensor("float32", Float32Array.from(data as number[]), shape);
    case "FP64":
      return new ort.Tensor("float64", Float64Array.from(data as number[]), shape);
    case "INT64":
      return new ort.Tensor(
        "int64",
        BigInt64Array.from(data as number[], (v) => BigInt(v)),
        shape,
      );
    case "BOOL":
      return new ort.Tensor(
        "bool",
        Uint8Array.from(data, (v) => (v ? 1 : 0)),
        shape,
      );
    case "UINT8":
      return new ort.Tensor("uint8", Uint8Array.from(data as number[]), shape);
    default:
      throw new Error(`time-models: no conversion for ${t.datatype}`);
  }
}

/** Median wall time in ms of `runs` inferences after two warm-up runs. */
export async function timeModel(
  file: string,
  golden: GoldenFile,
  batch: number,
  runs: number,
): Promise<number> {
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
  });
  try {
    const feeds: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(golden.inputs)) feeds[name] = batchOf(t, batch);
    for (let i = 0; i < 2; i++) await session.run(feeds);
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      await session.run(feeds);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    return times[Math.floor(runs / 2)]!;
  } finally {
    await session.release();
  }
}

async function main(argv: readonly string[]): Promise<void> {
  let dir = path.resolve(process.cwd(), "examples/models");
  let runs = 7;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--dir" && argv[i + 1] !== undefined) dir = path.resolve(argv[++i]!);
    else if (argv[i] === "--runs" && argv[i + 1] !== undefined) runs = Number(argv[++i]);
    else throw new Error(`unknown argument: ${argv[i]} (usage: time-models [--dir DIR] [--runs N])`);
  }
  const manifests = (await readdir(dir)).filter((f) => f.endsWith(".manifest.json")).sort();
  for (const manifestFile of manifests) {
    const manifest = JSON.parse(await readFile(path.join(dir, manifestFile), "utf8")) as ModelManifest;
    if (manifest.backend !== "onnx" || manifest.golden === undefined) continue;
    const name = manifest.name;
    const golden = JSON.parse(await readFile(path.join(dir, manifest.golden), "utf8")) as GoldenFile;
    const file = path.join(dir, manifest.file);
    const one = await timeModel(file, golden, 1, runs);
    const many = await timeModel(file, golden, 32, runs);
    console.log(
      `${name.padEnd(12)} batch 1: ${one.toFixed(3)} ms   batch 32: ${many.toFixed(3)} ms (${(many / 32).toFixed(3)} ms/row)`,
    );
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
