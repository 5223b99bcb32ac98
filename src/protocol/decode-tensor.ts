// One JSON tensor (nested data, or flat data with a shape) into a typed tensor checked against
// the model's input spec, and the checks every decoded request passes (every input present,
// rows within limits, named dims consistent). Every refusal names the input, what was sent and
// what the model expects.
import { ModelportError } from "../errors.js";
import {
  allocate,
  DATATYPES,
  type Datatype,
  elementCount,
  type ModelSignature,
  type Tensor,
  type TensorData,
  type TensorMap,
  type TensorSpec,
} from "../tensor.js";

export interface DecodeLimits {
  maxBatchRows: number;
}

const INT_RANGES: Partial<Record<Datatype, [number, number]>> = {
  INT8: [-128, 127],
  INT16: [-32768, 32767],
  INT32: [-2147483648, 2147483647],
  INT64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  UINT8: [0, 255],
  UINT16: [0, 65535],
  UINT32: [0, 4294967295],
  UINT64: [0, Number.MAX_SAFE_INTEGER],
};

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string")
    return `the string ${JSON.stringify(value.length > 20 ? `${value.slice(0, 20)}…` : value)}`;
  // Not String(value): a client's object can have its own "toString" key, and then String throws.
  if (typeof value === "object") return "an object";
  return `${typeof value} ${String(value)}`;
}

/** Dims shown in a message; a client can send a tensor nested 100,000 deep, and its shape with it. */
const SHOWN_DIMS = 16;

export function formatShape(shape: readonly number[] | undefined): string {
  if (!shape) return "(any)";
  const dims = shape.slice(0, SHOWN_DIMS).map((d) => (d < 0 ? "-1" : String(d)));
  if (shape.length > SHOWN_DIMS) dims.push(`… (${shape.length} dims)`);
  return `[${dims.join(", ")}]`;
}

/** The shape the first element at each level implies, and the first leaf value. */
function firstPath(value: unknown): { shape: number[]; leaf: unknown } {
  const shape: number[] = [];
  let leaf = value;
  while (Array.isArray(leaf)) {
    shape.push(leaf.length);
    leaf = leaf[0];
  }
  return { shape, leaf };
}

/** Flattens nested arrays row-major; returns the flat values and the shape they form. */
function flatten(input: string, value: unknown): { flat: unknown[]; shape: number[] } {
  if (!Array.isArray(value)) return { flat: [value], shape: [] };
  const { shape } = firstPath(value);
  if (shape.length === 1) return { flat: value, shape };
  const flat: unknown[] = [];
  // Walked with an explicit stack, not recursion: the depth is the client's to choose, and a
  // recursive walk overflows the call stack a few thousand levels down. `at` is the index path
  // of the array being walked at each depth; `arrays` holds those arrays.
  const at: number[] = [];
  const arrays: unknown[][] = [];
  const where = (depth: number) =>
    at
      .slice(0, Math.min(depth, SHOWN_DIMS))
      .map((i) => `[${i}]`)
      .join("") + (depth > SHOWN_DIMS ? `… (${depth} levels down)` : "");
  const enter = (v: unknown, depth: number): void => {
    if (!Array.isArray(v) || v.length !== shape[depth]) {
      throw new ModelportError(
        "MP_ERR_INPUT_SHAPE",
        `input '${input}': element ${where(depth)} has ${Array.isArray(v) ? `${v.length} items` : "no items"} but its siblings have ${shape[depth]}; arrays must be rectangular`,
        { input },
      );
    }
    arrays[depth] = v;
    at[depth] = 0;
  };
  enter(value, 0);
  let depth = 0;
  while (depth >= 0) {
    const list = arrays[depth]!;
    const i = at[depth]!;
    if (i === list.length) {
      // This array is done: continue with the next sibling one level up.
      depth--;
      if (depth >= 0) at[depth]!++;
      continue;
    }
    const v = list[i];
    if (depth + 1 === shape.length) {
      if (Array.isArray(v)) {
        throw new ModelportError(
          "MP_ERR_INPUT_SHAPE",
          `input '${input}': element ${where(depth + 1)} is nested deeper than its siblings; arrays must be rectangular`,
          { input },
        );
      }
      flat.push(v);
      at[depth]!++;
    } else {
      depth++;
      enter(v, depth);
    }
  }
  return { flat, shape };
}

