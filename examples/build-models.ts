// Builds the example and test models (`npm run models`): each one is trained or generated here in
// TypeScript and written as NAME.onnx, NAME.golden.json and NAME.manifest.json. Golden outputs come
// from the TypeScript models themselves, never from onnxruntime, so a passing golden check shows
// that the ONNX graph really implements the model. Everything is seeded: two builds give
// byte-identical files.
//
//   node dist/examples/build-models.js [--out DIR]    (default: ./examples/models)
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { type ModelArtifact, writeArtifact } from "./build/artifacts.js";
import { buildChurnTree } from "./build/models/churn-tree.js";
import { buildMultiIo } from "./build/models/multi-io.js";
import { buildSegmentMlp } from "./build/models/segment-mlp.js";
import { buildSlow } from "./build/models/slow.js";
import { writeTinyEmbed } from "./build/models/tiny-embed.js";
import { buildTinyLlama, writeLlamaArtifact } from "./build/models/tiny-llama.js";
import { buildWideMlp } from "./build/models/wide-mlp.js";

export const MODEL_BUILDERS: readonly (() => ModelArtifact)[] = [
  buildChurnTree,
  buildSegmentMlp,
  buildWideMlp,
  buildMultiIo,
  buildSlow,
];

/** Builds every model into `outDir` (created if missing) and returns their names. */
export async function buildModels(outDir: string, log: (line: string) => void = () => {}): Promise<string[]> {
  await mkdir(outDir, { recursive: true });
  const names: string[] = [];
  for (const build of MODEL_BUILDERS) {
    const started = performance.now();
    const artifact = build();
    const manifest = await writeArtifact(outDir, artifact);
    names.push(artifact.name);
    const ms = (performance.now() - started).toFixed(0);
    log(
      `${manifest.name}: ${manifest.bytes} bytes, sha256 ${manifest.sha256.slice(0, 12)}, built in ${ms} ms`,
    );
  }
  // A model folder (Hugging Face layout) for the transformers backend, not a single ONNX file.
  const embed = await writeTinyEmbed(outDir);
  names.push("tiny-embed");
  log(`tiny-embed/: onnx/model.onnx ${embed.bytes} bytes, sha256 ${embed.onnxSha256.slice(0, 12)}`);
  // A language model for the llama-cpp backend: NAME.gguf, its golden text and manifest.
  {
    const started = performance.now();
    const manifest = await writeLlamaArtifact(outDir, buildTinyLlama());
    names.push(manifest.name);
    const ms = (performance.now() - started).toFixed(0);
    log(
      `${manifest.file}: ${manifest.bytes} bytes, sha256 ${manifest.sha256.slice(0, 12)}, built in ${ms} ms`,
    );
  }
  return names;
}

function parseArgs(argv: readonly string[]): { outDir: string } {
  let outDir = path.resolve(process.cwd(), "examples/models");
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--out" && argv[i + 1] !== undefined) outDir = path.resolve(argv[++i]!);
    else if (arg.startsWith("--out=")) outDir = path.resolve(arg.slice("--out=".length));
    else throw new Error(`unknown argument: ${arg} (usage: build-models [--out DIR])`);
  }
  return { outDir };
}

// Run only when executed directly, not when a test imports buildModels.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { outDir } = parseArgs(process.argv.slice(2));
  const started = performance.now();
  buildModels(outDir, (line) => console.log(line)).then(
    (names) =>
      console.log(
        `built ${names.length} models into ${outDir} in ${(performance.now() - started).toFixed(0)} ms`,
      ),
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
