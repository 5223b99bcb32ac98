// Multi-layer perceptrons: dense layers with Relu between them and a softmax on top. Holds the
// reference forward pass used for golden outputs, a small deterministic Adam trainer for
// classification, and the matching ONNX nodes (MatMul, Add, Relu).
import { floatTensor, type NodeProto, node, type TensorProto } from "./onnx-graph.js";
import { Random } from "./random.js";

/** `weights` is [inSize][outSize] row-major, the layout ONNX MatMul expects for its second input. */
export interface Dense {
  inSize: number;
  outSize: number;
  weights: Float32Array;
  bias: Float32Array;
}

/** Relu follows every layer except the last, whose output are the logits. */
export interface Mlp {
  layers: Dense[];
}

/** He-initialised layer (std sqrt(2 / inSize)), which keeps activations at a steady scale through Relu layers. */
export function heDense(rng: Random, inSize: number, outSize: number): Dense {
  const std = Math.sqrt(2 / inSize);
  const weights = new Float32Array(inSize * outSize);
  for (let i = 0; i < weights.length; i++) weights[i] = rng.normal() * std;
  return { inSize, outSize, weights, bias: new Float32Array(outSize) };
}

/**
 * Reference forward pass up to the logits. Sums run in float64 over the float32 parameters and each
 * layer's output is rounded to float32, as onnxruntime stores it; the remaining difference is only
 * the order and precision of onnxruntime's float32 sums.
 */
export function mlpLogits(mlp: Mlp, row: ArrayLike<number>): Float64Array {
  let act = Float64Array.from(row, (v) => Math.fround(v));
  mlp.layers.forEach((layer, l) => {
    const out = new Float64Array(layer.outSize);
    for (let i = 0; i < layer.inSize; i++) {
      const a = act[i]!;
      if (a === 0) continue;
      const w = layer.weights.subarray(i * layer.outSize, (i + 1) * layer.outSize);
      for (let j = 0; j < layer.outSize; j++) out[j] = out[j]! + a * w[j]!;
    }
    const last = l === mlp.layers.length - 1;
    for (let j = 0; j < layer.outSize; j++) {
      const z = Math.fround(Math.fround(out[j]!) + layer.bias[j]!);
      out[j] = last ? z : Math.max(0, z);
    }
    act = out;
  });
  return act;
}

export function softmax(logits: ArrayLike<number>): Float64Array {
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]!);
  const out = Float64Array.from(logits, (z) => Math.exp(z - max));
  let sum = 0;
  for (const e of out) sum += e;
  for (let i = 0; i < out.length; i++) out[i] = out[i]! / sum;
  return out;
}

/** Index of the largest value; the first one wins a tie, as in ONNX ArgMax. */
export function argmax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

export function mlpProbabilities(mlp: Mlp, row: ArrayLike<number>): Float64Array {
  return softmax(mlpLogits(mlp, row));
}

export interface TrainOptions {
  hidden: number[];
  classes: number;
  epochs: number;
  batchSize: number;
  learningRate: number;
  seed: number;
}

interface TrainLayer {
  inSize: number;
  outSize: number;
  w: Float64Array;
  b: Float64Array;
  gw: Float64Array;
  gb: Float64Array;
  mw: Float64Array;
  vw: Float64Array;
  mb: Float64Array;
  vb: Float64Array;
}