function fillElements(spec: TensorSpec, datatype: Datatype, flat: readonly unknown[]): Tensor["data"] {
  const input = spec.name;
  const data = allocate(datatype, flat.length);
  const fail = (
    code: "MP_ERR_INPUT_DATATYPE" | "MP_ERR_INPUT_NOT_FINITE" | "MP_ERR_INPUT_OUT_OF_RANGE",
    i: number,
    v: unknown,
    want: string,
  ) => {
    throw new ModelportError(
      code,
      `input '${input}': element ${i} is ${describe(v)}; expected ${want} (${datatype})`,
      {
        input,
        index: i,
        expected: datatype,
      },
    );
  };
  switch (datatype) {
    case "FP16":
    case "FP32":
    case "FP64": {
      const out = data as Float32Array | Float64Array;
      for (let i = 0; i < flat.length; i++) {
        const v = flat[i];
        if (typeof v !== "number") fail("MP_ERR_INPUT_DATATYPE", i, v, "a number");
        else if (!Number.isFinite(v)) fail("MP_ERR_INPUT_NOT_FINITE", i, v, "a finite number");
        else out[i] = v;
      }
      return out;
    }
    case "BOOL": {
      const out = data as Uint8Array;
      for (let i = 0; i < flat.length; i++) {
        const v = flat[i];
        if (typeof v === "boolean") out[i] = v ? 1 : 0;
        else if (v === 0 || v === 1) out[i] = v;
        else fail("MP_ERR_INPUT_DATATYPE", i, v, "true or false");
      }
      return out;
    }
    case "BYTES": {
      const out = data as string[];
      for (let i = 0; i < flat.length; i++) {
        const v = flat[i];
        if (typeof v !== "string") fail("MP_ERR_INPUT_DATATYPE", i, v, "a string");
        else out[i] = v;
      }
      return out;
    }
    default: {
      const [lo, hi] = INT_RANGES[datatype]!;
      const big = datatype === "INT64" || datatype === "UINT64";
      for (let i = 0; i < flat.length; i++) {
        const v = flat[i];
        if (typeof v !== "number") fail("MP_ERR_INPUT_DATATYPE", i, v, "an integer");
        else if (!Number.isInteger(v) || v < lo || v > hi) {
          fail("MP_ERR_INPUT_OUT_OF_RANGE", i, v, `an integer from ${lo} to ${hi}`);
        } else if (big) (data as BigInt64Array | BigUint64Array)[i] = BigInt(v);
        else (data as Int32Array)[i] = v;
      }
      return data;
    }
  }
}

function checkShape(spec: TensorSpec, shape: readonly number[]): void {
  const want = spec.shape;
  if (!want) return;
  const ok = want.length === shape.length && want.every((d, i) => d < 0 || d === shape[i]);
  if (!ok) {
    throw new ModelportError(
      "MP_ERR_INPUT_SHAPE",
      `input '${spec.name}' has shape ${formatShape(shape)}; the model expects ${formatShape(want)} (-1 = any size)`,
      {
        input: spec.name,
        shape: shape.length > SHOWN_DIMS ? shape.slice(0, SHOWN_DIMS) : shape,
        expected: want,
      },
    );
  }
}

