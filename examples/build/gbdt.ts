// Gradient-boosted decision trees for binary classification (logistic loss, Newton leaf values) in
// plain TypeScript, their reference prediction, and their export as an ai.onnx.ml
// TreeEnsembleClassifier node. Thresholds are data values and the test is `x <= threshold`, so
// with float32-exact features onnxruntime's float32 comparisons route every row exactly as here.
import { attr, type NodeProto, node } from "./onnx-graph.js";

export type TreeNode =
  | { kind: "split"; feature: number; threshold: number; left: number; right: number }
  | { kind: "leaf"; value: number };

/** Node 0 is the root. */
export interface Tree {
  nodes: TreeNode[];
}

export interface GbdtModel {
  numFeatures: number;
  /** Initial log-odds (the training churn rate), float32-exact. */
  baseScore: number;
  trees: Tree[];
}

export interface GbdtOptions {
  numTrees: number;
  maxDepth: number;
  learningRate: number;
  /** L2 penalty on leaf values; keeps tiny leaves from taking extreme values. */
  lambda: number;
  minLeafRows: number;
}

const sigmoid = (z: number): number => 1 / (1 + Math.exp(-z));

interface Split {
  feature: number;
  threshold: number;
  gain: number;
}

export function trainGbdt(
  rows: readonly number[][],
  labels: readonly number[],
  options: GbdtOptions,
): GbdtModel {
  const n = rows.length;
  const numFeatures = rows[0]!.length;
  const positives = labels.reduce((a, b) => a + b, 0);
  // Leaf values and the base score are rounded to float32 as they are made, because that is what
  // the ONNX attributes store; training then continues from exactly the model that gets exported.
  const baseScore = Math.fround(Math.log(positives / (n - positives)));
  const score = new Float64Array(n).fill(baseScore);
  const grad = new Float64Array(n);
  const hess = new Float64Array(n);
  const trees: Tree[] = [];

  const bestSplit = (idx: number[], gSum: number, hSum: number): Split | undefined => {
    const parentScore = (gSum * gSum) / (hSum + options.lambda);
    let best: Split | undefined;
    for (let f = 0; f < numFeatures; f++) {
      // Array.prototype.sort is stable, so ties keep index order and the result is deterministic.
      const sorted = idx.slice().sort((a, b) => rows[a]![f]! - rows[b]![f]!);
      let gLeft = 0;
      let hLeft = 0;
      for (let k = 0; k < sorted.length - 1; k++) {
        const i = sorted[k]!;
        gLeft += grad[i]!;
        hLeft += hess[i]!;
        const value = rows[i]![f]!;
        if (value === rows[sorted[k + 1]!]![f]) continue; // only split between distinct values
        if (k + 1 < options.minLeafRows || sorted.length - k - 1 < options.minLeafRows) continue;
        const gRight = gSum - gLeft;
        const hRight = hSum - hLeft;
        const gain =
          (gLeft * gLeft) / (hLeft + options.lambda) +
          (gRight * gRight) / (hRight + options.lambda) -
          parentScore;
        if (gain > 1e-9 && (best === undefined || gain > best.gain))
          best = { feature: f, threshold: value, gain };
      }
    }
    return best;
  };

  for (let t = 0; t < options.numTrees; t++) {
    for (let i = 0; i < n; i++) {
      const p = sigmoid(score[i]!);
      grad[i] = p - labels[i]!;
      hess[i] = Math.max(p * (1 - p), 1e-12);
    }
    const nodes: TreeNode[] = [];
    const grow = (idx: number[], depth: number): number => {
      const id = nodes.length;
      nodes.push({ kind: "leaf", value: 0 }); // placeholder, keeps pre-order node ids
      let gSum = 0;
      let hSum = 0;
      for (const i of idx) {
        gSum += grad[i]!;
        hSum += hess[i]!;
      }
      const split = depth < options.maxDepth ? bestSplit(idx, gSum, hSum) : undefined;
      if (split === undefined) {
        nodes[id] = {
          kind: "leaf",
          value: Math.fround((-options.learningRate * gSum) / (hSum + options.lambda)),
        };
        return id;
      }
      const left = grow(
        idx.filter((i) => rows[i]![split.feature]! <= split.threshold),
        depth + 1,
      );
      const right = grow(
        idx.filter((i) => rows[i]![split.feature]! > split.threshold),
        depth + 1,
      );
      nodes[id] = { kind: "split", feature: split.feature, threshold: split.threshold, left, right };
      return id;
    };
    grow(
      rows.map((_, i) => i),
      0,
    );
    const tree = { nodes };
    trees.push(tree);
    for (let i = 0; i < n; i++) score[i] = score[i]! + treeValue(tree, rows[i]!);
  }
  return { numFeatures, baseScore, trees };
}

