// The Open Inference Protocol's server and model metadata, one shape for the HTTP routes
// (GET /v2, GET /v2/models/{m}) and the gRPC ServerMetadata and ModelMetadata calls.
import type { ModelSignature, TensorSpec } from "../tensor.js";
import { VERSION } from "../version.js";

/** What the metadata of a model is made from: a ServedModel has these. */
export interface MetadataSource {
  readonly config: { readonly name: string; readonly version: string; readonly backend: string };
  readonly signature: ModelSignature | undefined;
}

export interface TensorMetadata {
  name: string;
  datatype: string;
  shape: number[];
}

export interface ModelMetadata {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

const PLATFORM: Record<string, string> = { onnx: "onnxruntime_onnx", custom: "modelport_custom" };

/**
 * The server's name, version and the protocol extensions it speaks: binary tensors and the
 * repository on HTTP, and system_shared_memory where `sharedMemory` is on.
 */
export function serverMetadata(sharedMemory = false): {
  name: string;
  version: string;
  extensions: string[];
} {
  const extensions = ["binary_tensor_data", "model_repository"];
  if (sharedMemory) extensions.push("system_shared_memory");
  return { name: "modelport", version: VERSION, extensions };
}

/**
 * A model's name, versions (`versions`: every loaded one, else its own), platform and tensors (no
 * inputs or outputs until its signature is known).
 */
export function modelMetadata(model: MetadataSource, versions?: readonly string[]): ModelMetadata {
  const sig = model.signature;
  const spec = (s: TensorSpec): TensorMetadata => ({
    name: s.name,
    datatype: s.datatype,
    shape: s.shape ?? [],
  });
  const { name, version, backend } = model.config;
  return {
    name,
    versions: versions?.length ? [...versions] : [version],
    platform: PLATFORM[backend] ?? backend,
    inputs: (sig?.inputs ?? []).map(spec),
    outputs: (sig?.outputs ?? []).map(spec),
  };
}
