// `modelport golden record`: score given inputs with the model as loaded now and write a
// golden file, so later loads (another machine, library or file) must reproduce it.
import { readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, extname, join, resolve } from "node:path";
import { backendForPath } from "../config/backends.js";
import { isModelportError, ModelportError } from "../errors.js";
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

/** The --inputs file as JSON; a missing file or bad JSON is one clear error naming the file. */
function readInputs(file: string): { inputs?: unknown } {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ModelportError(
      "MP_ERR_CLI_USAGE",
      `--inputs ${file}: cannot read it (${(err as { code?: string }).code ?? (err as Error).message}); give a JSON file holding a predict body`,
    );
  }
  try {
    return JSON.parse(text) as { inputs?: unknown };
  } catch (err) {
    throw new ModelportError(
      "MP_ERR_REQUEST_MALFORMED_JSON",
      `--inputs ${file} is not valid JSON (${(err as Error).message}); it must hold a predict body such as {"rows": [[...]]}`,
    );
  }
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
  const backend = values.backend ?? backendForPath(path) ?? "onnx";
  if (backend !== "onnx" && backend !== "custom")
    throw new ModelportError(
      "MP_ERR_CLI_USAGE",
      `golden record scores tensor models (.onnx, a custom handler), not a ${backend} model: for ${basename(path)} write ${basename(path, extname(path))}.golden.json by hand as {"prompt": "...", "max_tokens": N, "text": "<the greedy answer>"} (docs/LLM.md, Loading)`,
    );
  const name = basename(path, extname(path));
  const body = readInputs(values.inputs);
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
    let inputs: TensorMap;
    try {
      inputs = Array.isArray(body.inputs)
        ? decodeOip(body, signature, limits)
        : decodeNative(body, signature, limits);
    } catch (err) {
      // The input's own code (shape, datatype…), saying which file holds it.
      if (isModelportError(err))
        throw new ModelportError(err.code, `--inputs ${values.inputs}: ${err.message}`);
      throw err;
    }
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