function treeValue(tree: Tree, row: readonly number[]): number {
  let node = tree.nodes[0]!;
  while (node.kind === "split")
    node = tree.nodes[row[node.feature]! <= node.threshold ? node.left : node.right]!;
  return node.value;
}

/** Raw log-odds: base score plus every tree's leaf value. */
export function gbdtScore(model: GbdtModel, row: readonly number[]): number {
  let score = model.baseScore;
  for (const tree of model.trees) score += treeValue(tree, row);
  return score;
}

/** Probability of class 1. */
export function gbdtProbability(model: GbdtModel, row: readonly number[]): number {
  return sigmoid(gbdtScore(model, row));
}

/** Predicted class, as onnxruntime decides it: 1 when the log-odds are above 0. */
export function gbdtLabel(model: GbdtModel, row: readonly number[]): number {
  return gbdtScore(model, row) > 0 ? 1 : 0;
}

/**
 * The model as one TreeEnsembleClassifier node (ai.onnx.ml opset 3) with outputs `label` INT64 [N]
 * and `probabilities` FP32 [N, 2] = [1 - p, p]. onnxruntime's binary case wants one weight per leaf,
 * all under class id 0, with a LOGISTIC post-transform; weights for both classes would make every
 * label 1. The single base value carries the initial log-odds.
 */
export function gbdtClassifierNode(
  model: GbdtModel,
  input: string,
  label: string,
  probabilities: string,
): NodeProto {
  const treeIds: number[] = [];
  const nodeIds: number[] = [];
  const featureIds: number[] = [];
  const values: number[] = [];
  const modes: string[] = [];
  const trueIds: number[] = [];
  const falseIds: number[] = [];
  const leafTrees: number[] = [];
  const leafNodes: number[] = [];
  const leafWeights: number[] = [];
  model.trees.forEach((tree, t) => {
    tree.nodes.forEach((n, id) => {
      treeIds.push(t);
      nodeIds.push(id);
      if (n.kind === "split") {
        featureIds.push(n.feature);
        values.push(n.threshold);
        modes.push("BRANCH_LEQ");
        trueIds.push(n.left);
        falseIds.push(n.right);
      } else {
        featureIds.push(0);
        values.push(0);
        modes.push("LEAF");
        trueIds.push(0);
        falseIds.push(0);
        leafTrees.push(t);
        leafNodes.push(id);
        leafWeights.push(n.value);
      }
    });
  });
  // With only non-negative weights onnxruntime switches to a different labelling rule (score > 0.5);
  // boosted trees always have negative leaves, but fail loudly rather than export a wrong model.
  if (!leafWeights.some((w) => w < 0)) throw new Error("gbdt export: expected some negative leaf weights");
  return node(
    "TreeEnsembleClassifier",
    [input],
    [label, probabilities],
    [
      attr.ints("classlabels_int64s", [0, 1]),
      attr.string("post_transform", "LOGISTIC"),
      attr.floats("base_values", [model.baseScore]),
      attr.ints("nodes_treeids", treeIds),
      attr.ints("nodes_nodeids", nodeIds),
      attr.ints("nodes_featureids", featureIds),
      attr.floats("nodes_values", values),
      attr.strings("nodes_modes", modes),
      attr.ints("nodes_truenodeids", trueIds),
      attr.ints("nodes_falsenodeids", falseIds),
      attr.ints("class_treeids", leafTrees),
      attr.ints("class_nodeids", leafNodes),
      attr.ints("class_ids", new Array<number>(leafTrees.length).fill(0)),
      attr.floats("class_weights", leafWeights),
    ],
    "ai.onnx.ml",
  );
}
