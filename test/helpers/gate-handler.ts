// A custom handler that holds each request until the test lets it go, so a test can observe a
// request or job while it is certainly still running (no timing guesses). For every row value x
// it writes `started-x` into `options.dir`, then waits until `open-x` or `open-all` exists there,
// and answers y = 2x. test/helpers/gate.ts drives it. With `options.batchable: true` its requests
// may be joined into batches (a batch waits until every row in it is let go).
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HandlerContext, HandlerSignature, TensorMap } from "../../src/index.js";

let dir = "";

export function load(ctx: HandlerContext): HandlerSignature {
  dir = String(ctx.options.dir);
  return {
    inputs: [{ name: "x", datatype: "FP32", shape: [-1, 1] }],
    outputs: [{ name: "y", datatype: "FP32", shape: [-1, 1] }],
    batchable: ctx.options.batchable === true,
  };
}

export async function predict(batch: TensorMap): Promise<TensorMap> {
  const x = batch.x!.data as Float32Array;
  for (const v of x) writeFileSync(join(dir, `started-${v}`), "");
  const open = () => existsSync(join(dir, "open-all")) || x.every((v) => existsSync(join(dir, `open-${v}`)));
  while (!open()) await new Promise((r) => setTimeout(r, 10));
  return { y: { datatype: "FP32", shape: [x.length, 1], data: x.map((v) => v * 2) } };
}
