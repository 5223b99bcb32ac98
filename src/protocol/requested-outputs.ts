// Which outputs a request asked for, checked against the model, and the pick of those outputs.
import { ModelportError } from "../errors.js";
import type { ModelSignature, TensorMap } from "../tensor.js";

/** Requested output names (OIP `outputs: [{name}]` or native `outputs: ["name"]`), checked against the model. */
export function requestedOutputs(raw: unknown, signature: ModelSignature): string[] | undefined {
  if (raw === undefined) return undefined;
  if (!Array.isArray(raw)) throw new ModelportError("MP_ERR_REQUEST_INVALID", '"outputs" must be an array');
  const known = new Set(signature.outputs.map((o) => o.name));
  return raw.map((o, i) => {
    const name =
      typeof o === "string"
        ? o
        : typeof o === "object" && o !== null
          ? (o as { name?: unknown }).name
          : undefined;
    if (typeof name !== "string")
      throw new ModelportError("MP_ERR_REQUEST_INVALID", `outputs[${i}] must name an output`);
    if (!known.has(name)) {
      throw new ModelportError(
        "MP_ERR_OUTPUT_UNKNOWN",
        `output '${name}' is not produced by this model; it produces ${[...known].map((k) => `'${k}'`).join(", ")}`,
      );
    }
    return name;
  });
}

/** The outputs named in `names` (all of them when undefined), in the model's order. */
export function pickOutputs(
  outputs: TensorMap,
  names: readonly string[] | undefined,
): [string, TensorMap[string]][] {
  const entries = Object.entries(outputs);
  return names ? entries.filter(([n]) => names.includes(n)) : entries;
}