/** Mini-batch Adam on softmax cross-entropy. Parameters train in float64 and are rounded to float32 at the end. */
export function trainMlpClassifier(
  rows: readonly number[][],
  labels: readonly number[],
  options: TrainOptions,
): Mlp {
  const rng = new Random(options.seed);
  const sizes = [rows[0]!.length, ...options.hidden, options.classes];
  const layers: TrainLayer[] = [];
  for (let l = 0; l < sizes.length - 1; l++) {
    const init = heDense(rng, sizes[l]!, sizes[l + 1]!);
    const nw = init.weights.length;
    const nb = init.bias.length;
    layers.push({
      inSize: init.inSize,
      outSize: init.outSize,
      w: Float64Array.from(init.weights),
      b: new Float64Array(nb),
      gw: new Float64Array(nw),
      gb: new Float64Array(nb),
      mw: new Float64Array(nw),
      vw: new Float64Array(nw),
      mb: new Float64Array(nb),
      vb: new Float64Array(nb),
    });
  }
  const beta1 = 0.9;
  const beta2 = 0.999;
  const eps = 1e-8;
  let step = 0;
  const order = rows.map((_, i) => i);
  // acts[l] is the input of layer l; acts[layers.length] the logits.
  const acts = sizes.map((s) => new Float64Array(s));
  const deltas = sizes.map((s) => new Float64Array(s));

  for (let epoch = 0; epoch < options.epochs; epoch++) {
    rng.shuffle(order);
    for (let start = 0; start < order.length; start += options.batchSize) {
      const batch = order.slice(start, start + options.batchSize);
      for (const layer of layers) {
        layer.gw.fill(0);
        layer.gb.fill(0);
      }
      for (const r of batch) {
        acts[0]!.set(rows[r]!);
        layers.forEach((layer, l) => {
          const input = acts[l]!;
          const out = acts[l + 1]!;
          out.set(layer.b);
          for (let i = 0; i < layer.inSize; i++) {
            const a = input[i]!;
            for (let j = 0; j < layer.outSize; j++) out[j] = out[j]! + a * layer.w[i * layer.outSize + j]!;
          }
          if (l < layers.length - 1) for (let j = 0; j < layer.outSize; j++) out[j] = Math.max(0, out[j]!);
        });
        // d(cross-entropy)/d(logits) = softmax - one-hot, averaged over the batch.
        const top = layers.length;
        const probs = softmax(acts[top]!);
        for (let j = 0; j < options.classes; j++)
          deltas[top]![j] = (probs[j]! - (labels[r] === j ? 1 : 0)) / batch.length;
        for (let l = top - 1; l >= 0; l--) {
          const layer = layers[l]!;
          const input = acts[l]!;
          const delta = deltas[l + 1]!;
          const back = deltas[l]!;
          for (let i = 0; i < layer.inSize; i++) {
            let sum = 0;
            for (let j = 0; j < layer.outSize; j++) {
              layer.gw[i * layer.outSize + j] = layer.gw[i * layer.outSize + j]! + input[i]! * delta[j]!;
              sum += layer.w[i * layer.outSize + j]! * delta[j]!;
            }
            // The layer below ends in Relu: no gradient where it was inactive.
            back[i] = input[i]! > 0 ? sum : 0;
          }
          for (let j = 0; j < layer.outSize; j++) layer.gb[j] = layer.gb[j]! + delta[j]!;
        }
      }
      step++;
      const c1 = 1 - beta1 ** step;
      const c2 = 1 - beta2 ** step;
      const adam = (p: Float64Array, g: Float64Array, m: Float64Array, v: Float64Array): void => {
        for (let k = 0; k < p.length; k++) {
          m[k] = beta1 * m[k]! + (1 - beta1) * g[k]!;
          v[k] = beta2 * v[k]! + (1 - beta2) * g[k]! * g[k]!;
          p[k] = p[k]! - (options.learningRate * (m[k]! / c1)) / (Math.sqrt(v[k]! / c2) + eps);
        }
      };
      for (const layer of layers) {
        adam(layer.w, layer.gw, layer.mw, layer.vw);
        adam(layer.b, layer.gb, layer.mb, layer.vb);
      }
    }
  }
  return {
    layers: layers.map((l) => ({
      inSize: l.inSize,
      outSize: l.outSize,
      weights: Float32Array.from(l.w),
      bias: Float32Array.from(l.b),
    })),
  };
}

/** ONNX nodes computing the logits from `input`: MatMul and Add per layer, Relu between layers. */
export function mlpNodes(
  mlp: Mlp,
  input: string,
): { nodes: NodeProto[]; initializers: TensorProto[]; logits: string } {
  const nodes: NodeProto[] = [];
  const initializers: TensorProto[] = [];
  let current = input;
  mlp.layers.forEach((layer, l) => {
    const w = `dense${l}.weight`;
    const b = `dense${l}.bias`;
    initializers.push(
      floatTensor(w, [layer.inSize, layer.outSize], layer.weights),
      floatTensor(b, [layer.outSize], layer.bias),
    );
    nodes.push(node("MatMul", [current, w], [`dense${l}.matmul`]));
    nodes.push(node("Add", [`dense${l}.matmul`, b], [`dense${l}.out`]));
    current = `dense${l}.out`;
    if (l < mlp.layers.length - 1) {
      nodes.push(node("Relu", [current], [`dense${l}.relu`]));
      current = `dense${l}.relu`;
    }
  });
  return { nodes, initializers, logits: current };
}
