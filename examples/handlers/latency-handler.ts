// A latency-bound custom handler: each call waits `options.waitMs` (default 20 ms), as a call
// to a remote service or a database would, then doubles its input. It answers with the pid of
// the process that ran it, so a deployment with several runners can see who did the work.
// Used by the scale-out benchmark and tests; a template for handlers that mostly wait.
import { appendFileSync } from "node:fs";
import type { HandlerContext, HandlerSignature, TensorMap } from "../../src/index.js";

let waitMs = 20;
let executionsLog: string | undefined;

export function load(ctx: HandlerContext): HandlerSignature {
  waitMs = Number(ctx.options.waitMs ?? 20);
  executionsLog = ctx.options.executionsLog as string | undefined;
  return {
    inputs: [{ name: "x", datatype: "FP32", shape: [-1, 1] }],
    outputs: [
      { name: "y", datatype: "FP32", shape: [-1, 1] },
      { name: "pid", datatype: "INT32", shape: [-1, 1] },
    ],
    // One call per request: the wait, not the arithmetic, is the cost.
    batchable: false,
  };
}

export async function predict(batch: TensorMap): Promise<TensorMap> {
  const x = batch.x!.data as Float32Array;
  const rows = x.length;
  // Tests count executions per input as they start (a job re-run after its runner died shows up twice).
  if (executionsLog) appendFileSync(executionsLog, `${Array.from(x).join(",")} ${process.pid}\n`);
  await new Promise((r) => setTimeout(r, waitMs));
  return {
    y: { datatype: "FP32", shape: [rows, 1], data: x.map((v) => v * 2) },
    pid: { datatype: "INT32", shape: [rows, 1], data: new Int32Array(rows).fill(process.pid) },
  };
}
