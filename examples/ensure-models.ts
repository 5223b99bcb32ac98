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
if (missing.length > 0) {
  process.stdout.write(`example models missing (${missing.join(", ")}): building them into ${dir}\n`);
  await buildModels(dir);
}
