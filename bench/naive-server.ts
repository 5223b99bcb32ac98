// The baseline for the benchmark: the simplest model server a person would write with node:http
// and onnxruntime-node, for any model with one FP32 input [batch, width] (the width read from the
// session's input metadata). No validation, request ids, logs, metrics or batching; session.run on
// the main thread, one request at a time per call, 1 intra-op thread.
//
//   node dist/bench/naive-server.js MODEL.onnx PORT    (PORT 0 picks a free one)
// Prints {"address":"http://127.0.0.1:PORT"} on stdout once the model is loaded and it listens.
// Takes {"rows":[[...],...]}; answers {OUTPUT: [per row: a number, or an array for [batch, k]]}.
import { InferenceSession, Tensor } from "onnxruntime-node";
import { serveBaseline } from "./baseline-server.js";

const [modelPath, portArg = "0"] = process.argv.slice(2);
if (modelPath === undefined) {
  process.stderr.write("usage: naive-server MODEL.onnx PORT\n");
  process.exit(2);
}

const session = await InferenceSession.create(modelPath, {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: "sequential",
});

const input = session.inputMetadata[0];
const width = input?.isTensor ? input.shape[1] : undefined;
if (
  session.inputMetadata.length !== 1 ||
  !input?.isTensor ||
  input.type !== "float32" ||
  input.shape.length !== 2 ||
  typeof width !== "number"
) {
  process.stderr.write(`naive-server: ${modelPath} must have one FP32 input [batch, width]\n`);
  process.exit(2);
}
const inputName = input.name;

/** Per row: the value for [batch], the row's values for [batch, k]; int64 as numbers. */
function perRow(t: Tensor, rows: number): unknown[] {
  const data = t.data as ArrayLike<number | bigint>;
  const k = t.dims.length > 1 ? data.length / rows : 0;
  const out: unknown[] = new Array(rows);
  for (let i = 0; i < rows; i++) {
    if (k === 0) out[i] = Number(data[i]);
    else {
      const row = new Array<number>(k);
      for (let j = 0; j < k; j++) row[j] = Number(data[i * k + j]);
      out[i] = row;
    }
  }
  return out;
}

serveBaseline(Number(portArg), async (body, _req, res) => {
  const rows = JSON.parse(body.toString("utf8")).rows as number[][];
  const features = new Tensor("float32", Float32Array.from(rows.flat()), [rows.length, width]);
  const out = await session.run({ [inputName]: features });
  const answer: Record<string, unknown[]> = {};
  for (const name of session.outputNames) answer[name] = perRow(out[name]!, rows.length);
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(answer));
});
