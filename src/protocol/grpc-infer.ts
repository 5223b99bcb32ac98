// The Open Inference Protocol's gRPC infer messages (src/grpc/inference.proto): a
// ModelInferRequest's inputs into tensors checked against the model's signature, and outputs into
// a ModelInferResponse. Inputs come raw (raw_input_contents: the bytes of the binary extension,
// read by tensorDataFromBytes) or typed (InferTensorContents: checked as JSON values are, by
// decodeTensor); outputs always go raw, as Triton answers.
import { ModelportError } from "../errors.js";
import type { Datatype, ModelSignature, Tensor, TensorMap, TensorSpec } from "../tensor.js";
import { alignInPlace } from "./align-in-place.js";
import { isBodyMemory } from "./body-memory.js";
import {
  checkDatatype,
  checkInputs,
  type DecodeLimits,
  decodeTensor,
  decodeTypedTensor,
  formatShape,
} from "./decode-tensor.js";
import { refuseBytesFor } from "./oip-body.js";
import { pickOutputs } from "./requested-outputs.js";
import { type SharedMemoryRef, sharedInputs, sharedOutputs } from "./shared-memory-params.js";
import { ELEMENT_BYTES, tensorDataFromBytes, tensorToBytes } from "./tensor-bytes.js";

// The message shapes as @grpc/proto-loader decodes them with the options of src/grpc/proto.ts:
// field names as in the .proto, every field present (defaults), int64 and uint64 as decimal
// strings, bytes as Buffers, an unset message field as null.

export interface GrpcTensorContents {
  bool_contents: boolean[];
  int_contents: number[];
  int64_contents: string[];
  uint_contents: number[];
  uint64_contents: string[];
  fp32_contents: number[];
  fp64_contents: number[];
  bytes_contents: Uint8Array[];
}

/** One InferParameter: the oneof's member that is set, named by `parameter_choice`. */
export interface GrpcParameter {
  parameter_choice?: "bool_param" | "int64_param" | "string_param";
  bool_param?: boolean;
  int64_param?: string | number;
  string_param?: string;
}

export type GrpcParameters = Record<string, GrpcParameter>;

export interface GrpcInferInput {
  name: string;
  datatype: string;
  shape: string[];
  parameters: GrpcParameters;
  contents: GrpcTensorContents | null;
}

export interface GrpcInferRequest {
  model_name: string;
  model_version: string;
  id: string;
  inputs: GrpcInferInput[];
  outputs: { name: string; parameters: GrpcParameters }[];
  raw_input_contents: Uint8Array[];
}

export interface GrpcInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  outputs: { name: string; datatype: string; shape: number[]; parameters?: GrpcParameters }[];
  raw_output_contents: Uint8Array[];
}

/**
 * A parameters map's values as JSON would carry them: strings, booleans, and int64 values as
 * numbers (beyond 2^53 - 1 they are no safe integer, which every reader of a count refuses).
 */
export function grpcParameterValues(params: GrpcParameters | null | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, p] of Object.entries(params ?? {})) {
    const choice = p.parameter_choice;
    if (choice === undefined) continue;
    out[key] = choice === "int64_param" ? Number(p.int64_param) : p[choice];
  }
  return out;
}

/** Values as InferParameters: strings, booleans, and numbers as int64. */
export function grpcParameters(values: Record<string, unknown>): GrpcParameters {
  const out: GrpcParameters = {};
  for (const [key, v] of Object.entries(values)) {
    if (typeof v === "string") out[key] = { string_param: v };
    else if (typeof v === "boolean") out[key] = { bool_param: v };
    else if (typeof v === "number") out[key] = { int64_param: String(v) };
  }
  return out;
}

/** Named tensors with their parameters as plain values, for the readers of shared-memory-params.ts. */
const plainParameters = (list: readonly { name: string; parameters: GrpcParameters }[]) =>
  list.map(({ name, parameters }) => ({ name, parameters: grpcParameterValues(parameters) }));

/** The inputs of a ModelInferRequest whose parameters name a shared memory region, by index. */
export function grpcSharedInputs(request: GrpcInferRequest): Map<number, SharedMemoryRef> {
  return sharedInputs(plainParameters(request.inputs));
}

