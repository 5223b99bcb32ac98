// `npm start` runs this first: builds the example models into examples/models/ when any of
// them is missing, so a fresh clone serves with no separate step.
import { existsSync } from "node:fs";
import path from "node:path";
import { buildModels } from "./build-models.js";

const EXAMPLES = ["churn-tree", "segment-mlp"];
const dir = path.resolve(process.cwd(), "examples/models");
const missing = EXAMPLES.filter((name) =>
  [".onnx", ".manifest.json", ".golden.json"].some((ext) => !existsSync(path.join(dir, `${name}${ext}`))),
);
// The embedding model is a folder (config.json, tokenizer.json, onnx/model.onnx) plus its golden file.
if (
  ["tiny-embed/onnx/model.onnx", "tiny-embed/tokenizer.json", "tiny-embed.golden.json"].some(
    (f) => !existsSync(path.join(dir, f)),
  )
)
  missing.push("tiny-embed");
// The language model: tiny-llama.gguf with its golden text and manifest.
if (
  [".gguf", ".manifest.json", ".golden.json"].some((ext) => !existsSync(path.join(dir, `tiny-llama${ext}`)))
)
  missing.push("tiny-llama");
if (missing.length > 0) {
  process.stdout.write(`example models missing (${missing.join(", ")}): building them into ${dir}\n`);
  await buildModels(dir);
}
