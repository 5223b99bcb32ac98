// The models of the overhead suite (bench/overhead.ts), built on demand into the bench's model
// folder with seeded random weights (never trained, never fetched): each has the input and output
// shapes of a model family users serve, so that what the server adds to inference (parsing,
// copying, encoding) is measured against a realistic amount of arithmetic.
//   overhead-mlp    MLP 30 -> 64 -> 64 -> 2, softmax: a small tabular model, one FP32 input [batch, 30]
//   overhead-image  [batch, 3, 48, 320] FP32 in, [batch, 40, 6625] out: the shapes and about the
//                   arithmetic of a text recogniser (four convolutions, a 256 -> 6625 dense layer
//                   and softmax; ~250 M multiply-adds)
//   overhead-detect [batch, 3, 640, 640] FP32 in, [batch, 84, 6400] out: the shapes of a one-stage
//                   object detector (three strided convolutions, a 1x1 head, sigmoid; ~310 M)
//   overhead-image-full, overhead-detect-full: the same shapes with the arithmetic of the real
//                   families (a text recogniser: ~1.9 G multiply-adds; a YOLOv8n-sized detector: ~3.9 G),
//                   so that inference takes about as long as the measured models (tens of ms)
//   overhead-vad    a stateful audio model with fixed shapes: x [1, 512], h and c [2, 1, 64] (the
//                   state carried between calls) and sr, an INT64 scalar; prob [1, 1], hn, cn out
import { writeFileSync } from "node:fs";
import path from "node:path";
import { heDense, mlpNodes } from "../examples/build/mlp.js";
import {
  attr,
  BATCH,
  encodeModel,
  floatTensor,
  int64Tensor,
  type NodeProto,
  node,
  type TensorProto,
  tensorInfo,
} from "../examples/build/onnx-graph.js";
import { Random } from "../examples/build/random.js";

export type OverheadModel =
  | "overhead-mlp"
  | "overhead-image"
  | "overhead-image-full"
  | "overhead-detect"
  | "overhead-detect-full"
  | "overhead-vad";

function normals(rng: Random, n: number, std: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = rng.normal() * std;
  return out;
}

function mlp(): Uint8Array {
  const rng = new Random(3001);
  const layers = [heDense(rng, 30, 64), heDense(rng, 64, 64), heDense(rng, 64, 2)];
  const { nodes, initializers, logits } = mlpNodes({ layers }, "features");
  nodes.push(node("Softmax", [logits], ["probabilities"], [attr.int("axis", -1)]));
  return encodeModel({
    name: "overhead_mlp",
    inputs: [tensorInfo("features", "FP32", [BATCH, 30])],
    outputs: [tensorInfo("probabilities", "FP32", [BATCH, 2])],
    nodes,
    initializers,
  });
}

/** A 2-D convolution with He-scaled weights and small biases, its kernel, stride and padding. */
function conv(
  rng: Random,
  name: string,
  input: string,
  inC: number,
  outC: number,
  kernel: [number, number],
  stride: [number, number],
  pad = 0,
): { nodes: NodeProto[]; initializers: TensorProto[]; output: string } {
  const fanIn = inC * kernel[0] * kernel[1];
  return {
    nodes: [
      node(
        "Conv",
        [input, `${name}.w`, `${name}.b`],
        [name],
        [attr.ints("strides", stride), attr.ints("pads", [pad, pad, pad, pad])],
      ),
      node("Relu", [name], [`${name}.relu`]),
    ],
    initializers: [
      floatTensor(`${name}.w`, [outC, inC, ...kernel], normals(rng, outC * fanIn, Math.sqrt(2 / fanIn))),
      floatTensor(`${name}.b`, [outC], normals(rng, outC, 0.05)),
    ],
    output: `${name}.relu`,
  };
}

/** Layers applied in order, each to the previous one's output. */
function chain(
  input: string,
  layers: ((input: string) => { nodes: NodeProto[]; initializers: TensorProto[]; output: string })[],
) {
  const nodes: NodeProto[] = [];
  const initializers: TensorProto[] = [];
  let output = input;
  for (const layer of layers) {
    const l = layer(output);
    nodes.push(...l.nodes);
    initializers.push(...l.initializers);
    output = l.output;
  }
  return { nodes, initializers, output };
}

