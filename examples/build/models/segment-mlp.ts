// segment-mlp: a 4 -> 16 -> 3 MLP classifier trained here on synthetic customer segments. Golden
// outputs come from the TypeScript forward pass of the trained weights.
import { goldenTensor, type ModelArtifact } from "../artifacts.js";
import {
  accuracy,
  majorityRate,
  SEGMENT_FEATURES,
  SEGMENT_NAMES,
  segmentData,
  trainTestSplit,
} from "../datasets.js";
import { argmax, mlpNodes, mlpProbabilities, trainMlpClassifier } from "../mlp.js";
import { attr, BATCH, encodeModel, node, tensorInfo } from "../onnx-graph.js";

export const SEGMENT_DATA_SEED = 424242;
const SPLIT_SEED = 11;
const ROWS = 1200;

export const SEGMENT_TRAIN_OPTIONS = {
  hidden: [16],
  classes: SEGMENT_NAMES.length,
  epochs: 60,
  batchSize: 32,
  learningRate: 0.01,
  seed: 99,
};

export function buildSegmentMlp(): ModelArtifact {
  const { train, test } = trainTestSplit(segmentData(ROWS, SEGMENT_DATA_SEED), 0.25, SPLIT_SEED);
  const mlp = trainMlpClassifier(train.rows, train.labels, SEGMENT_TRAIN_OPTIONS);
  const predict = (r: number[]): number => argmax(mlpProbabilities(mlp, r));
  const testAccuracy = accuracy(test.rows.map(predict), test.labels);
  const majority = majorityRate(test.labels);

  // Golden rows: two held-out customers per segment whose top two probabilities are well apart, so
  // float32 rounding cannot change the argmax.
  const clear = (r: number[]): boolean => {
    const p = [...mlpProbabilities(mlp, r)].sort((a, b) => b - a);
    return p[0]! - p[1]! > 0.05;
  };
  const rows = SEGMENT_NAMES.flatMap((_, k) =>
    test.rows.filter((r) => clear(r) && predict(r) === k).slice(0, 2),
  );

  const { nodes, initializers, logits } = mlpNodes(mlp, "features");
  nodes.push(node("Softmax", [logits], ["probabilities"], [attr.int("axis", -1)]));
  nodes.push(node("ArgMax", [logits], ["label"], [attr.int("axis", 1), attr.int("keepdims", 0)]));

  const description =
    `Customer segment classifier: MLP 4 -> 16 (Relu) -> 3 (softmax) trained in TypeScript with Adam ` +
    `(${SEGMENT_TRAIN_OPTIONS.epochs} epochs, mini-batches of ${SEGMENT_TRAIN_OPTIONS.batchSize}) on ` +
    `${train.rows.length} synthetic customers. Input features FP32 [batch, 4] = standardised ` +
    `[${SEGMENT_FEATURES.join(", ")}]. Outputs probabilities FP32 [batch, 3] over ` +
    `[${SEGMENT_NAMES.join(", ")}] and label INT64 [batch] (argmax). ` +
    `Held-out accuracy ${testAccuracy.toFixed(3)} on ${test.rows.length} customers ` +
    `(majority class: ${majority.toFixed(3)}).`;

  const onnx = encodeModel({
    name: "segment_mlp",
    doc: description,
    inputs: [tensorInfo("features", "FP32", [BATCH, SEGMENT_FEATURES.length])],
    outputs: [
      tensorInfo("probabilities", "FP32", [BATCH, SEGMENT_NAMES.length]),
      tensorInfo("label", "INT64", [BATCH]),
    ],
    nodes,
    initializers,
  });

  return {
    name: "segment-mlp",
    description,
    onnx,
    golden: {
      description: `${rows.length} held-out customers, two per segment; expected outputs from the TypeScript forward pass.`,
      inputs: { features: goldenTensor("FP32", [rows.length, SEGMENT_FEATURES.length], rows.flat()) },
      outputs: {
        probabilities: goldenTensor(
          "FP32",
          [rows.length, SEGMENT_NAMES.length],
          rows.flatMap((r) => [...mlpProbabilities(mlp, r)]),
        ),
        label: goldenTensor("INT64", [rows.length], rows.map(predict)),
      },
    },
  };
}
