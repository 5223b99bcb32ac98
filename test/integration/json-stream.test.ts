// Large JSON answers are sent chunked, written while the socket takes them (src/server/json-answer.ts),
// through a listening server and a handler model whose output size the request chooses: the
// values arrive whole and exact over the OIP and native protocols, small answers keep their
// Content-Length, and a client that goes away in the middle of a large answer costs nothing else.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelport-json-stream-"));
  // y has one row per row of x, of x's first value elements: y[r][i] = sin(i) / 1000 + r.
  const handler = join(dir, "fan-out.mjs");
  writeFileSync(
    handler,
    `export function load() {
  return {
    inputs: [{ name: "x", datatype: "FP32", shape: [-1, 1] }],
    outputs: [{ name: "y", datatype: "FP32", shape: [-1, -1] }],
    batchable: false,
  };
}
export async function predict(batch) {
  const rows = batch.x.data.length;
  const n = batch.x.data[0];
  const data = new Float32Array(rows * n);
  for (let r = 0; r < rows; r++) for (let i = 0; i < n; i++) data[r * n + i] = Math.sin(i) / 1000 + r;
  return { y: { datatype: "FP32", shape: [rows, n], data } };
}
`,
  );
  const file = join(dir, "stream.yaml");
  writeFileSync(file, `models:\n  - {name: fan, backend: custom, path: ${handler}}\n`);
  srv = await startInProcess({ file, env: {} });
});

after(async () => {
  await srv?.close();
});

const expected = (rows: number, n: number) =>
  Float32Array.from({ length: rows * n }, (_, k) => Math.sin(k % n) / 1000 + Math.floor(k / n));

describe("large JSON answers", () => {
  it("an OIP answer of 200,000 FP32 values comes chunked, whole and exact", async () => {
    const res = await postJson(`${srv.url}/v2/models/fan/infer`, {
      id: "big",
      inputs: [{ name: "x", datatype: "FP32", shape: [2, 1], data: [100_000, 0] }],
    });
    assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 300));
    assert.equal(res.headers.get("transfer-encoding"), "chunked");
    assert.equal(res.headers.get("content-length"), null);
    assert.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
    assert.equal(res.body.id, "big");
    const [y] = res.body.outputs;
    assert.deepEqual(
      { name: y.name, datatype: y.datatype, shape: y.shape },
      { name: "y", datatype: "FP32", shape: [2, 100_000] },
    );
    assert.deepEqual(Float32Array.from(y.data as number[]), expected(2, 100_000));
  });

  it("a native answer of 150,000 values comes chunked, nested by shape and exact", async () => {
    const res = await postJson(`${srv.url}/v1/models/fan/predict`, { rows: [[50_000], [1], [2]] });
    assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 300));
    assert.equal(res.headers.get("transfer-encoding"), "chunked");
    const y = res.body.outputs.y as number[][];
    assert.equal(y.length, 3);
    assert.ok(y.every((row) => row.length === 50_000));
    assert.deepEqual(Float32Array.from(y.flat()), expected(3, 50_000));
  });

  it("a small answer is sent whole, with its Content-Length", async () => {
    const res = await postJson(`${srv.url}/v2/models/fan/infer`, {
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1000] }],
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("transfer-encoding"), null);
    assert.ok(Number(res.headers.get("content-length")) > 1000);
    assert.deepEqual(Float32Array.from(res.body.outputs[0].data as number[]), expected(1, 1000));
  });

  it("a client that leaves in the middle of a large answer leaves the server answering others", async () => {
    // ~40 MB of text: the client reads the first chunk and closes its connection.
    const first = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${srv.url}/v2/models/fan/infer`,
        { method: "POST", headers: { "content-type": "application/json" } },
        (res) => {
          res.once("data", (chunk: Buffer) => {
            req.destroy();
            resolve(chunk.length);
          });
        },
      );
      req.on("error", (err) => (req.destroyed ? undefined : reject(err)));
      req.end(
        JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [4_000_000] }] }),
      );
    });
    assert.ok(first > 0);
    const res = await postJson(`${srv.url}/v2/models/fan/infer`, {
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [3] }],
    });
    assert.equal(res.status, 200);
    assert.deepEqual(Float32Array.from(res.body.outputs[0].data as number[]), expected(1, 3));
    const health = await fetch(`${srv.url}/readyz`);
    assert.equal(health.status, 200);
  });
});