/**
 * A CRNN-like recogniser without the recurrence: ~250 M multiply-adds per image, or with `full`
 * (wider, with a stride-1 convolution after each downsampling) ~1.9 G.
 */
function image(full = false): Uint8Array {
  const rng = new Random(full ? 3012 : 3002);
  // [b, 3, 48, 320] -> [b, 32, 48, 320] -> [b, 64, 24, 160] -> [b, 128, 12, 80] -> [b, 256, 1, 40]
  // full: [b, 64, 48, 320] -> [b, 128, 24, 160] x2 -> [b, 256, 12, 80] x2 -> [b, 256, 1, 40]
  const body = chain(
    "x",
    full
      ? [
          (i) => conv(rng, "c1", i, 3, 64, [3, 3], [1, 1], 1),
          (i) => conv(rng, "c2", i, 64, 128, [3, 3], [2, 2], 1),
          (i) => conv(rng, "c2b", i, 128, 128, [3, 3], [1, 1], 1),
          (i) => conv(rng, "c3", i, 128, 256, [3, 3], [2, 2], 1),
          (i) => conv(rng, "c3b", i, 256, 256, [3, 3], [1, 1], 1),
          (i) => conv(rng, "c4", i, 256, 256, [12, 2], [12, 2]),
        ]
      : [
          (i) => conv(rng, "c1", i, 3, 32, [3, 3], [1, 1], 1),
          (i) => conv(rng, "c2", i, 32, 64, [3, 3], [2, 2], 1),
          (i) => conv(rng, "c3", i, 64, 128, [3, 3], [2, 2], 1),
          (i) => conv(rng, "c4", i, 128, 256, [12, 2], [12, 2]),
        ],
  );
  return encodeModel({
    name: full ? "overhead_image_full" : "overhead_image",
    inputs: [tensorInfo("x", "FP32", [BATCH, 3, 48, 320])],
    outputs: [tensorInfo("probs", "FP32", [BATCH, 40, 6625])],
    nodes: [
      ...body.nodes,
      node("Reshape", [body.output, "shape.seq"], ["seq"]),
      node("Transpose", ["seq"], ["cols"], [attr.ints("perm", [0, 2, 1])]),
      node("MatMul", ["cols", "dense.w"], ["logits.raw"]),
      node("Add", ["logits.raw", "dense.b"], ["logits"]),
      node("Softmax", ["logits"], ["probs"], [attr.int("axis", -1)]),
    ],
    initializers: [
      ...body.initializers,
      int64Tensor("shape.seq", [3], [0, 256, 40]),
      floatTensor("dense.w", [256, 6625], normals(rng, 256 * 6625, Math.sqrt(1 / 256))),
      floatTensor("dense.b", [6625], normals(rng, 6625, 0.05)),
    ],
  });
}

/**
 * A one-stage detector's shapes: three strided convolutions and a 1x1 head, ~310 M multiply-adds;
 * with `full` (wider, with stride-1 convolutions as a YOLOv8n backbone has) ~3.9 G.
 */