/** The datatype a request names for an input must be the model's (absent: taken as the model's). */
export function checkDatatype(spec: TensorSpec, datatype: unknown): void {
  if (datatype !== undefined && datatype !== spec.datatype) {
    const known = (DATATYPES as readonly unknown[]).includes(datatype);
    throw new ModelportError(
      "MP_ERR_INPUT_DATATYPE",
      `input '${spec.name}' was sent as ${known ? datatype : `unknown datatype ${JSON.stringify(datatype)}`}; the model expects ${spec.datatype}`,
      { input: spec.name, expected: spec.datatype },
    );
  }
}

/** A shape sent with the data must be an array of non-negative integers. */
function checkShapeValue(spec: TensorSpec, shape: unknown): number[] {
  if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
    throw new ModelportError(
      "MP_ERR_INPUT_SHAPE",
      `input '${spec.name}': shape must be an array of non-negative integers`,
      {
        input: spec.name,
      },
    );
  }
  return shape as number[];
}

/**
 * The common case without the general walk: nested arrays of finite numbers for an FP32 or FP64
 * input (rows, or an image's [n][c][h][w]), rectangular, written straight into the typed array
 * level by level. Anything else is undefined, and the general path decodes it (or refuses it with
 * its exact message). Flat data is left to the general path, which takes it in one pass already.
 */
function denseNested(spec: TensorSpec, value: unknown): Tensor | undefined {
  if (spec.datatype !== "FP32" && spec.datatype !== "FP64") return undefined;
  const { shape, leaf } = firstPath(value);
  // Depth 1 is flat; an empty dim or a first leaf that is no number is for the general path.
  if (shape.length < 2 || typeof leaf !== "number") return undefined;
  // Rows of numbers (two dimensions, the common case) are walked as they are; deeper data is
  // flattened to its innermost arrays first.
  let level: unknown[] = shape.length === 2 ? (value as unknown[]) : [value];
  for (let d = shape.length === 2 ? 1 : 0; d < shape.length - 1; d++) {
    const next: unknown[] = [];
    for (const a of level) {
      if (!Array.isArray(a) || a.length !== shape[d]) return undefined;
      for (let i = 0; i < a.length; i++) next.push(a[i]);
    }
    level = next;
  }
  const width = shape[shape.length - 1]!;
  const out =
    spec.datatype === "FP32"
      ? new Float32Array(level.length * width)
      : new Float64Array(level.length * width);
  let k = 0;
  for (const leaf of level) {
    if (!Array.isArray(leaf) || leaf.length !== width) return undefined;
    for (let j = 0; j < width; j++, k++) {
      const v: unknown = leaf[j];
      if (typeof v !== "number" || !Number.isFinite(v)) return undefined;
      out[k] = v;
    }
  }
  return { datatype: spec.datatype, shape, data: out };
}

/**
 * Decodes one input: `value` is flat or nested data; `shape` (optional) reshapes flat data.
 * @throws ModelportError with an MP_ERR_INPUT_* or MP_ERR_DATATYPE_UNSUPPORTED code.
 */
export function decodeTensor(spec: TensorSpec, value: unknown, shape?: unknown, datatype?: unknown): Tensor {
  checkDatatype(spec, datatype);
  const dense = shape === undefined ? denseNested(spec, value) : undefined;
  if (dense) {
    checkShape(spec, dense.shape);
    return dense;
  }
  const { flat, shape: nestedShape } = flatten(spec.name, value);
  let finalShape = nestedShape;
  if (shape !== undefined) {
    finalShape = checkShapeValue(spec, shape);
    const n = elementCount(finalShape);
    if (n !== flat.length) {
      throw new ModelportError(
        "MP_ERR_INPUT_SHAPE",
        `input '${spec.name}': shape ${formatShape(finalShape)} needs ${n} values but ${flat.length} were sent`,
        { input: spec.name, shape: finalShape.slice(0, SHOWN_DIMS) },
      );
    }
  }
  checkShape(spec, finalShape);
  return { datatype: spec.datatype, shape: finalShape, data: fillElements(spec, spec.datatype, flat) };
}

