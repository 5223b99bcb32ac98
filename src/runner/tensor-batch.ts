// Joins requests into one batch along dim 0 and splits the batch's outputs back, so each
// caller gets exactly its own rows.
import { ModelportError } from "../errors.js";
import { allocate, elementCount, type Tensor, type TensorMap } from "../tensor.js";

/** Concatenates each named tensor of `parts` along dim 0. All parts share names, datatypes and trailing dims. */
export function concatBatch(parts: readonly TensorMap[]): TensorMap {
  if (parts.length === 1) return parts[0]!;
  const out: TensorMap = {};
  for (const name of Object.keys(parts[0]!)) {
    const tensors = parts.map((p) => p[name]!);
    const first = tensors[0]!;
    const rows = tensors.reduce((n, t) => n + t.shape[0]!, 0);
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

/** Splits every output along dim 0 into pieces of `rows[i]` rows. @throws when an output's dim 0 is not the batch. */
export function splitBatch(outputs: TensorMap, rows: readonly number[]): TensorMap[] {
  if (rows.length === 1) return [outputs];
  const total = rows.reduce((a, b) => a + b, 0);
  const pieces: TensorMap[] = rows.map(() => ({}));
  for (const [name, t] of Object.entries(outputs)) {
    if (t.shape[0] !== total) {
      throw new ModelportError(
        "MP_ERR_INFERENCE_FAILED",
        `output '${name}' has dim 0 of ${t.shape[0]} for a batch of ${total} rows; declare the model not batchable`,
      );
    }
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
    const per = elementCount(t.shape.slice(1));
    const data = Array.isArray(t.data)
      ? t.data.slice(from * per, to * per)
      : (t.data as Float32Array).slice(from * per, to * per);
    out[name] = { datatype: t.datatype, shape: [to - from, ...t.shape.slice(1)], data };
  }
  return out;
}