/** The requested outputs of a ModelInferRequest to be written to a shared memory region, by name. */
export function grpcSharedOutputs(request: GrpcInferRequest): Map<string, SharedMemoryRef> {
  return sharedOutputs(plainParameters(request.outputs));
}

type ContentsField = keyof GrpcTensorContents;

/** The typed field each datatype's values travel in; FP16 has none (it goes raw). */
const CONTENTS_FIELD: Partial<Record<Datatype, ContentsField>> = {
  BOOL: "bool_contents",
  INT8: "int_contents",
  INT16: "int_contents",
  INT32: "int_contents",
  INT64: "int64_contents",
  UINT8: "uint_contents",
  UINT16: "uint_contents",
  UINT32: "uint_contents",
  UINT64: "uint64_contents",
  FP32: "fp32_contents",
  FP64: "fp64_contents",
  BYTES: "bytes_contents",
};

const FIELDS = Object.keys({
  bool_contents: 0,
  int_contents: 0,
  int64_contents: 0,
  uint_contents: 0,
  uint64_contents: 0,
  fp32_contents: 0,
  fp64_contents: 0,
  bytes_contents: 0,
} satisfies Record<ContentsField, 0>) as ContentsField[];

const DIM = /^\d{1,16}$/;

/**
 * A shape's int64 dims (decimal strings) as numbers: each from 0 to 2^53 - 1, so that the element
 * count and every size derived from it stay exact (protobuf carries up to 2^63 - 1, and negatives).
 */
function parseShape(name: string, dims: readonly string[]): number[] {
  const shape = dims.map((d) => (DIM.test(d) ? Number(d) : Number.NaN));
  if (!shape.every(Number.isSafeInteger)) {
    throw new ModelportError(
      "MP_ERR_INPUT_SHAPE",
      `input '${name}': shape must be non-negative integers up to 2^53 - 1, got ${formatShape(dims.map(Number))}`,
      { input: name },
    );
  }
  return shape;
}

/** The values of typed contents in the form decodeTensor checks JSON values in. */
function contentValues(spec: TensorSpec, contents: GrpcTensorContents, index: number): unknown[] {
  const field = CONTENTS_FIELD[spec.datatype];
  const sent = FIELDS.filter((f) => contents[f].length > 0);
  const where = `inputs[${index}] ('${spec.name}', ${spec.datatype})`;
  if (!field) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `${where}: ${spec.datatype} has no typed contents field; send its bytes in raw_input_contents (IEEE half, little-endian)`,
      { input: spec.name },
    );
  }
  const other = sent.find((f) => f !== field);
  if (other) {
    throw new ModelportError(
      "MP_ERR_INPUT_DATATYPE",
      `${where}: its values go in contents.${field}, but contents.${other} was sent`,
      { input: spec.name, expected: spec.datatype },
    );
  }
  const values = contents[field];
  switch (field) {
    case "int64_contents":
    case "uint64_contents":
      // Decimal strings to numbers: beyond 2^53 - 1 they round, and decodeTensor refuses them as out
      // of range, as it refuses such numbers in JSON.
      return (values as string[]).map(Number);
    case "bytes_contents": {
      const decoder = new TextDecoder();
      return (values as Uint8Array[]).map((b) => decoder.decode(b));
    }
    default:
      return values;
  }
}

/**
 * A ModelInferRequest's inputs as tensors checked against the model: every input raw (one
 * raw_input_contents entry each, in order) or every input typed (its `contents`), never both;
 * with `shared` (the bytes read from shared memory regions, by input index), those inputs take
 * their bytes from there and have no raw entry (as Triton reads them).
 * @throws ModelportError with the code the same fault gets over HTTP (MP_ERR_INPUT_*,
 *   MP_ERR_BINARY_DATA_SIZE for raw bytes that do not fit the shape, MP_ERR_REQUEST_INVALID).
 */
