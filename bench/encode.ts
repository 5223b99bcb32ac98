// Micro-benchmark of writing FP32 outputs as JSON (`npm run bench:encode`), in this process, no
// HTTP: the image model's real output (overhead-image, 1×40×6625 softmax probabilities, built and
// run here), the same count of uniform random values, and a small MLP's 1×2 answer. Each is
// written two ways, alternating: modelport's JsonWriter (the shortest text that reads back as the
// same FP32 value, straight into bytes) and the widened doubles (a packed array, JSON.stringify,
// then the bytes: what modelport did before, and the text Triton writes). Prints the median of 7
// timed runs of each and the bytes written.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { InferenceSession, Tensor as OrtTensor } from "onnxruntime-node";
import { Random } from "../examples/build/random.js";
import { JsonWriter } from "../src/protocol/json-data.js";
import type { Tensor } from "../src/tensor.js";
import { writeOverheadModel } from "./overhead-models.js";

async function imageOutput(): Promise<Float32Array> {
  const dir = mkdtempSync(path.join(tmpdir(), "modelport-encode-"));
  try {
    const session = await InferenceSession.create(writeOverheadModel(dir, "overhead-image"));
    const rng = new Random(4242);
    const x = Float32Array.from({ length: 3 * 48 * 320 }, () => rng.uniform(0, 1));
    const out = await session.run({ [session.inputNames[0]!]: new OrtTensor("float32", x, [1, 3, 48, 320]) });
    const data = out[session.outputNames[0]!]!.data as Float32Array;
    await session.release();
    return data;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function widened(data: Float32Array): Buffer {
  const numbers = new Array<number>(data.length).fill(0);
  for (let i = 0; i < data.length; i++) numbers[i] = data[i]!;
  return Buffer.from(JSON.stringify({ data: numbers }), "latin1");
}

const shortest = (t: Tensor): Buffer => new JsonWriter().text('{"data":').data(t, false).text("}").finish();

/** Median ms of one call of `f`, from runs of at least 100 ms; the bytes of its last answer. */
function time(f: () => Buffer): { ms: number; bytes: number } {
  let bytes = 0;
  const per: number[] = [];
  for (let run = -1; run < 7; run++) {
    const start = performance.now();
    let n = 0;
    while (performance.now() - start < 100) {
      bytes = f().length;
      n++;
    }
    if (run >= 0) per.push((performance.now() - start) / n);
  }
  per.sort((a, b) => a - b);
  return { ms: per[3]!, bytes };
}

const rng = new Random(7);
const image = await imageOutput();
const cases: { name: string; data: Float32Array; shape: number[] }[] = [
  { name: "image output 1x40x6625", data: image, shape: [1, 40, 6625] },
  {
    name: "uniform random 265,000",
    data: Float32Array.from({ length: image.length }, () => rng.uniform(-1, 1)),
    shape: [image.length],
  },
  { name: "MLP answer 1x2", data: Float32Array.of(0.12345679, 0.87654321), shape: [1, 2] },
];
for (const c of cases) {
  const t: Tensor = { datatype: "FP32", shape: c.shape, data: c.data };
  const mine: { ms: number; bytes: number }[] = [];
  const theirs: { ms: number; bytes: number }[] = [];
  for (let pair = 0; pair < 3; pair++) {
    mine.push(time(() => shortest(t)));
    theirs.push(time(() => widened(c.data)));
  }
  const ms = (xs: { ms: number }[]) =>
    xs.map((x) => (x.ms < 1 ? `${(x.ms * 1000).toFixed(1)} µs` : `${x.ms.toFixed(1)} ms`)).join(", ");
  process.stdout.write(
    `${c.name}: shortest ${ms(mine)} (${mine[0]!.bytes} bytes); widened doubles ${ms(theirs)} (${theirs[0]!.bytes} bytes)\n`,
  );
}
