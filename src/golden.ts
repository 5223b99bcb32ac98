// Golden files: fixed inputs and the outputs a correct model must produce for them. A model
// is ready only when its golden example scores within tolerance.
import type { Datatype } from "./tensor.js";

export interface GoldenTensor {
  datatype: Datatype;
  shape: number[];
  /** Flat, row-major. */
  data: (number | boolean | string)[];
}

export interface GoldenFile {
  description?: string;
  inputs: Record<string, GoldenTensor>;
  outputs: Record<string, GoldenTensor>;
  /** Allowed |actual - expected| <= tol * max(1, |expected|): one number for all outputs or per output. Default 1e-5. */
  tolerance?: number | Record<string, number>;
}

/** A model's manifest, written next to the model file as `<base>.manifest.json`. */
export interface ModelManifest {
  name: string;
  file: string;
  sha256: string;
  bytes: number;
  backend: "onnx" | "custom";
  description?: string;
  golden?: string;
}