export function decodeGrpcInputs(
  request: GrpcInferRequest,
  signature: ModelSignature,
  limits: DecodeLimits,
  shared?: ReadonlyMap<number, Uint8Array>,
): TensorMap {
  const inputs = request.inputs;
  const unshared = inputs.length - (shared?.size ?? 0);
  const sent = request.raw_input_contents.length;
  if (sent > 0 && sent !== unshared) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `raw_input_contents holds ${sent} entries but inputs lists ${unshared} not in shared memory: send one per such input, in the order of inputs`,
    );
  }
  const raw = rawEntries(request, shared);
  const specs = new Map(signature.inputs.map((s) => [s.name, s]));
  const tensors: TensorMap = {};
  const names: string[] = [];
  let rawIndex = 0;
  inputs.forEach((inp, i) => {
    const sharedBytes = shared?.get(i);
    if (sharedBytes && inp.contents !== null) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `inputs[${i}] ('${inp.name}') names a shared memory region and also has contents; send one`,
        { input: inp.name },
      );
    }
    const bytes = sharedBytes ?? (raw.length > 0 ? raw[rawIndex++] : undefined);
    if (raw.length > 0 && inp.contents !== null) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `inputs[${i}] ('${inp.name}') has contents, but the request sends raw_input_contents: send every input one way`,
        { input: inp.name },
      );
    }
    names.push(inp.name);
    const spec = specs.get(inp.name);
    // An unknown input is reported by checkInputs with the list of known inputs.
    if (!spec) return;
    refuseBytesFor(spec, inp.datatype);
    const shape = parseShape(inp.name, inp.shape);
    let tensor: Tensor;
    if (bytes) {
      const what = sharedBytes
        ? `input '${inp.name}' (shared_memory_byte_size ${bytes.length})`
        : `raw_input_contents[${rawIndex - 1}] (input '${inp.name}')`;
      tensor = decodeTypedTensor(spec, shape, inp.datatype, (dt, count) =>
        tensorDataFromBytes(dt, count, bytes, what),
      );
    } else {
      if (inp.contents === null) {
        throw new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          `inputs[${i}] ('${inp.name}') carries no data: send its values in contents, or every input's bytes in raw_input_contents`,
          { input: inp.name },
        );
      }
      checkDatatype(spec, inp.datatype);
      tensor = decodeTensor(spec, contentValues(spec, inp.contents, i), shape, inp.datatype);
    }
    tensors[inp.name] = tensor;
  });
  checkInputs(names, signature, tensors, limits);
  return tensors;
}

/**
 * The raw entries, those in the message's own memory (src/grpc/proto.ts marks it) aligned there for
 * the datatype their input declares, so that they become the model's input without a copy
 * (align-in-place.ts). Only once every other field of the message has been read: the bytes
 * between the entries are overwritten.
 */
function rawEntries(
  request: GrpcInferRequest,
  shared: ReadonlyMap<number, Uint8Array> | undefined,
): Uint8Array[] {
  const raw = request.raw_input_contents;
  if (raw.length === 0) return raw;
  const sizes: number[] = [];
  request.inputs.forEach((inp, i) => {
    if (shared?.has(i)) return;
    const known = Object.hasOwn(ELEMENT_BYTES, inp.datatype);
    sizes.push(known ? ELEMENT_BYTES[inp.datatype as Exclude<Datatype, "BYTES">] : 1);
  });
  return alignInPlace(raw, sizes, isBodyMemory);
}

/**
 * A ModelInferResponse: the outputs named in `names` (all when undefined) with their bytes raw;
 * those in `shared` (written to shared memory, with the parameters they answer with) with those
 * parameters and an empty raw entry, as Triton answers.
 */
export function encodeGrpcOutputs(
  meta: { model_name: string; model_version: string; id: string },
  outputs: TensorMap,
  names: readonly string[] | undefined,
  shared?: ReadonlyMap<string, Record<string, unknown>>,
): GrpcInferResponse {
  const response: GrpcInferResponse = { ...meta, outputs: [], raw_output_contents: [] };
  for (const [name, t] of pickOutputs(outputs, names)) {
    const parameters = shared?.get(name);
    if (parameters) {
      response.outputs.push({
        name,
        datatype: t.datatype,
        shape: t.shape,
        parameters: grpcParameters(parameters),
      });
      response.raw_output_contents.push(Buffer.alloc(0));
      continue;
    }
    response.outputs.push({ name, datatype: t.datatype, shape: t.shape });
    const bytes = tensorToBytes(t);
    // A Buffer over the same memory: protobufjs copies anything else into a Buffer first.
    response.raw_output_contents.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }
  return response;
}
