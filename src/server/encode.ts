// Turns model outputs into the JSON shapes of the native API and the Open Inference Protocol.
import { nest, type TensorMap, toJsonArray } from "../tensor.js";

function pick(outputs: TensorMap, names: readonly string[] | undefined): [string, TensorMap[string]][] {
  const entries = Object.entries(outputs);
  return names ? entries.filter(([n]) => names.includes(n)) : entries;
}

/** Native form: `{name: nested array}` by the output's shape. */
export function encodeNative(outputs: TensorMap, names?: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, t] of pick(outputs, names)) out[name] = nest(toJsonArray(t), t.shape);
  return out;
}

export interface OipOutput {
  name: string;
  datatype: string;
  shape: number[];
  data: (number | boolean | string)[];
}

/** Open Inference Protocol form: flat row-major data with shape and datatype. */
export function encodeOip(outputs: TensorMap, names?: readonly string[]): OipOutput[] {
  return pick(outputs, names).map(([name, t]) => ({
    name,
    datatype: t.datatype,
    shape: t.shape,
    data: toJsonArray(t),
  }));
}
