// The Open Inference Protocol's JSON bodies: infer inputs into tensors checked against the
// model's signature (binary inputs taken from a BinarySection), and outputs as flat row-major
// data with shape and datatype.
import { ModelportError } from "../errors.js";
import type { ModelSignature, Tensor, TensorMap, TensorSpec } from "../tensor.js";
import type { BinarySection } from "./binary-section.js";
import {
  checkInputs,
  type DecodeLimits,
  decodeTensor,
  decodeTypedTensor,
  requireObject,
} from "./decode-tensor.js";
import { JsonWriter } from "./json-data.js";
import { pickOutputs } from "./requested-outputs.js";
import { SHM } from "./shared-memory-params.js";
import { tensorDataFromBytes } from "./tensor-bytes.js";

/** An OIP input's `parameters.binary_data_size` (binary tensor extension); undefined when absent. */
function binaryDataSize(inp: Record<string, unknown>, i: number): unknown {
  const params = inp.parameters;
  if (params === undefined) return undefined;
  if (typeof params !== "object" || params === null || Array.isArray(params)) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `inputs[${i}] ('${inp.name}'): "parameters" must be an object`,
    );
  }
  return (params as Record<string, unknown>).binary_data_size;
}

/**
 * BYTES sent for an input the model does not take as BYTES: refused with its own code before the
 * data is read (strings cannot become numbers). Shared by the JSON, binary and gRPC inputs.
 */
export function refuseBytesFor(spec: TensorSpec, datatype: unknown): void {
  if (datatype === "BYTES" && spec.datatype !== "BYTES") {
    throw new ModelportError(
      "MP_ERR_DATATYPE_UNSUPPORTED",
      `input '${spec.name}': BYTES data is not accepted for this input; the model expects ${spec.datatype}`,
    );
  }
}

/**
 * Open Inference Protocol infer body: `{id?, parameters?, inputs: [{name, shape, datatype, data}], outputs?}`.
 * With `binary` (the bytes after a binary request's JSON header), inputs with
 * `parameters.binary_data_size` take their data from it, in input order. With `shared` (the bytes
 * read from shared memory regions, by input index; shared-memory-params.ts), those inputs take
 * their data from there. The others carry `data`.
 */
export function decodeOip(
  body: unknown,
  signature: ModelSignature,
  limits: DecodeLimits,
  binary?: BinarySection,
  shared?: ReadonlyMap<number, Uint8Array>,
): TensorMap {
  const obj = requireObject(body, "the request body");
  if (!Array.isArray(obj.inputs)) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      '"inputs" must be an array of {name, shape, datatype, data}',
    );
  }
  const specs = new Map(signature.inputs.map((s) => [s.name, s]));
  const tensors: TensorMap = {};
  const names: string[] = [];
  obj.inputs.forEach((raw, i) => {
    const inp = requireObject(raw, `inputs[${i}]`);
    if (typeof inp.name !== "string")
      throw new ModelportError("MP_ERR_REQUEST_INVALID", `inputs[${i}].name must be a string`);
    if (!Array.isArray(inp.shape)) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `inputs[${i}] ('${inp.name}'): "shape" is required and must be an array`,
      );
    }
    if (typeof inp.datatype !== "string") {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `inputs[${i}] ('${inp.name}'): "datatype" is required`,
      );
    }
    const size = binaryDataSize(inp, i);
    const hasData = Object.hasOwn(inp, "data");
    const sharedBytes = shared?.get(i);
    if (sharedBytes && (size !== undefined || hasData)) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `inputs[${i}] ('${inp.name}') names a shared memory region and also has ${hasData ? '"data"' : "parameters.binary_data_size"}; send one`,
      );
    }
    if (!sharedBytes && size === undefined && !hasData) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `inputs[${i}] ('${inp.name}'): "data" is required (or parameters.binary_data_size in a binary request)`,
      );
    }
    if (size !== undefined && hasData) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `inputs[${i}] ('${inp.name}') has both "data" and parameters.binary_data_size; send one`,
      );
    }
    names.push(inp.name);
    const spec = specs.get(inp.name);
    // An unknown input is reported by checkInputs with the list of known inputs.
    if (spec) refuseBytesFor(spec, inp.datatype);
    if (sharedBytes) {
      if (!spec) return;
      const what = `input '${inp.name}' (${SHM.byteSize} ${sharedBytes.length})`;
      tensors[inp.name] = decodeTypedTensor(spec, inp.shape, inp.datatype, (dt, count) =>
        tensorDataFromBytes(dt, count, sharedBytes, what),
      );
      return;
    }
    if (size === undefined) {
      if (spec) tensors[inp.name] = decodeTensor(spec, inp.data, inp.shape, inp.datatype);
      return;
    }
    if (!binary) {
      throw new ModelportError(
        "MP_ERR_BINARY_HEADER_LENGTH",
        `input '${inp.name}' has parameters.binary_data_size but the request has no binary part: send the JSON header, then the bytes, with Inference-Header-Content-Length set to the JSON header's length`,
        { input: inp.name },
      );
    }
    const tensor = binary.take(inp.name, spec, inp.shape, inp.datatype, size);
    if (tensor) tensors[inp.name] = tensor;
  });
  checkInputs(names, signature, tensors, limits);
  binary?.finish();
  return tensors;
}

/** One output of an OIP infer answer; with `parameters` (binary data) its data is not in the JSON. */
export interface OipAnswerOutput {
  name: string;
  tensor: Tensor;
  parameters?: Record<string, unknown>;
}

/**
 * An OIP infer answer as JSON: the fields of `meta`, then `outputs`, each with its name, datatype,
 * shape, and its flat row-major data (json-data.ts) or its parameters.
 */
export function oipAnswer(meta: Record<string, unknown>, outputs: readonly OipAnswerOutput[]): JsonWriter {
  const w = new JsonWriter().open(meta, "outputs").text("[");
  outputs.forEach(({ name, tensor, parameters }, i) => {
    const about = JSON.stringify({ name, datatype: tensor.datatype, shape: tensor.shape, parameters });
    if (parameters) w.text(i ? `,${about}` : about);
    else
      w.text(`${i ? "," : ""}${about.slice(0, -1)},"data":`)
        .data(tensor, false)
        .text("}");
  });
  return w.text("]}");
}

/** The outputs `names` asks for (all when undefined), each with its data in the JSON. */
export function jsonOutputs(outputs: TensorMap, names?: readonly string[]): OipAnswerOutput[] {
  return pickOutputs(outputs, names).map(([name, tensor]) => ({ name, tensor }));
}
