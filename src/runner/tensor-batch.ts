// Joins requests into one batch along dim 0 and splits the batch's outputs back, so each
// caller gets exactly its own rows. Only requests with the same layout (input names,
// datatypes, rank and every dim after dim 0) may share a batch; anything that does not add up
// throws a ModelportError instead of reading or writing past a buffer.
import { ModelportError } from "../errors.js";
import { allocate, elementCount, type Tensor, type TensorMap } from "../tensor.js";

/**
 * True when `a` and `b` can be joined along dim 0: the same input names and, for each, the same
 * datatype, the same rank (at least 1) and the same dims after dim 0. Allocates nothing.
 */
export function joinable(a: TensorMap, b: TensorMap): boolean {
  if (a === b) return true;
  for (const name in a) {
    const x = a[name]!;
    const y = b[name];
    if (y === undefined || x.datatype !== y.datatype) return false;
    const xs = x.shape;
    const ys = y.shape;
    if (xs.length !== ys.length || xs.length === 0) return false;
    for (let i = 1; i < xs.length; i++) if (xs[i] !== ys[i]) return false;
  }
  for (const name in b) if (a[name] === undefined) return false;
  return true;
}

function mismatch(message: string): ModelportError {
  return new ModelportError("MP_ERR_INFERENCE_FAILED", message);
}

/** Throws unless `t.data` holds exactly the elements its shape says. */
function checkSize(what: string, t: Tensor): void {
  const n = elementCount(t.shape);
  if (t.data.length !== n) {
    throw mismatch(
      `${what} has shape [${t.shape.join(", ")}] (${n} values) but holds ${t.data.length} values`,
    );
  }
}

/**
 * Concatenates each named tensor of `parts` along dim 0.
 * @throws ModelportError MP_ERR_INFERENCE_FAILED when the parts are not joinable or a tensor's
 * data does not fill its shape.
 */
export function concatBatch(parts: readonly TensorMap[]): TensorMap {
  if (parts.length === 1) return parts[0]!;
  const head = parts[0]!;
  for (let k = 1; k < parts.length; k++) {
    if (!joinable(head, parts[k]!)) {
      throw mismatch(
        `tensors of different names, datatypes or trailing dims cannot be joined along dim 0 (part ${k} differs from part 0)`,
      );
    }
  }
  const out: TensorMap = {};
  for (const name of Object.keys(head)) {
    const tensors = parts.map((p) => p[name]!);
    let rows = 0;
    for (const t of tensors) {
      checkSize(`tensor '${name}'`, t);
      rows += t.shape[0]!;
    }
    const first = tensors[0]!;
    const shape = [rows, ...first.shape.slice(1)];
    out[name] = { datatype: first.datatype, shape, data: concatData(tensors, elementCount(shape)) };
  }
  return out;
}

function concatData(tensors: readonly Tensor[], length: number): Tensor["data"] {
  const first = tensors[0]!;
  if (Array.isArray(first.data)) return tensors.flatMap((t) => t.data as string[]);
  const data = allocate(first.datatype, length) as Exclude<Tensor["data"], string[]>;
  let offset = 0;
  for (const t of tensors) {
    (data as Float32Array).set(t.data as Float32Array, offset);
    offset += t.data.length;
  }
  return data;
}

/**
 * Checks one request's own outputs (a batch of one): every tensor's data fills its shape.
 * @throws ModelportError MP_ERR_INFERENCE_FAILED otherwise.
 */
export function checkOutputs(outputs: TensorMap): TensorMap {
  for (const name in outputs) checkSize(`output '${name}'`, outputs[name]!);
  return outputs;
}

/**
 * Splits every output along dim 0 into pieces of `rows[i]` rows.
 * @throws ModelportError MP_ERR_INFERENCE_FAILED when an output's dim 0 is not the batch or
 * its data does not fill its shape.
 */
export function splitBatch(outputs: TensorMap, rows: readonly number[]): TensorMap[] {
  if (rows.length === 1) return [checkOutputs(outputs)];
  const total = rows.reduce((a, b) => a + b, 0);
  const pieces: TensorMap[] = rows.map(() => ({}));
  for (const [name, t] of Object.entries(outputs)) {
    if (t.shape.length === 0 || t.shape[0] !== total) {
      throw mismatch(
        `output '${name}' has shape [${t.shape.join(", ")}] for a batch of ${total} rows: dim 0 is not the batch; declare the model not batchable`,
      );
    }
    checkSize(`output '${name}'`, t);
    const per = elementCount(t.shape.slice(1));
    let start = 0;
    rows.forEach((n, i) => {
      const end = start + n * per;
      const data = Array.isArray(t.data)
        ? t.data.slice(start, end)
        : (t.data as Float32Array).subarray(start, end);
      pieces[i]![name] = { datatype: t.datatype, shape: [n, ...t.shape.slice(1)], data };
      start = end;
    });
  }
  return pieces;
}

/** Slices rows [from, to) of every tensor (used to split a request larger than a batch). */
export function sliceRows(inputs: TensorMap, from: number, to: number): TensorMap {
  const out: TensorMap = {};
  for (const [name, t] of Object.entries(inputs)) {
    checkSize(`input '${name}'`, t);
    const per = elementCount(t.shape.slice(1));
    const data = Array.isArray(t.data)
      ? t.data.slice(from * per, to * per)
      : (t.data as Float32Array).slice(from * per, to * per);
    out[name] = { datatype: t.datatype, shape: [to - from, ...t.shape.slice(1)], data };
  }
  return out;
}
