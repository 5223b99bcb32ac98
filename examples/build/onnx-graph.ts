// Small helpers to write ONNX ModelProto bytes with onnx-proto (protobufjs classes) without the
// Python toolchain. They encode the pitfalls once: initializers as little-endian raw bytes, string
// attributes as UTF-8 bytes (a JS string would be read as base64), and float attributes typed
// explicitly (JS cannot tell 1 from 1.0, so an untyped attribute could become an INT).

import type { onnx as OnnxTypes } from "onnx-proto";
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;

export type NodeProto = OnnxTypes.INodeProto;
export type TensorProto = OnnxTypes.ITensorProto;
export type ValueInfoProto = OnnxTypes.IValueInfoProto;
export type AttributeProto = OnnxTypes.IAttributeProto;

/** Element types the example models use, by their Open Inference Protocol names. */
export type ElemType = "FP32" | "FP64" | "INT64" | "BOOL" | "UINT8";

const ELEM_TYPE: Record<ElemType, OnnxTypes.TensorProto.DataType> = {
  FP32: onnx.TensorProto.DataType.FLOAT,
  FP64: onnx.TensorProto.DataType.DOUBLE,
  INT64: onnx.TensorProto.DataType.INT64,
  BOOL: onnx.TensorProto.DataType.BOOL,
  UINT8: onnx.TensorProto.DataType.UINT8,
};

/** ONNX element type number, e.g. for Cast's `to` attribute. */
export function elemTypeCode(type: ElemType): number {
  return ELEM_TYPE[type];
}

/** The dynamic batch dimension every example model declares on dim 0 of its inputs and outputs. */
export const BATCH = "batch";

/** A graph input or output: a number is a fixed dim, a string a named dynamic one; `[]` is a scalar. */
export function tensorInfo(name: string, type: ElemType, dims: readonly (number | string)[]): ValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType: ELEM_TYPE[type],
        shape: { dim: dims.map((d) => (typeof d === "string" ? { dimParam: d } : { dimValue: d })) },
      },
    },
  };
}

function checkSize(name: string, dims: readonly number[], length: number): void {
  const expected = dims.reduce((a, b) => a * b, 1);
  if (expected !== length)
    throw new Error(`initializer ${name}: dims [${dims}] need ${expected} values, got ${length}`);
}

/** FP32 initializer, stored as little-endian raw bytes. */
export function floatTensor(name: string, dims: readonly number[], values: ArrayLike<number>): TensorProto {
  checkSize(name, dims, values.length);
  const bytes = new Uint8Array(values.length * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i]!, true);
  return { name, dims: [...dims], dataType: ELEM_TYPE.FP32, rawData: bytes };
}

/** INT64 initializer, stored as little-endian raw bytes. */
export function int64Tensor(name: string, dims: readonly number[], values: readonly number[]): TensorProto {
  checkSize(name, dims, values.length);
  const bytes = new Uint8Array(values.length * 8);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < values.length; i++) view.setBigInt64(i * 8, BigInt(values[i]!), true);
  return { name, dims: [...dims], dataType: ELEM_TYPE.INT64, rawData: bytes };
}

const AttributeType = onnx.AttributeProto.AttributeType;
const utf8 = new TextEncoder();

/** Typed attribute constructors: the type field is always set, so ORT never has to guess. */
export const attr = {
  int: (name: string, value: number): AttributeProto => ({ name, type: AttributeType.INT, i: value }),
  ints: (name: string, values: readonly number[]): AttributeProto => ({
    name,
    type: AttributeType.INTS,
    ints: [...values],
  }),
  float: (name: string, value: number): AttributeProto => ({ name, type: AttributeType.FLOAT, f: value }),
  floats: (name: string, values: ArrayLike<number>): AttributeProto => ({
    name,
    type: AttributeType.FLOATS,
    floats: Array.from(values),
  }),
  string: (name: string, value: string): AttributeProto => ({
    name,
    type: AttributeType.STRING,
    s: utf8.encode(value),
  }),
  strings: (name: string, values: readonly string[]): AttributeProto => ({
    name,
    type: AttributeType.STRINGS,
    strings: values.map((v) => utf8.encode(v)),
  }),
};

export function node(
  opType: string,
  inputs: readonly string[],
  outputs: readonly string[],
  attributes: readonly AttributeProto[] = [],
  domain = "",
): NodeProto {
  return {
    opType,
    input: [...inputs],
    output: [...outputs],
    name: `${opType}_${outputs[0] ?? "out"}`,
    attribute: [...attributes],
    domain,
  };
}

export interface GraphSpec {
  name: string;
  doc?: string;
  inputs: ValueInfoProto[];
  outputs: ValueInfoProto[];
  nodes: NodeProto[];
  initializers?: TensorProto[];
  /** Extra opset imports besides ai.onnx 17, e.g. `{ "ai.onnx.ml": 3 }` for the tree operators. */
  opsets?: Record<string, number>;
}

export const IR_VERSION = 8;
export const OPSET = 17;

/** Serialises a model. Nothing time- or host-dependent goes in, so the bytes are reproducible. */
export function encodeModel(spec: GraphSpec): Uint8Array {
  const opsetImport = [{ domain: "", version: OPSET }];
  for (const [domain, version] of Object.entries(spec.opsets ?? {})) opsetImport.push({ domain, version });
  const model: OnnxTypes.IModelProto = {
    irVersion: IR_VERSION,
    producerName: "modelport-examples",
    producerVersion: "1",
    docString: spec.doc ?? "",
    opsetImport,
    graph: {
      name: spec.name,
      node: spec.nodes,
      input: spec.inputs,
      output: spec.outputs,
      initializer: spec.initializers ?? [],
    },
  };
  return onnx.ModelProto.encode(model).finish();
}
