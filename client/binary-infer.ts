// The Open Inference Protocol's binary tensor data extension from the client's side: a request
// body of a JSON header (each input with parameters.binary_data_size) followed by each input's
// bytes, every output asked back as binary; and the answer split at its
// Inference-Header-Content-Length into the header and the outputs' bytes (docs/API.md#binary-tensors).
import { ModelportError } from "./errors.js";
import {
  type Datatype,
  datatypeFor,
  type Tensor,
  type TensorInput,
  tensorFromBytes,
  tensorFromJson,
  tensorToBytes,
} from "./tensors.js";

export const INFERENCE_HEADER = "inference-header-content-length";

export interface BinaryRequest {
  body: Uint8Array;
  headers: Record<string, string>;
}

/** The body and headers of a binary infer request for `inputs`, asking `outputs` (default: all) back as binary. */
export function encodeBinaryRequest(
  inputs: Readonly<Record<string, TensorInput>>,
  options: { outputs?: readonly string[]; id?: string } = {},
): BinaryRequest {
  const chunks: Uint8Array[] = [];
  const list = Object.entries(inputs).map(([name, t]) => {
    const datatype = datatypeFor(name, t);
    const bytes = tensorToBytes(datatype, t.data);
    chunks.push(bytes);
    return { name, shape: [...t.shape], datatype, parameters: { binary_data_size: bytes.byteLength } };
  });
  const header: Record<string, unknown> = { inputs: list };
  if (options.id !== undefined) header.id = options.id;
  if (options.outputs) {
    header.outputs = options.outputs.map((name) => ({ name, parameters: { binary_data: true } }));
  } else header.parameters = { binary_data_output: true };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const body = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, json.byteLength));
  body.set(json, 0);
  let at = json.byteLength;
  for (const c of chunks) {
    body.set(c, at);
    at += c.byteLength;
  }
  return {
    body,
    headers: { "content-type": "application/octet-stream", [INFERENCE_HEADER]: String(json.byteLength) },
  };
}

interface WireOutput {
  name: string;
  datatype: Datatype;
  shape: number[];
  data?: unknown;
  parameters?: { binary_data_size?: number };
}

function bad(message: string): ModelportError {
  return new ModelportError({ code: "MP_ERR_CLIENT_RESPONSE", message, status: 0, retryable: false });
}

/**
 * An infer answer as tensors: binary (a JSON header of Inference-Header-Content-Length bytes, then
 * each binary output's bytes in order) or plain JSON (outputs with `data`).
 */
export function decodeBinaryResponse(
  bytes: Uint8Array,
  headerLength: string | null,
): { meta: Record<string, unknown>; outputs: Record<string, Tensor> } {
  const n = headerLength === null ? bytes.byteLength : Number(headerLength);
  if (!Number.isSafeInteger(n) || n < 1 || n > bytes.byteLength) {
    throw bad(`Inference-Header-Content-Length is ${headerLength} for a ${bytes.byteLength}-byte answer`);
  }
  const meta = JSON.parse(new TextDecoder().decode(bytes.subarray(0, n))) as Record<string, unknown>;
  if (!Array.isArray(meta.outputs)) throw bad("the infer answer has no outputs array");
  const outputs: Record<string, Tensor> = {};
  let at = n;
  for (const o of meta.outputs as WireOutput[]) {
    const count = o.shape.reduce((a, d) => a * d, 1);
    const size = o.parameters?.binary_data_size;
    if (size === undefined) {
      outputs[o.name] = { datatype: o.datatype, shape: o.shape, data: tensorFromJson(o.datatype, o.data) };
      continue;
    }
    if (at + size > bytes.byteLength) throw bad(`output '${o.name}' runs past the end of the answer`);
    const data = tensorFromBytes(o.datatype, count, bytes.subarray(at, at + size), `output '${o.name}'`);
    at += size;
    outputs[o.name] = { datatype: o.datatype, shape: o.shape, data };
  }
  if (at !== bytes.byteLength) throw bad(`${bytes.byteLength - at} bytes follow the last binary output`);
  return { meta, outputs };
}
