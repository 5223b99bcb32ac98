// The in-thread copy of a small ONNX model, through a listening server: a loop of single
// requests (concurrency 1) is answered by it once the model has been measured, with answers
// identical to the worker's; `batching.inlineMaxMs: 0` turns it off; a model file above the size
// kept in the server's thread gets none, and its status says why.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { encodeModel, floatTensor, node, tensorInfo } from "../../examples/build/onnx-graph.js";
import { INLINE_MIN_SAMPLES } from "../../src/runner/batcher.js";
import { INLINE_MAX_FILE_BYTES } from "../../src/runner/inline-lane.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

/** y = x + 1, with an unused initializer that makes the file larger than INLINE_MAX_FILE_BYTES. */
function writeBigModel(dir: string): string {
  const floats = Math.ceil(INLINE_MAX_FILE_BYTES / 4) + 1024;
  const path = join(dir, "big.onnx");
  writeFileSync(
    path,
    encodeModel({
      name: "big",
      inputs: [tensorInfo("x", "FP32", ["batch", 1])],
      outputs: [tensorInfo("y", "FP32", ["batch", 1])],
      nodes: [node("Add", ["x", "one"], ["y"])],
      initializers: [
        floatTensor("one", [1], [1]),
        floatTensor("ballast", [floats], new Float32Array(floats)),
      ],
    }),
  );
  return path;
}

interface Status {
  batching: { inline: { state: string; maxMs: number; calls: number } };
}

let srv: InProcessServer;

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelport-inline-"));
  const MLP = join(await testModels(), "segment-mlp.onnx");
  const config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "models:",
      // A generous limit: a test's first requests run on cold code (tens of ms); the default 1 ms
      // is for a warmed-up server, and which requests qualify is the batcher's unit test.
      `  - { name: inline, path: ${JSON.stringify(MLP)}, batching: { inlineMaxMs: 50 } }`,
      `  - { name: hop, path: ${JSON.stringify(MLP)}, batching: { inlineMaxMs: 0 } }`,
      `  - { name: big, path: ${JSON.stringify(writeBigModel(dir))}, batching: { inlineMaxMs: 50 } }`,
      "",
    ].join("\n"),
  );
  srv = await startInProcess({ file: config, env: {} });
});

after(() => srv?.close());

async function status(model: string): Promise<Status> {
  const res = await fetch(`${srv.url}/v1/models/${model}`);
  assert.equal(res.status, 200);
  return (await res.json()) as Status;
}

describe("inline lane", () => {
  it("answers a loop of single requests in-thread once measured, exactly as the worker does", async () => {
    const n = INLINE_MIN_SAMPLES + 12;
    for (let i = 0; i < n; i++) {
      const rows = [[i / 7 - 1, (i % 5) / 3, Math.sin(i), 0.25 * (i % 4)]];
      // One after the other: a request that arrives during an in-thread call makes the lane step
      // aside for a while (batcher.ts, INLINE_CROWDED_MS).
      const a = await postJson(`${srv.url}/v1/models/inline/predict`, { rows });
      const b = await postJson(`${srv.url}/v1/models/hop/predict`, { rows });
      assert.equal(a.status, 200, JSON.stringify(a.body));
      assert.equal(b.status, 200, JSON.stringify(b.body));
      const outputs = (r: { body: unknown }) => (r.body as { outputs: unknown }).outputs;
      assert.deepEqual(outputs(a), outputs(b), `request ${i}: the in-thread copy and the worker disagree`);
    }
    const inline = (await status("inline")).batching.inline;
    assert.equal(inline.state, "active");
    assert.equal(inline.maxMs, 50);
    // The first batches (the golden check's included) are measured on the worker; after that
    // each of these sequential requests found the model idle.
    assert.ok(inline.calls >= n - INLINE_MIN_SAMPLES, `${inline.calls} in-thread calls of ${n}`);
    assert.deepEqual((await status("hop")).batching.inline, { state: "off", maxMs: 0, calls: 0 });
  });

  it("a model file above the in-thread size limit gets no copy, and its status says why", async () => {
    for (let i = 0; i < INLINE_MIN_SAMPLES + 2; i++) {
      const res = await postJson(`${srv.url}/v1/models/big/predict`, { rows: [[i]] });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual((res.body as { outputs: unknown }).outputs, { y: [[i + 1]] });
    }
    const inline = (await status("big")).batching.inline;
    assert.match(inline.state, /above the 16 MiB kept in the server's thread/);
    assert.equal(inline.calls, 0);
  });
});
