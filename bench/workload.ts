// What a measurement sends: a model built by examples/build-models.ts and one single-row request.
// The foundation suite uses churn-tree (tiny), the batching suite wide-mlp (inference-bound).
import { readFileSync } from "node:fs";
import path from "node:path";

export interface Workload {
  modelName: string;
  modelFile: string;
  /** The model's single FP32 input [batch, row.length]. */
  inputName: string;
  row: readonly number[];
  /** `{"rows":[row]}`: what both servers take. */
  body: string;
  /** One line for the report. */
  description: string;
}

export const NAIVE_PREDICT_PATH = "/";
export const JSON_HEADERS = { "content-type": "application/json" };

export function modelportPredictPath(w: Workload): string {
  return `/v1/models/${w.modelName}/predict`;
}

function workload(modelName: string, row: readonly number[], description: string): Workload {
  return {
    modelName,
    modelFile: `${modelName}.onnx`,
    inputName: "features",
    row,
    body: JSON.stringify({ rows: [row] }),
    description,
  };
}

/** One customer, 6 float features (the model's input `features` is FP32 [batch, 6]). */
export const CHURN_TREE = workload(
  "churn-tree",
  [3, 95, 4, 1, 0, 20],
  'churn-tree (30 trees, depth 3), one row per request `{"rows":[[3,95,4,1,0,20]]}`',
);

/** wide-mlp with the first row of its golden inputs (32 floats), read from the built model directory. */
export function wideMlp(modelDir: string): Workload {
  const golden = JSON.parse(readFileSync(path.join(modelDir, "wide-mlp.golden.json"), "utf8")) as {
    inputs: { features: { shape: number[]; data: number[] } };
  };
  const { shape, data } = golden.inputs.features;
  const width = shape[1]!;
  return workload(
    "wide-mlp",
    data.slice(0, width),
    `wide-mlp (MLP ${width} -> 1792 -> 1792 -> 1792 -> 2, FP32), one row of ${width} floats per request ` +
      "(the first row of wide-mlp.golden.json's inputs)",
  );
}
