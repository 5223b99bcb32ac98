// The baseline for the benchmark: the simplest model server a person would write with node:http
// and onnxruntime-node. No validation, request ids, logs or metrics; session.run on the main thread.
//
//   node dist/bench/naive-server.js MODEL.onnx PORT    (PORT 0 picks a free one)
// Prints {"address":"http://127.0.0.1:PORT"} on stdout once the model is loaded and it listens.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { InferenceSession, Tensor } from "onnxruntime-node";

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

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", async () => {
    try {
      const rows = JSON.parse(Buffer.concat(chunks).toString("utf8")).rows as number[][];
      const features = new Tensor("float32", Float32Array.from(rows.flat()), [rows.length, 6]);
      const out = await session.run({ features });
      const label = Array.from(out["label"]!.data as BigInt64Array, Number);
      const probs = out["probabilities"]!.data as Float32Array;
      const probabilities = label.map((_, i) => [probs[2 * i], probs[2 * i + 1]]);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ label, probabilities }));
    } catch (err) {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: String(err) }));
    }
  });
});

server.listen(Number(portArg), "127.0.0.1", () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ address: `http://127.0.0.1:${port}` })}\n`);
});

process.on("SIGTERM", () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
