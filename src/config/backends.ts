// The backends modelport serves, which of them are language models, and which backend a path
// means: one resolution for the command line (`modelport serve PATH`) and for config entries
// that leave `backend` out.
import { existsSync, statSync } from "node:fs";
import { extname, join } from "node:path";

/** The config `backend` values that are language models. */
export const LANGUAGE_BACKENDS = ["llama-cpp", "transformers", "upstream"] as const;
export type LanguageBackend = (typeof LANGUAGE_BACKENDS)[number];

export function isLanguageBackend(backend: string): backend is LanguageBackend {
  return (LANGUAGE_BACKENDS as readonly string[]).includes(backend);
}

/** True when `path` is a folder transformers.js can load (config.json and tokenizer.json). */
export function isTransformersFolder(path: string): boolean {
  try {
    return (
      statSync(path).isDirectory() &&
      existsSync(join(path, "config.json")) &&
      existsSync(join(path, "tokenizer.json"))
    );
  } catch {
    return false;
  }
}

const MODULE_EXTENSIONS = [".ts", ".mts", ".js", ".mjs", ".cjs", ".cts"];

/**
 * The backend a path means: a folder with config.json and tokenizer.json → transformers
 * (embeddings); .onnx → onnx; .gguf → llama-cpp; a .ts/.js/.mjs module → custom; otherwise
 * undefined (the caller's default, onnx). `path` must be absolute or relative to the process.
 */
export function backendForPath(path: string): "onnx" | "custom" | "llama-cpp" | "transformers" | undefined {
  if (isTransformersFolder(path)) return "transformers";
  const ext = extname(path).toLowerCase();
  if (ext === ".onnx") return "onnx";
  if (ext === ".gguf") return "llama-cpp";
  if (MODULE_EXTENSIONS.includes(ext)) return "custom";
  return undefined;
}
