// What each example model build produces (ONNX bytes, golden file, description) and how it is
// written to disk as NAME.onnx, NAME.golden.json and NAME.manifest.json.
import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import type { GoldenFile, GoldenTensor, ModelManifest } from "../../src/golden.js";
import type { Datatype } from "../../src/tensor.js";

export interface ModelArtifact {
  name: string;
  description: string;
  onnx: Uint8Array;
  golden: GoldenFile;
}

/** A golden tensor; checks that the data fills the shape, since a mismatch would only surface at serve time. */
export function goldenTensor(
  datatype: Datatype,
  shape: number[],
  data: readonly (number | boolean)[] | ArrayLike<number>,
): GoldenTensor {
  const values = Array.from(data as ArrayLike<number | boolean>);
  const expected = shape.reduce((a, b) => a * b, 1);
  if (values.length !== expected)
    throw new Error(`golden tensor [${shape}] needs ${expected} values, got ${values.length}`);
  // Float32 values are stored exactly (rounded to float32 first), so re-reading them as float32 is lossless.
  return {
    datatype,
    shape,
    data: datatype === "FP32" ? values.map((v) => Math.fround(v as number)) : values,
  };
}

/** JSON with two-space indentation, but arrays of plain values on one line so golden files stay readable. */
export function formatJson(value: unknown, indent = ""): string {
  if (Array.isArray(value)) {
    if (value.every((v) => v === null || typeof v !== "object"))
      return `[${value.map((v) => JSON.stringify(v)).join(", ")}]`;
    const inner = `${indent}  `;
    return `[\n${value.map((v) => inner + formatJson(v, inner)).join(",\n")}\n${indent}]`;
  }
  if (value !== null && typeof value === "object") {
    const inner = `${indent}  `;
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    if (entries.length === 0) return "{}";
    return `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${formatJson(v, inner)}`).join(",\n")}\n${indent}}`;
  }
  return JSON.stringify(value);
}

/** Writes the three files of one model and returns its manifest. */
export async function writeArtifact(outDir: string, artifact: ModelArtifact): Promise<ModelManifest> {
  const file = `${artifact.name}.onnx`;
  const golden = `${artifact.name}.golden.json`;
  const manifest: ModelManifest = {
    name: artifact.name,
    file,
    sha256: createHash("sha256").update(artifact.onnx).digest("hex"),
    bytes: artifact.onnx.byteLength,
    backend: "onnx",
    description: artifact.description,
    golden,
  };
  await writeFile(path.join(outDir, file), artifact.onnx);
  await writeFile(path.join(outDir, golden), `${formatJson(artifact.golden)}\n`);
  await writeFile(path.join(outDir, `${artifact.name}.manifest.json`), `${formatJson(manifest)}\n`);
  return manifest;
}
