// wide-mlp: an inference-bound MLP with seeded random (untrained) weights, for load tests and
// benchmarks. The width is calibrated so that one row costs about 0.5-1 ms: with one intra-op thread
// onnxruntime-node took a median of 0.65 ms per row at batch 1 (2048 wide: 0.97 ms, 1536: 0.37 ms)
// and 4.4 ms at batch 32 on a 2-core AMD EPYC VM with AVX-512; runs on the busy shared VM ranged
// 0.64-1.2 ms. The two 1792 x 1792 layers (12.25 MiB each) are read once per batch, so batch 1 is
// bound by memory bandwidth and larger batches cost much less per row.
import { goldenTensor, type ModelArtifact } from "../artifacts.js";
import { heDense, type Mlp, mlpNodes, mlpProbabilities } from "../mlp.js";
import { attr, BATCH, encodeModel, node, tensorInfo } from "../onnx-graph.js";
import { quantize, Random } from "../random.js";

export const WIDE_SIZES = [32, 1792, 1792, 1792, 2];
const WEIGHT_SEED = 31337;
const INPUT_SEED = 2718;
const GOLDEN_ROWS = 6;

/**
 * onnxruntime sums 1792 float32 products per unit in its own blocked order, which differs between CPU
 * kernels, where the reference sums in float64. Measured: below 3e-7 on the probabilities (x86-64
 * with AVX-512); the worst-case bound for such float32 sums is near 1e-4, so the default 1e-5
 * leaves too little room on other CPUs.
 */
export const WIDE_TOLERANCE = 1e-4;

export function wideMlp(): Mlp {
  const rng = new Random(WEIGHT_SEED);
  const layers = [];
  for (let l = 0; l < WIDE_SIZES.length - 1; l++) {
    const layer = heDense(rng, WIDE_SIZES[l]!, WIDE_SIZES[l + 1]!);
    // Small random biases so that the Add nodes matter too.
    for (let j = 0; j < layer.bias.length; j++) layer.bias[j] = 0.05 * rng.normal();
    layers.push(layer);
  }
  return { layers };
}

export function buildWideMlp(): ModelArtifact {
  const mlp = wideMlp();
  const rng = new Random(INPUT_SEED);
  const width = WIDE_SIZES[0]!;
  const inputs = Array.from({ length: GOLDEN_ROWS * width }, () => quantize(rng.uniform(-2, 2), 1 / 64));
  const probabilities: number[] = [];
  for (let r = 0; r < GOLDEN_ROWS; r++)
    probabilities.push(...mlpProbabilities(mlp, inputs.slice(r * width, (r + 1) * width)));

  const { nodes, initializers, logits } = mlpNodes(mlp, "features");
  nodes.push(node("Softmax", [logits], ["probabilities"], [attr.int("axis", -1)]));

  const description =
    `Inference-bound MLP ${WIDE_SIZES.join(" -> ")} (Relu, softmax) with seeded random He-scaled ` +
    `weights (not trained): for load tests and benchmarks. Input features FP32 [batch, ${width}], ` +
    `output probabilities FP32 [batch, 2].`;

  return {
    name: "wide-mlp",
    description,
    onnx: encodeModel({
      name: "wide_mlp",
      doc: description,
      inputs: [tensorInfo("features", "FP32", [BATCH, width])],
      outputs: [tensorInfo("probabilities", "FP32", [BATCH, 2])],
      nodes,
      initializers,
    }),
    golden: {
      description:
        `${GOLDEN_ROWS} random rows; expected outputs from the TypeScript forward pass (float64 sums). ` +
        `Tolerance ${WIDE_TOLERANCE} because onnxruntime sums ${WIDE_SIZES[1]} float32 products per unit in a ` +
        `CPU-dependent order (measured difference below 3e-7, worst-case bound near 1e-4).`,
      inputs: { features: goldenTensor("FP32", [GOLDEN_ROWS, width], inputs) },
      outputs: { probabilities: goldenTensor("FP32", [GOLDEN_ROWS, 2], probabilities) },
      tolerance: { probabilities: WIDE_TOLERANCE },
    },
  };
}
