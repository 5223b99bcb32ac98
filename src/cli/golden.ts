// `modelport golden record`: score given inputs with the model as loaded now and write a
// golden file, so later loads (another machine, library or file) must reproduce it.
import { readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, extname, join, resolve } from "node:path";
import { backendForPath } from "../config/backends.js";
import type { GoldenFile, GoldenTensor } from "../golden.js";
import { toJsonArray } from "../protocol/json-data.js";
import { decodeNative } from "../protocol/native-body.js";
import { decodeOip } from "../protocol/oip-body.js";
import { WorkerRunner } from "../runner/worker-runner.js";
import type { TensorMap } from "../tensor.js";
import { parse, UsageError } from "./args.js";

export const GOLDEN_HELP = `Usage: modelport golden record MODEL --inputs FILE [--out FILE] [--tolerance T] [--threads N]

Loads MODEL (.onnx or a custom handler), scores the inputs in FILE and writes a golden file
(default: NAME.golden.json beside the model). FILE holds a predict body: {"rows": [...]},
{"inputs": {name: data}} or an Open Inference Protocol body {"inputs": [{name, shape, datatype, data}]}.
Check the outputs before you commit the file: a golden file records what the model does, right or wrong.
`;

function toGolden(tensors: TensorMap): Record<string, GoldenTensor> {
  const out: Record<string, GoldenTensor> = {};
  for (const [name, t] of Object.entries(tensors))
    out[name] = { datatype: t.datatype, shape: t.shape, data: toJsonArray(t) };
  return out;
}

export async function golden(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    inputs: { type: "string" },
    out: { type: "string", short: "o" },
    tolerance: { type: "string" },
    threads: { type: "string" },
    backend: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help || positionals[0] !== "record") {
    process.stdout.write(GOLDEN_HELP);
    return values.help ? 0 : 2;
  }
  const modelArg = positionals[1];
  if (!modelArg || !values.inputs) throw new UsageError("golden record needs MODEL and --inputs FILE");
  const path = resolve(modelArg);
  const backend = (values.backend ?? backendForPath(path) ?? "onnx") as "onnx" | "custom";
  const name = basename(path, extname(path));
  const body = JSON.parse(readFileSync(values.inputs, "utf8")) as { inputs?: unknown };
  const runner = new WorkerRunner({
    name,
    backend,
    path,
    threads: Number(values.threads ?? 1),
    device: "cpu",
    options: {},
  });
  try {
    const { signature } = await runner.start();
    const limits = { maxBatchRows: Number.MAX_SAFE_INTEGER };
    const inputs = Array.isArray(body.inputs)
      ? decodeOip(body, signature, limits)
      : decodeNative(body, signature, limits);
    const outputs = await runner.predict(inputs);
    const file: GoldenFile = {
      description: `recorded by modelport golden record from ${basename(values.inputs)} on ${new Date().toISOString()}`,
      inputs: toGolden(inputs),
      outputs: toGolden(outputs),
      ...(values.tolerance ? { tolerance: Number(values.tolerance) } : {}),
    };
    const out = values.out ?? join(dirname(path), `${name}.golden.json`);
    // A file the user asked for, from inputs of their own and shipped beside the model: the umask
    // decides its mode, as for any file a tool writes (tenants' data goes elsewhere, owner-only).
    writeFileSync(out, `${JSON.stringify(file, null, 2)}\n`);
    process.stdout.write(
      `wrote ${out}: ${Object.keys(file.inputs).length} input(s), ${Object.keys(file.outputs).length} output(s)\n`,
    );
    return 0;
  } finally {
    await runner.close();
  }
}
