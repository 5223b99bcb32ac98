// Micro-benchmark of JSON tensor decoding (`npm run bench:decode`): decodeTensor on parsed JSON of
// the shapes the overhead suite sends (rows of a small MLP, 1,000 rows of 32, an image nested
// [1][3][48][320], the same image flat with a shape), in this process, no HTTP. Prints µs per
// decode, the median of 5 timed runs after a warm-up.
import { decodeTensor } from "../src/protocol/decode-tensor.js";
import type { TensorSpec } from "../src/tensor.js";

function nested(shape: readonly number[], offset = 0): unknown {
  if (shape.length === 1) return Array.from({ length: shape[0]! }, (_, i) => (offset + i) / 7);
  const inner = shape.slice(1).reduce((a, b) => a * b, 1);
  return Array.from({ length: shape[0]! }, (_, i) => nested(shape.slice(1), offset + i * inner));
}

const cases: { name: string; spec: TensorSpec; value: unknown; shape?: number[] }[] = [
  { name: "rows 1 x 30", spec: { name: "f", datatype: "FP32", shape: [-1, 30] }, value: nested([1, 30]) },
  { name: "rows 32 x 30", spec: { name: "f", datatype: "FP32", shape: [-1, 30] }, value: nested([32, 30]) },
  {
    name: "rows 1000 x 32",
    spec: { name: "f", datatype: "FP32", shape: [-1, 32] },
    value: nested([1000, 32]),
  },
  {
    name: "image nested 1x3x48x320",
    spec: { name: "x", datatype: "FP32", shape: [-1, 3, 48, 320] },
    value: nested([1, 3, 48, 320]),
  },
  {
    name: "image flat + shape",
    spec: { name: "x", datatype: "FP32", shape: [-1, 3, 48, 320] },
    value: (nested([1, 3, 48, 320]) as unknown[]).flat(3),
    shape: [1, 3, 48, 320],
  },
];

for (const c of cases) {
  const value = JSON.parse(JSON.stringify(c.value)) as unknown;
  const per: number[] = [];
  for (let run = -1; run < 5; run++) {
    const start = performance.now();
    let n = 0;
    while (performance.now() - start < 200) {
      decodeTensor(c.spec, value, c.shape);
      n++;
    }
    if (run >= 0) per.push(((performance.now() - start) / n) * 1000);
  }
  per.sort((a, b) => a - b);
  process.stdout.write(`${c.name.padEnd(26)} ${per[2]!.toFixed(2)} µs per decode\n`);
}