/**
 * Decodes one input whose data comes already typed (binary tensors): the same datatype and shape
 * checks as decodeTensor, then `read` turns the bytes into `count` elements of the model's datatype
 * (and refuses a byte count that does not fit).
 */
export function decodeTypedTensor(
  spec: TensorSpec,
  shape: unknown,
  datatype: unknown,
  read: (datatype: Datatype, count: number) => TensorData,
): Tensor {
  checkDatatype(spec, datatype);
  const finalShape = checkShapeValue(spec, shape);
  checkShape(spec, finalShape);
  return { datatype: spec.datatype, shape: finalShape, data: read(spec.datatype, elementCount(finalShape)) };
}

/** Checks that every declared input is present, that nothing extra was sent, and the batch size. */
export function checkInputs(
  names: readonly string[],
  signature: ModelSignature,
  tensors: TensorMap,
  limits: DecodeLimits,
): void {
  const declared = new Set(signature.inputs.map((s) => s.name));
  for (const n of names) {
    if (!declared.has(n)) {
      throw new ModelportError(
        "MP_ERR_INPUT_UNKNOWN",
        `input '${n}' is not one the model takes; it takes ${[...declared].map((d) => `'${d}'`).join(", ")}`,
        { input: n },
      );
    }
  }
  for (const spec of signature.inputs) {
    if (!Object.hasOwn(tensors, spec.name)) {
      throw new ModelportError(
        "MP_ERR_INPUT_MISSING",
        `input '${spec.name}' is missing; the model expects ${spec.datatype} of shape ${formatShape(spec.shape)}`,
        { input: spec.name },
      );
    }
  }
  checkNamedDims(signature, tensors);
  // Rows are dim 0 of every input whose dim 0 is dynamic.
  let rows = -1;
  for (const spec of signature.inputs) {
    if (spec.shape?.[0] !== -1) continue;
    const n = tensors[spec.name]!.shape[0]!;
    if (rows >= 0 && n !== rows) {
      throw new ModelportError(
        "MP_ERR_INPUT_BATCH_MISMATCH",
        `input '${spec.name}' has ${n} rows but the other inputs have ${rows}; every input needs the same dim 0`,
        { input: spec.name },
      );
    }
    rows = n;
  }
  if (rows === 0)
    throw new ModelportError("MP_ERR_INPUT_EMPTY_BATCH", "the request holds no rows; send at least one");
  if (rows > limits.maxBatchRows) throw tooManyRows(rows, limits.maxBatchRows);
}

/** Dynamic dims the model names alike (ONNX dim_param such as "batch") must have one size across inputs. */
function checkNamedDims(signature: ModelSignature, tensors: TensorMap): void {
  const seen = new Map<string, { size: number; input: string; axis: number }>();
  for (const spec of signature.inputs) {
    spec.dimNames?.forEach((dimName, axis) => {
      if (!dimName) return;
      const size = tensors[spec.name]!.shape[axis]!;
      const first = seen.get(dimName);
      if (!first) seen.set(dimName, { size, input: spec.name, axis });
      else if (first.size !== size) {
        throw new ModelportError(
          axis === 0 && first.axis === 0 ? "MP_ERR_INPUT_BATCH_MISMATCH" : "MP_ERR_INPUT_SHAPE",
          `dim '${dimName}' is ${size} in input '${spec.name}' but ${first.size} in '${first.input}'; the model needs them equal`,
          { input: spec.name, dim: dimName },
        );
      }
    });
  }
}

export function tooManyRows(rows: number, max: number): ModelportError {
  return new ModelportError(
    "MP_ERR_INPUT_TOO_MANY_ROWS",
    `the request holds ${rows} rows; this model takes at most ${max} per request (split it, or raise limits.maxBatchRows)`,
    { rows, max },
  );
}

export function requireObject(body: unknown, what: string): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ModelportError("MP_ERR_REQUEST_INVALID", `${what} must be a JSON object`);
  }
  return body as Record<string, unknown>;
}
