// slow: a model with a tiny input whose single-row inference takes about 50 ms, for testing
// timeouts, queueing and concurrency limits. The 8 inputs are expanded into a 512 x 512 matrix
// (outer product of two projections, then Tanh) that goes through a chain of
// X <- Tanh(X . M + X0), each step a dense 512 x 512 x 512 MatMul, and is reduced back to 8 values.
//
// Calibration: with one intra-op thread onnxruntime-node took 2.5 ms per step on a 2-core AMD EPYC
// VM with AVX-512, so 20 steps give a median of about 50 ms per row (measured 49.7-51 ms with
// `node dist/examples/time-models.js`). Batch N takes at least N times as long (batch 32: 1.9 s).
//
// M is a sum of two scaled permutation matrices: onnxruntime multiplies it as the dense matrix it
// is (that is the cost we want), while the TypeScript reference below uses its sparsity, which keeps
// golden generation to a fraction of a second. |c1| + |c2| < 1 and |tanh'| <= 1 make each step a
// contraction, so values stay bounded and rounding differences shrink instead of growing.
import { goldenTensor, type ModelArtifact } from "../artifacts.js";
import {
  attr,
  BATCH,
  encodeModel,
  floatTensor,
  int64Tensor,
  type NodeProto,
  node,
  tensorInfo,
} from "../onnx-graph.js";
import { quantize, Random } from "../random.js";

export const SLOW_STEPS = 20;
const N = 512;
const IN = 8;
const C1 = 0.5;
const C2 = -0.35;
const SEED = 5150;
const GOLDEN_ROWS = 4;

/**
 * Each of the 20 steps adds a float32 MatMul rounding and onnxruntime's polynomial Tanh approximation
 * on top of the float64 reference. Measured: 7e-7; the contraction keeps it from growing, but the
 * approximation and summation differ between CPU kernels, so the default 1e-5 is too tight a promise.
 */
export const SLOW_TOLERANCE = 1e-4;

interface SlowWeights {
  u: Float32Array; // [IN, N]
  v: Float32Array; // [IN, N]
  m: Float32Array; // [N, N], dense
  /** Nonzeros of column j of M: rows and values. */
  columns: { rows: number[]; values: number[] }[];
  p: Float32Array; // [N, IN]
}

function slowWeights(): SlowWeights {
  const rng = new Random(SEED);
  const gaussian = (length: number, std: number): Float32Array =>
    Float32Array.from({ length }, () => rng.normal() * std);
  // x in [-1, 1]^8: projections of std about 1, so the outer product spans Tanh's useful range.
  const u = gaussian(IN * N, 0.6);
  const v = gaussian(IN * N, 0.6);
  const perm1 = rng.shuffle(Array.from({ length: N }, (_, i) => i));
  const perm2 = rng.shuffle(Array.from({ length: N }, (_, i) => i));
  const m = new Float32Array(N * N);
  for (let j = 0; j < N; j++) {
    m[perm1[j]! * N + j] = m[perm1[j]! * N + j]! + C1;
    m[perm2[j]! * N + j] = m[perm2[j]! * N + j]! + C2;
  }
  const columns = Array.from({ length: N }, (_, j) => {
    const rows: number[] = [];
    const values: number[] = [];
    for (let k = 0; k < N; k++) {
      if (m[k * N + j] !== 0) {
        rows.push(k);
        values.push(m[k * N + j]!);
      }
    }
    return { rows, values };
  });
  // The mean over 512 columns is small; scale the read-out so outputs land around 0.1 to 1.
  const p = gaussian(N * IN, 2);
  return { u, v, m, columns, p };
}

