// A bare Open Inference Protocol server, the second baseline beside modelport on large tensors:
// what a person would write with node:http and onnxruntime-node to serve one model's
// POST /v2/models/NAME/infer (any path is taken as that), its tensors as JSON numbers or as bytes after a JSON header
// (Inference-Header-Content-Length, as Triton's clients send them). FP32 and INT64 tensors. No
// validation, request ids, logs, metrics, limits or batching; session.run on the main thread, one
// request at a time per call, 1 intra-op thread. Outputs as JSON numbers (JSON.stringify of the
// values), or as raw bytes after the JSON header when the request asks `binary_data_output`.
// Where modelport's time over onnxruntime in-process is the transport's (loopback, node:http),
// this server pays it too; what modelport adds beyond it is the difference between the two.
//
//   node dist/bench/bare-oip-server.js MODEL.onnx PORT    (PORT 0 picks a free one)
// Prints {"address":"http://127.0.0.1:PORT"} on stdout once the model is loaded and it listens.
import path from "node:path";
import { InferenceSession, Tensor } from "onnxruntime-node";
import { serveBaseline } from "./baseline-server.js";

const [modelPath, portArg = "0"] = process.argv.slice(2);
if (modelPath === undefined) {
  process.stderr.write("usage: bare-oip-server MODEL.onnx PORT\n");
  process.exit(2);
}
const modelName = path.basename(modelPath, ".onnx");

const session = await InferenceSession.create(modelPath, {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: "sequential",
});

interface InputHeader {
  name: string;
  datatype: "FP32" | "INT64";
  shape: number[];
  data?: number[];
  parameters?: { binary_data_size?: number };
}

interface RequestHeader {
  inputs: InputHeader[];
  parameters?: { binary_data_output?: boolean };
}

/** The bytes as a typed array of their own (a copy: the body's offset may not be aligned). */
function fromBytes(datatype: InputHeader["datatype"], bytes: Buffer): Float32Array | BigInt64Array {
  const own = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length);
  return datatype === "INT64" ? new BigInt64Array(own) : new Float32Array(own);
}

function fromNumbers(datatype: InputHeader["datatype"], data: number[]): Float32Array | BigInt64Array {
  return datatype === "INT64" ? BigInt64Array.from(data, BigInt) : Float32Array.from(data);
}

serveBaseline(Number(portArg), async (body, req, res) => {
  const headerLength = req.headers["inference-header-content-length"];
  const jsonEnd = headerLength === undefined ? body.length : Number(headerLength);
  const request = JSON.parse(body.toString("utf8", 0, jsonEnd)) as RequestHeader;
  const feeds: Record<string, Tensor> = {};
  let at = jsonEnd;
  for (const input of request.inputs) {
    const size = input.parameters?.binary_data_size;
    let data: Float32Array | BigInt64Array;
    if (size === undefined) data = fromNumbers(input.datatype, input.data ?? []);
    else {
      data = fromBytes(input.datatype, body.subarray(at, at + size));
      at += size;
    }
    feeds[input.name] = new Tensor(input.datatype === "INT64" ? "int64" : "float32", data, input.shape);
  }
  const results = await session.run(feeds);
  const binary = request.parameters?.binary_data_output === true;
  const values = session.outputNames.map((name) => results[name]!.data as Float32Array | BigInt64Array);
  const outputs = session.outputNames.map((name, i) => {
    const t = results[name]!;
    const head = { name, datatype: t.type === "int64" ? "INT64" : "FP32", shape: t.dims };
    const data = values[i]!;
    return binary
      ? { ...head, parameters: { binary_data_size: data.byteLength } }
      : { ...head, data: Array.from(data, Number) };
  });
  const header = JSON.stringify({ model_name: modelName, outputs });
  if (!binary) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(header);
    return;
  }
  const json = Buffer.from(header);
  const raw = values.map((d) => Buffer.from(d.buffer, d.byteOffset, d.byteLength));
  res.writeHead(200, {
    "content-type": "application/octet-stream",
    "inference-header-content-length": String(json.length),
  });
  res.end(Buffer.concat([json, ...raw]));
});