function detect(full = false): Uint8Array {
  const rng = new Random(full ? 3013 : 3003);
  // [b, 3, 640, 640] -> [b, 16, 320, 320] -> [b, 32, 160, 160] -> [b, 64, 80, 80] -> [b, 84, 6400]
  // full: [b, 32, 320, 320] -> [b, 64, 160, 160] x2 -> [b, 128, 80, 80] x3 -> [b, 84, 6400]
  const body = chain(
    "images",
    full
      ? [
          (i) => conv(rng, "c1", i, 3, 32, [3, 3], [2, 2], 1),
          (i) => conv(rng, "c2", i, 32, 64, [3, 3], [2, 2], 1),
          (i) => conv(rng, "c2b", i, 64, 64, [3, 3], [1, 1], 1),
          (i) => conv(rng, "c3", i, 64, 128, [3, 3], [2, 2], 1),
          (i) => conv(rng, "c3b", i, 128, 128, [3, 3], [1, 1], 1),
          (i) => conv(rng, "c3c", i, 128, 128, [3, 3], [1, 1], 1),
        ]
      : [
          (i) => conv(rng, "c1", i, 3, 16, [3, 3], [2, 2], 1),
          (i) => conv(rng, "c2", i, 16, 32, [3, 3], [2, 2], 1),
          (i) => conv(rng, "c3", i, 32, 64, [3, 3], [2, 2], 1),
        ],
  );
  const width = full ? 128 : 64;
  return encodeModel({
    name: full ? "overhead_detect_full" : "overhead_detect",
    inputs: [tensorInfo("images", "FP32", [BATCH, 3, 640, 640])],
    outputs: [tensorInfo("output0", "FP32", [BATCH, 84, 6400])],
    nodes: [
      ...body.nodes,
      node("Conv", [body.output, "head.w", "head.b"], ["head"]),
      node("Reshape", ["head", "shape.flat"], ["flat"]),
      node("Sigmoid", ["flat"], ["output0"]),
    ],
    initializers: [
      ...body.initializers,
      floatTensor("head.w", [84, width, 1, 1], normals(rng, 84 * width, Math.sqrt(1 / width))),
      floatTensor("head.b", [84], normals(rng, 84, 0.05)),
      int64Tensor("shape.flat", [3], [0, 84, 6400]),
    ],
  });
}

function vad(): Uint8Array {
  const rng = new Random(3004);
  return encodeModel({
    name: "overhead_vad",
    inputs: [
      tensorInfo("x", "FP32", [1, 512]),
      tensorInfo("h", "FP32", [2, 1, 64]),
      tensorInfo("c", "FP32", [2, 1, 64]),
      tensorInfo("sr", "INT64", []),
    ],
    outputs: [
      tensorInfo("prob", "FP32", [1, 1]),
      tensorInfo("hn", "FP32", [2, 1, 64]),
      tensorInfo("cn", "FP32", [2, 1, 64]),
    ],
    nodes: [
      node("MatMul", ["x", "in.w"], ["xf"]),
      node("Reshape", ["h", "shape.state2"], ["h2"]),
      node("Add", ["h2", "xf"], ["pre"]),
      node("Tanh", ["pre"], ["hn2"]),
      node("Reshape", ["c", "shape.state2"], ["c2"]),
      node("Add", ["c2", "hn2"], ["cn2"]),
      node("Cast", ["sr"], ["srf"], [attr.int("to", 1)]),
      node("Mul", ["srf", "sr.scale"], ["k"]),
      node("MatMul", ["hn2", "out.w"], ["p2"]),
      node("Mul", ["p2", "k"], ["pk"]),
      node("ReduceMean", ["pk"], ["pm"], [attr.ints("axes", [0]), attr.int("keepdims", 1)]),
      node("Sigmoid", ["pm"], ["prob"]),
      node("Reshape", ["hn2", "shape.state3"], ["hn"]),
      node("Reshape", ["cn2", "shape.state3"], ["cn"]),
    ],
    initializers: [
      floatTensor("in.w", [512, 64], normals(rng, 512 * 64, Math.sqrt(1 / 512))),
      floatTensor("out.w", [64, 1], normals(rng, 64, Math.sqrt(1 / 64))),
      floatTensor("sr.scale", [], [1 / 16000]),
      int64Tensor("shape.state2", [2], [2, 64]),
      int64Tensor("shape.state3", [3], [2, 1, 64]),
    ],
  });
}

const BUILDERS: Record<OverheadModel, () => Uint8Array> = {
  "overhead-mlp": mlp,
  "overhead-image": () => image(),
  "overhead-image-full": () => image(true),
  "overhead-detect": () => detect(),
  "overhead-detect-full": () => detect(true),
  "overhead-vad": vad,
};

/** Writes `<name>.onnx` into `dir` and returns its path. */
export function writeOverheadModel(dir: string, name: OverheadModel): string {
  const file = path.join(dir, `${name}.onnx`);
  writeFileSync(file, BUILDERS[name]());
  return file;
}
