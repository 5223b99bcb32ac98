// multi-io: a tiny test model exercising every datatype the server converts (FP32, FP64, INT64,
// BOOL, UINT8), several inputs and outputs, and a scalar input. Expected outputs are computed here.
import { goldenTensor, type ModelArtifact } from "../artifacts.js";
import { attr, BATCH, elemTypeCode, encodeModel, int64Tensor, node, tensorInfo } from "../onnx-graph.js";

export function buildMultiIo(): ModelArtifact {
  const a = [1, 2, 3, -0.5, 0, 0.25, 1000, -1000, 1.5];
  const b = [0.1, 0.2, 0.3, -1e10, 1e-10, 0, Math.PI, -2.5, 7];
  const ids = [0, -5, 123456789012];
  const mask = [true, false, true];
  const pixels = [0, 1, 2, 3, 255, 255, 255, 255, 10, 20, 30, 40];
  const scale = 2.5;

  const description =
    "Test model for datatypes and multiple inputs/outputs: a FP32 [batch, 3], b FP64 [batch, 3], " +
    "ids INT64 [batch], mask BOOL [batch], pixels UINT8 [batch, 4] and the FP32 scalar scale (shape []). " +
    "Outputs scaled = a * scale, b_doubled = b + b, ids_next = ids + 1, mask_inverted = not mask, " +
    "pixel_total = sum of pixels per row as FP32.";

  const onnx = encodeModel({
    name: "multi_io",
    doc: description,
    inputs: [
      tensorInfo("a", "FP32", [BATCH, 3]),
      tensorInfo("b", "FP64", [BATCH, 3]),
      tensorInfo("ids", "INT64", [BATCH]),
      tensorInfo("mask", "BOOL", [BATCH]),
      tensorInfo("pixels", "UINT8", [BATCH, 4]),
      tensorInfo("scale", "FP32", []),
    ],
    outputs: [
      tensorInfo("scaled", "FP32", [BATCH, 3]),
      tensorInfo("b_doubled", "FP64", [BATCH, 3]),
      tensorInfo("ids_next", "INT64", [BATCH]),
      tensorInfo("mask_inverted", "BOOL", [BATCH]),
      tensorInfo("pixel_total", "FP32", [BATCH]),
    ],
    initializers: [int64Tensor("one", [], [1]), int64Tensor("pixel_axes", [1], [1])],
    nodes: [
      node("Mul", ["a", "scale"], ["scaled"]),
      node("Add", ["b", "b"], ["b_doubled"]),
      node("Add", ["ids", "one"], ["ids_next"]),
      node("Not", ["mask"], ["mask_inverted"]),
      node("Cast", ["pixels"], ["pixels_float"], [attr.int("to", elemTypeCode("FP32"))]),
      // Since opset 13 ReduceSum takes its axes as an input, not an attribute.
      node("ReduceSum", ["pixels_float", "pixel_axes"], ["pixel_total"], [attr.int("keepdims", 0)]),
    ],
  });

  const rows = ids.length;
  return {
    name: "multi-io",
    description,
    onnx,
    golden: {
      description: `${rows} hand-picked rows (extremes included: 255 pixels, 1e-10 and -1e10 doubles, a 12-digit id).`,
      inputs: {
        a: goldenTensor("FP32", [rows, 3], a),
        b: goldenTensor("FP64", [rows, 3], b),
        ids: goldenTensor("INT64", [rows], ids),
        mask: goldenTensor("BOOL", [rows], mask),
        pixels: goldenTensor("UINT8", [rows, 4], pixels),
        scale: goldenTensor("FP32", [], [scale]),
      },
      outputs: {
        scaled: goldenTensor(
          "FP32",
          [rows, 3],
          a.map((v) => Math.fround(v * scale)),
        ),
        b_doubled: goldenTensor(
          "FP64",
          [rows, 3],
          b.map((v) => v + v),
        ),
        ids_next: goldenTensor(
          "INT64",
          [rows],
          ids.map((v) => v + 1),
        ),
        mask_inverted: goldenTensor(
          "BOOL",
          [rows],
          mask.map((m) => !m),
        ),
        pixel_total: goldenTensor(
          "FP32",
          [rows],
          Array.from({ length: rows }, (_, r) => pixels.slice(r * 4, r * 4 + 4).reduce((s, p) => s + p, 0)),
        ),
      },
    },
  };
}
