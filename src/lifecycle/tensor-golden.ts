// Compares a model's outputs for its golden inputs with the expected outputs, and explains
// the first differences in words a person can act on.
import { readFile } from "node:fs/promises";
import { ModelportError } from "../errors.js";
import type { GoldenFile, GoldenTensor } from "../golden.js";
import { decodeTensor } from "../protocol/decode-tensor.js";
import { toJsonArray } from "../protocol/json-data.js";
import type { ModelSignature, Tensor, TensorMap } from "../tensor.js";
import type { GoldenVerdict } from "./model-lifecycle.js";

export interface GoldenDiff {
  output: string;
  problem: string;
}

/** Reads and shape-checks a golden file. @throws ModelportError MP_ERR_MODEL_GOLDEN_MISMATCH when unreadable. */
export async function readGolden(path: string): Promise<GoldenFile> {
  let golden: GoldenFile;
  try {
    golden = JSON.parse(await readFile(path, "utf8")) as GoldenFile;
  } catch (err) {
    throw new ModelportError(
      "MP_ERR_MODEL_GOLDEN_MISMATCH",
      `cannot read golden file ${path}: ${(err as Error).message}`,
    );
  }
  if (!golden || typeof golden.inputs !== "object" || typeof golden.outputs !== "object") {
    throw new ModelportError(
      "MP_ERR_MODEL_GOLDEN_MISMATCH",
      `golden file ${path} needs "inputs" and "outputs" objects`,
    );
  }
  return golden;
}

/** Golden inputs as tensors, validated against the model's signature like any request. */
export function goldenInputs(golden: GoldenFile, signature: ModelSignature): TensorMap {
  const out: TensorMap = {};
  for (const spec of signature.inputs) {
    const g = golden.inputs[spec.name];
    if (!g) {
      throw new ModelportError(
        "MP_ERR_MODEL_GOLDEN_MISMATCH",
        `the golden file has no input '${spec.name}' the model needs`,
      );
    }
    out[spec.name] = decodeTensor(spec, g.data, g.shape, g.datatype);
  }
  return out;
}

function toleranceFor(golden: GoldenFile, output: string, fallback: number): number {
  const t = golden.tolerance;
  if (typeof t === "number") return t;
  if (t && typeof t[output] === "number") return t[output];
  return fallback;
}

function compareOne(
  name: string,
  expected: GoldenTensor,
  actual: Tensor | undefined,
  tol: number,
): GoldenDiff[] {
  if (!actual) return [{ output: name, problem: "the model did not produce this output" }];
  if (expected.shape.join(",") !== actual.shape.join(",")) {
    return [{ output: name, problem: `shape [${actual.shape}] but golden expects [${expected.shape}]` }];
  }
  // An FP32 output compares as FP32: a golden value is the FP32 value it reads as, so a file
  // written with the doubles FP32 values widen to and one written in their shortest text agree.
  const narrow = actual.data instanceof Float32Array ? actual.data : undefined;
  const got: ArrayLike<unknown> = narrow ?? toJsonArray(actual);
  const diffs: GoldenDiff[] = [];
  let worst = { index: -1, delta: 0 };
  let count = 0;
  for (let i = 0; i < expected.data.length; i++) {
    const e =
      narrow && typeof expected.data[i] === "number"
        ? Math.fround(expected.data[i] as number)
        : expected.data[i];
    const a = got[i];
    if (typeof e === "number" && typeof a === "number") {
      const delta = Math.abs(a - e);
      if (!(delta <= tol * Math.max(1, Math.abs(e)))) {
        count++;
        if (!(delta <= worst.delta)) worst = { index: i, delta };
      }
    } else if (e !== a) {
      count++;
      if (worst.index < 0) worst = { index: i, delta: Number.NaN };
    }
  }
  if (count > 0) {
    const i = worst.index;
    diffs.push({
      output: name,
      problem:
        `${count} of ${expected.data.length} values differ beyond tolerance ${tol}; ` +
        `worst at flat index ${i}: got ${String(got[i])}, expected ${String(expected.data[i])}`,
    });
  }
  return diffs;
}

/** Every output that differs from the golden file; empty when the model matches. */
export function compareGolden(
  golden: GoldenFile,
  outputs: TensorMap,
  defaultTolerance: number,
): GoldenDiff[] {
  const diffs: GoldenDiff[] = [];
  for (const [name, expected] of Object.entries(golden.outputs)) {
    diffs.push(...compareOne(name, expected, outputs[name], toleranceFor(golden, name, defaultTolerance)));
  }
  return diffs;
}

type Run = (inputs: TensorMap) => Promise<TensorMap>;

/**
 * The golden stage of a tensor model: scores the golden file's inputs with `run` and compares;
 * then, when it passed, with `also` (another copy of the model that answers requests too, named in
 * the message if it fails). The file is read once.
 * @throws ModelportError MP_ERR_MODEL_GOLDEN_MISMATCH when the file is unreadable or lacks an input.
 */
export async function tensorGolden(
  config: { golden?: string; tolerance: number },
  signature: ModelSignature,
  run: Run,
  also?: { name: string; run: Run },
): Promise<GoldenVerdict> {
  const golden = await readGolden(config.golden!);
  for (const copy of [{ name: "", run }, ...(also ? [also] : [])]) {
    // Inputs afresh for each copy: a runner may take over (transfer) their buffers.
    const outputs = await copy.run(goldenInputs(golden, signature));
    const diff = compareGolden(golden, outputs, config.tolerance);
    if (diff.length > 0) {
      return {
        passed: false,
        diff,
        message: `${copy.name ? `${copy.name}: ` : ""}golden check failed (${config.golden}): ${diff.map((d) => `output '${d.output}': ${d.problem}`).join("; ")}`,
      };
    }
  }
  return { passed: true };
}
