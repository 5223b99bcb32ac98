// A test model whose input is [batch, seq] with both dims dynamic: y = x + x. Requests of
// different widths must never be joined into one batch; each answer is checkable exactly.
import { writeFileSync } from "node:fs";
import { BATCH, encodeModel, node, tensorInfo } from "../../examples/build/onnx-graph.js";

/** Writes ragged.onnx into `dir` and returns its path. */
export function writeRaggedModel(path: string): string {
  const onnx = encodeModel({
    name: "ragged",
    doc: "y = x + x over a [batch, seq] input whose dims are both dynamic",
    inputs: [tensorInfo("x", "FP32", [BATCH, "seq"])],
    outputs: [tensorInfo("y", "FP32", [BATCH, "seq"])],
    nodes: [node("Add", ["x", "x"], ["y"])],
  });
  writeFileSync(path, onnx);
  return path;
}