/** Reference forward pass for one row, rounding to float32 wherever onnxruntime stores a tensor. */
function slowForward(w: SlowWeights, x: readonly number[]): number[] {
  const project = (mat: Float32Array): Float64Array => {
    const out = new Float64Array(N);
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let k = 0; k < IN; k++) s += x[k]! * mat[k * N + j]!;
      out[j] = Math.fround(s);
    }
    return out;
  };
  const u = project(w.u);
  const v = project(w.v);
  const x0 = new Float64Array(N * N);
  for (let i = 0; i < N; i++)
    for (let j = 0; j < N; j++) x0[i * N + j] = Math.fround(Math.tanh(Math.fround(u[i]! * v[j]!)));
  // Two scratch buffers besides x0, which every step adds back in and so must stay untouched.
  let cur = Float64Array.from(x0);
  let next = new Float64Array(N * N);
  for (let step = 0; step < SLOW_STEPS; step++) {
    for (let i = 0; i < N; i++) {
      const base = i * N;
      for (let j = 0; j < N; j++) {
        const col = w.columns[j]!;
        let s = 0;
        for (let t = 0; t < col.rows.length; t++) s += cur[base + col.rows[t]!]! * col.values[t]!;
        next[base + j] = Math.fround(Math.tanh(Math.fround(Math.fround(s) + x0[base + j]!)));
      }
    }
    [cur, next] = [next, cur];
  }
  const mean = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    let s = 0;
    for (let j = 0; j < N; j++) s += cur[i * N + j]!;
    mean[i] = Math.fround(s / N);
  }
  const y: number[] = [];
  for (let o = 0; o < IN; o++) {
    let s = 0;
    for (let i = 0; i < N; i++) s += mean[i]! * w.p[i * IN + o]!;
    y.push(Math.fround(s));
  }
  return y;
}

export function buildSlow(): ModelArtifact {
  const w = slowWeights();
  const nodes: NodeProto[] = [
    node("MatMul", ["x", "proj_u"], ["u"]),
    node("MatMul", ["x", "proj_v"], ["v"]),
    node("Unsqueeze", ["u", "axis2"], ["u_col"]), // [batch, N, 1]
    node("Unsqueeze", ["v", "axis1"], ["v_row"]), // [batch, 1, N]
    node("Mul", ["u_col", "v_row"], ["outer"]),
    node("Tanh", ["outer"], ["x0"]),
  ];
  let cur = "x0";
  for (let s = 0; s < SLOW_STEPS; s++) {
    nodes.push(node("MatMul", [cur, "mix"], [`step${s}.matmul`]));
    nodes.push(node("Add", [`step${s}.matmul`, "x0"], [`step${s}.add`]));
    nodes.push(node("Tanh", [`step${s}.add`], [`step${s}.out`]));
    cur = `step${s}.out`;
  }
  nodes.push(node("ReduceMean", [cur], ["row_mean"], [attr.ints("axes", [2]), attr.int("keepdims", 0)]));
  nodes.push(node("MatMul", ["row_mean", "readout"], ["y"]));

  const description =
    `Deliberately slow model for timeout and queueing tests: about 50 ms per row with one ` +
    `onnxruntime thread (${SLOW_STEPS} dense 512x512x512 MatMul steps per row). ` +
    `Input x FP32 [batch, ${IN}], output y FP32 [batch, ${IN}].`;

  const rng = new Random(SEED + 1);
  const inputs = Array.from({ length: GOLDEN_ROWS * IN }, () => quantize(rng.uniform(-1, 1), 1 / 64));
  const outputs: number[] = [];
  for (let r = 0; r < GOLDEN_ROWS; r++) outputs.push(...slowForward(w, inputs.slice(r * IN, (r + 1) * IN)));

  return {
    name: "slow",
    description,
    onnx: encodeModel({
      name: "slow",
      doc: description,
      inputs: [tensorInfo("x", "FP32", [BATCH, IN])],
      outputs: [tensorInfo("y", "FP32", [BATCH, IN])],
      nodes,
      initializers: [
        floatTensor("proj_u", [IN, N], w.u),
        floatTensor("proj_v", [IN, N], w.v),
        int64Tensor("axis1", [1], [1]),
        int64Tensor("axis2", [1], [2]),
        floatTensor("mix", [N, N], w.m),
        floatTensor("readout", [N, IN], w.p),
      ],
    }),
    golden: {
      description:
        `${GOLDEN_ROWS} random rows; expected outputs from the TypeScript reference. Tolerance ` +
        `${SLOW_TOLERANCE} because ${SLOW_STEPS} steps of float32 MatMul and onnxruntime's approximate ` +
        `Tanh each differ slightly from the float64 reference (measured about 7e-7).`,
      inputs: { x: goldenTensor("FP32", [GOLDEN_ROWS, IN], inputs) },
      outputs: { y: goldenTensor("FP32", [GOLDEN_ROWS, IN], outputs) },
      tolerance: { y: SLOW_TOLERANCE },
    },
  };
}
