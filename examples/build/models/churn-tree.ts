// churn-tree: gradient-boosted trees trained here on synthetic customer-churn data, exported as an
// ai.onnx.ml TreeEnsembleClassifier. Golden outputs come from the trees' own TypeScript prediction.
import { goldenTensor, type ModelArtifact } from "../artifacts.js";
import { accuracy, CHURN_FEATURES, churnData, majorityRate, trainTestSplit } from "../datasets.js";
import { gbdtClassifierNode, gbdtLabel, gbdtProbability, gbdtScore, trainGbdt } from "../gbdt.js";
import { BATCH, encodeModel, tensorInfo } from "../onnx-graph.js";

export const CHURN_DATA_SEED = 20240601;
const SPLIT_SEED = 7;
const ROWS = 2000;

export const CHURN_TREE_OPTIONS = {
  numTrees: 30,
  maxDepth: 3,
  learningRate: 0.2,
  lambda: 1,
  minLeafRows: 10,
};

export function buildChurnTree(): ModelArtifact {
  const { train, test } = trainTestSplit(churnData(ROWS, CHURN_DATA_SEED), 0.25, SPLIT_SEED);
  const model = trainGbdt(train.rows, train.labels, CHURN_TREE_OPTIONS);
  const testAccuracy = accuracy(
    test.rows.map((r) => gbdtLabel(model, r)),
    test.labels,
  );
  const majority = majorityRate(test.labels);

  // Golden rows: three predicted churners and three stayers from the held-out set, none so close to
  // the decision boundary (log-odds 0) that float32 summation order could flip the label.
  const confident = test.rows.filter((r) => Math.abs(gbdtScore(model, r)) > 0.1);
  const rows = [
    ...confident.filter((r) => gbdtLabel(model, r) === 1).slice(0, 3),
    ...confident.filter((r) => gbdtLabel(model, r) === 0).slice(0, 3),
  ];
  const probabilities = rows.flatMap((r) => {
    const p = gbdtProbability(model, r);
    return [1 - p, p];
  });

  const { numTrees, maxDepth, learningRate } = CHURN_TREE_OPTIONS;
  const description =
    `Customer churn classifier: ${numTrees} gradient-boosted trees (depth ${maxDepth}, learning rate ${learningRate}, ` +
    `logistic loss) trained in TypeScript on ${train.rows.length} synthetic customers. ` +
    `Input features FP32 [batch, 6] = [${CHURN_FEATURES.join(", ")}]. ` +
    `Outputs label INT64 [batch] (1 = churns) and probabilities FP32 [batch, 2] = [stays, churns]. ` +
    `Held-out accuracy ${testAccuracy.toFixed(3)} on ${test.rows.length} customers ` +
    `(always guessing the majority class: ${majority.toFixed(3)}).`;

  const onnx = encodeModel({
    name: "churn_tree",
    doc: description,
    inputs: [tensorInfo("features", "FP32", [BATCH, CHURN_FEATURES.length])],
    outputs: [tensorInfo("label", "INT64", [BATCH]), tensorInfo("probabilities", "FP32", [BATCH, 2])],
    nodes: [gbdtClassifierNode(model, "features", "label", "probabilities")],
    opsets: { "ai.onnx.ml": 3 },
  });

  return {
    name: "churn-tree",
    description,
    onnx,
    golden: {
      description: `${rows.length} held-out customers; expected outputs from the trees' TypeScript prediction.`,
      inputs: { features: goldenTensor("FP32", [rows.length, CHURN_FEATURES.length], rows.flat()) },
      outputs: {
        label: goldenTensor(
          "INT64",
          [rows.length],
          rows.map((r) => gbdtLabel(model, r)),
        ),
        probabilities: goldenTensor("FP32", [rows.length, 2], probabilities),
      },
    },
  };
}
