// Tensors as they travel between HTTP, the runner and the backends: a datatype name from the
// Open Inference Protocol, a shape and a flat row-major data array of the matching kind.

export const DATATYPES = [
  "BOOL",
  "UINT8",
  "UINT16",
  "UINT32",
  "UINT64",
  "INT8",
  "INT16",
  "INT32",
  "INT64",
  "FP16",
  "FP32",
  "FP64",
  "BYTES",
] as const;

export type Datatype = (typeof DATATYPES)[number];

export type TensorData =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigUint64Array
  | string[];

/**
 * One tensor: `data.length` equals the product of `shape` (1 for a scalar, shape `[]`).
 * BOOL is a Uint8Array of 0/1 (as onnxruntime wants it); FP16 travels as Float32Array and is
 * converted at the backend; BYTES is an array of strings.
 */
export interface Tensor {
  datatype: Datatype;
  shape: number[];
  data: TensorData;
}

export type TensorMap = Record<string, Tensor>;

/** What a model declares about one input or output. A dim of -1 is dynamic; `shape` undefined means unknown rank. */
export interface TensorSpec {
  name: string;
  datatype: Datatype;
  shape?: number[];
  /** Symbolic names of dynamic dims (ONNX dim_param), where the model gives them: equal names must get equal sizes. */
  dimNames?: (string | null)[];
  description?: string;
}

export interface ModelSignature {
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  /** True when dim 0 of every input and output is the batch dimension. */
  batchable: boolean;
}

/** Number of elements a shape holds; 1 for a scalar. */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Allocates the data array for `datatype` with `length` elements. */
export function allocate(datatype: Datatype, length: number): TensorData {
  switch (datatype) {
    case "BOOL":
    case "UINT8":
      return new Uint8Array(length);
    case "UINT16":
      return new Uint16Array(length);
    case "UINT32":
      return new Uint32Array(length);
    case "UINT64":
      return new BigUint64Array(length);
    case "INT8":
      return new Int8Array(length);
    case "INT16":
      return new Int16Array(length);
    case "INT32":
      return new Int32Array(length);
    case "INT64":
      return new BigInt64Array(length);
    case "FP16":
    case "FP32":
      return new Float32Array(length);
    case "FP64":
      return new Float64Array(length);
    case "BYTES":
      return new Array<string>(length).fill("");
  }
}

/** Nests a flat row-major array by `shape`; a scalar (shape []) returns its only element. */
export function nest(flat: readonly unknown[], shape: readonly number[]): unknown {
  if (shape.length === 0) return flat[0];
  if (shape.length === 1) return flat;
  let level: unknown[] = flat as unknown[];
  for (let axis = shape.length - 1; axis >= 1; axis--) {
    const size = shape[axis]!;
    const next: unknown[] = new Array(level.length / Math.max(size, 1));
    for (let i = 0; i < next.length; i++) next[i] = level.slice(i * size, (i + 1) * size);
    level = next;
  }
  return level;
}
