// The native API's bodies: `{rows}` or `{inputs}` into tensors checked against the model's
// signature, and outputs back as `{name: nested array}`.
import { ModelportError } from "../errors.js";
import { type ModelSignature, nest, type TensorMap } from "../tensor.js";
import { checkInputs, type DecodeLimits, decodeTensor, requireObject, tooManyRows } from "./decode-tensor.js";
import { JsonWriter, toJsonArray } from "./json-data.js";
import { pickOutputs } from "./requested-outputs.js";

/** Rows of objects ({input: value}) become one tensor per input. */
function rowsOfObjects(rows: unknown[], signature: ModelSignature): TensorMap {
  const columns = new Map<string, unknown[]>();
  for (const spec of signature.inputs) columns.set(spec.name, []);
  rows.forEach((row, r) => {
    const obj = requireObject(row, `rows[${r}]`);
    for (const key of Object.keys(obj)) {
      const col = columns.get(key);
      if (!col) {
        throw new ModelportError(
          "MP_ERR_INPUT_UNKNOWN",
          `rows[${r}] has '${key}', which is not a model input; inputs are ${[...columns.keys()].map((k) => `'${k}'`).join(", ")}`,
          { input: key },
        );
      }
      col.push(obj[key]);
    }
    for (const [name, col] of columns) {
      if (col.length !== r + 1) {
        throw new ModelportError(
          "MP_ERR_INPUT_MISSING",
          `rows[${r}] has no '${name}'; every row needs every input`,
          {
            input: name,
          },
        );
      }
    }
  });
  const out: TensorMap = {};
  for (const spec of signature.inputs) out[spec.name] = decodeTensor(spec, columns.get(spec.name));
  return out;
}

/**
 * Native predict body: `{rows: [...]}` (arrays for a single-input model, objects keyed by
 * input name for any model) or `{inputs: {name: nested data | {data, shape?}}}`.
 */
export function decodeNative(body: unknown, signature: ModelSignature, limits: DecodeLimits): TensorMap {
  const obj = requireObject(body, "the request body");
  // Own keys only: `in` also sees Object.prototype ("constructor", "toString", ...).
  const hasRows = Object.hasOwn(obj, "rows");
  const hasInputs = Object.hasOwn(obj, "inputs");
  if (hasRows === hasInputs) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      'send exactly one of "rows" (a list of rows) or "inputs" (an object of named tensors)',
    );
  }
  let tensors: TensorMap;
  let names: string[];
  if (hasRows) {
    const rows = obj.rows;
    if (!Array.isArray(rows))
      throw new ModelportError("MP_ERR_REQUEST_INVALID", '"rows" must be an array of rows');
    if (rows.length === 0)
      throw new ModelportError("MP_ERR_INPUT_EMPTY_BATCH", '"rows" is empty; send at least one row');
    // Refuse oversized requests before decoding them.
    if (rows.length > limits.maxBatchRows) throw tooManyRows(rows.length, limits.maxBatchRows);
    const first = rows[0];
    if (typeof first === "object" && first !== null && !Array.isArray(first)) {
      tensors = rowsOfObjects(rows, signature);
    } else if (signature.inputs.length === 1) {
      tensors = { [signature.inputs[0]!.name]: decodeTensor(signature.inputs[0]!, rows) };
    } else {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `this model has ${signature.inputs.length} inputs: send rows as objects keyed by input name, or use "inputs"`,
      );
    }
    names = Object.keys(tensors);
  } else {
    const inputs = requireObject(obj.inputs, '"inputs"');
    names = Object.keys(inputs);
    tensors = {};
    for (const spec of signature.inputs) {
      if (!Object.hasOwn(inputs, spec.name)) continue;
      const v = inputs[spec.name];
      if (typeof v === "object" && v !== null && !Array.isArray(v)) {
        const t = v as Record<string, unknown>;
        tensors[spec.name] = decodeTensor(spec, t.data, t.shape, t.datatype);
      } else tensors[spec.name] = decodeTensor(spec, v);
    }
  }
  checkInputs(names, signature, tensors, limits);
  return tensors;
}

/** Native form: `{name: nested array}` by the output's shape (a job's result). */
export function encodeNative(outputs: TensorMap, names?: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, t] of pickOutputs(outputs, names)) out[name] = nest(toJsonArray(t), t.shape);
  return out;
}

/**
 * A predict answer as JSON: the fields of `meta`, then `outputs` in the native form, each output's
 * data written by json-data.ts (the same values as encodeNative's, FP32 in its shortest text).
 */
export function nativeAnswer(
  meta: Record<string, unknown>,
  outputs: TensorMap,
  names?: readonly string[],
): JsonWriter {
  const w = new JsonWriter().open(meta, "outputs").text("{");
  let comma = "";
  for (const name in outputs) {
    if (names && !names.includes(name)) continue;
    w.text(`${comma}${JSON.stringify(name)}:`).data(outputs[name]!, true);
    comma = ",";
  }
  return w.text("}}");
}
