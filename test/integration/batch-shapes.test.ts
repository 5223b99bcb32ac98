// Batching joins only requests that fit together: an ONNX model whose input is [-1, -1]
// (batch × sequence) gets concurrent requests of different widths, in both orders, through a
// real `modelport serve`. Every request must get exactly its own numbers back (an Identity
// output shows any mixing, a ReduceSum output any padding or truncation), and the process must
// stay up and ready.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { goldenTensor } from "../../examples/build/artifacts.js";
import { attr, encodeModel, int64Tensor, node, tensorInfo } from "../../examples/build/onnx-graph.js";
import { type ChildServer, postJson, startReadyChild, stopStartedChildren } from "../helpers/server.js";

/** x [batch, seq] → y = x (Identity) and s = Σ over seq, keepdims ([batch, 1]). */
function writeSeqModel(dir: string): string {
  const onnx = encodeModel({
    name: "seq",
    inputs: [tensorInfo("x", "FP32", ["batch", "seq"])],
    outputs: [tensorInfo("y", "FP32", ["batch", "seq"]), tensorInfo("s", "FP32", ["batch", 1])],
    nodes: [
      node("Identity", ["x"], ["y"]),
      node("ReduceSum", ["x", "axes"], ["s"], [attr.int("keepdims", 1)]),
    ],
    initializers: [int64Tensor("axes", [1], [1])],
  });
  const path = join(dir, "seq.onnx");
  writeFileSync(path, onnx);
  const x = [1, 2, 3, 4, 5, 6];
  writeFileSync(
    join(dir, "seq.golden.json"),
    JSON.stringify({
      inputs: { x: goldenTensor("FP32", [2, 3], x) },
      outputs: { y: goldenTensor("FP32", [2, 3], x), s: goldenTensor("FP32", [2, 1], [6, 15]) },
    }),
  );
  return path;
}

let server: ChildServer;

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelport-batch-shapes-"));
  const model = writeSeqModel(dir);
  const config = join(dir, "modelport.yaml");
  // Classic batching with a long wait: every burst below lands in the queue together, so the
  // original code joins them into one batch.
  writeFileSync(
    config,
    [
      "models:",
      "  - name: seq",
      `    path: ${JSON.stringify(model)}`,
      "    batching: { adaptive: false, maxDelayMs: 100, maxBatchRows: 64 }",
      "",
    ].join("\n"),
  );
  server = await startReadyChild(["-c", config]);
});

after(stopStartedChildren);

interface Sent {
  rows: number[][];
}

/** One request of `rows` rows of `width` values, each value unique to (request, row, column). */
function makeRequest(id: number, rows: number, width: number): Sent {
  return {
    rows: Array.from({ length: rows }, (_, r) =>
      Array.from({ length: width }, (_, c) => id * 1000 + r * 50 + c),
    ),
  };
}

async function burst(widths: readonly number[], rowsOf: (i: number) => number, base: number): Promise<void> {
  const sent = widths.map((w, i) => makeRequest(base + i, rowsOf(i), w));
  const answers = await Promise.all(
    sent.map((s) => postJson(`${server.url}/v1/models/seq/predict`, { inputs: { x: s.rows } })),
  );
  answers.forEach((res, i) => {
    const want = sent[i]!.rows;
    assert.equal(res.status, 200, `request ${i} (width ${widths[i]}): ${JSON.stringify(res.body)}`);
    assert.deepEqual(res.body.outputs.y, want, `request ${i} (width ${widths[i]}) got other numbers back`);
    assert.deepEqual(
      res.body.outputs.s,
      want.map((row) => [row.reduce((a, b) => a + b, 0)]),
      `request ${i} (width ${widths[i]}): wrong sums`,
    );
  });
}

async function assertUp(): Promise<void> {
  assert.equal(server.proc.exitCode, null, `the server exited:\n${server.output().slice(-2000)}`);
  assert.equal(server.proc.signalCode, null, `the server was killed:\n${server.output().slice(-2000)}`);
  const ready = await fetch(`${server.url}/readyz`);
  assert.equal(ready.status, 200);
  assert.doesNotMatch(server.output(), /unhandled|RangeError/i);
}

describe("batching requests of different widths on a [-1, -1] model", () => {
  it("narrow first, then wide: every request gets its own answer", async () => {
    for (let round = 0; round < 4; round++) await burst([2, 8, 2, 8, 2, 8], () => 1, round * 100);
    await assertUp();
  });

  it("wide first, then narrow: every request gets its own answer", async () => {
    for (let round = 0; round < 4; round++) await burst([8, 2, 8, 2, 8, 2], () => 1, 1000 + round * 100);
    await assertUp();
  });

  it("many widths and row counts at once, repeated: no mixing, no starvation, the process stays up", async () => {
    const widths = Array.from({ length: 24 }, (_, i) => [1, 2, 3, 5, 8][i % 5]!);
    for (let round = 0; round < 3; round++) await burst(widths, (i) => 1 + (i % 3), 5000 + round * 100);
    await assertUp();
  });
});
