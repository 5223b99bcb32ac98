// Resolves the config entries whose backend is a language backend (llama-cpp, transformers,
// upstream) into LanguageModelConfig: absolute paths, sha256 from config or manifest, the
// golden file beside the model, and the llm defaults. Tensor models stay in load.ts.
import { existsSync, statSync } from "node:fs";
import { basename, dirname, extname, resolve } from "node:path";
import type { z } from "zod";
import { isLanguageBackend } from "./backends.js";
import { goldenFile, manifestSha256 } from "./model-files.js";
import { type configSchema, type LanguageModelConfig, llmSchema } from "./schema.js";

type ParsedConfig = z.output<typeof configSchema>;
type ParsedModel = ParsedConfig["models"][number];

function stemOf(path: string): string {
  return resolve(dirname(path), basename(path, extname(path)));
}

function resolveOne(
  m: ParsedModel & { backend: LanguageModelConfig["backend"] },
  index: number,
  baseDir: string,
  limits: ParsedConfig["limits"],
  source: string,
  problems: string[],
  serverPricePerHour = 0,
  checkFiles = true,
): LanguageModelConfig {
  const where = `${source}: models[${index}]`;
  // upstream: `path` is the upstream's URL (config/load.ts fills it in from upstream.url).
  const path = m.backend === "upstream" ? (m.upstream?.url ?? m.path) : resolve(baseDir, m.path);
  if (m.backend === "upstream" && !m.upstream) {
    problems.push(`${where}.upstream: backend upstream needs upstream.url (an OpenAI-compatible base URL)`);
  } else if (m.backend !== "upstream" && m.upstream) {
    problems.push(`${where}.upstream: applies only to backend upstream`);
  }
  // llama-cpp reads one .gguf file; the other language backends check their own paths
  // (a folder for transformers, a URL for upstream) when they start.
  // The API tier (role api) loads no weights: its machine need not hold the files.
  if (m.backend === "llama-cpp" && checkFiles) {
    if (!existsSync(path)) problems.push(`${where}.path: ${path} does not exist`);
    else if (!statSync(path).isFile()) problems.push(`${where}.path: ${path} is not a file`);
  }
  const stem = stemOf(path);
  let sha256 = m.sha256;
  let sha256Source = sha256 ? `${source} models[${index}].sha256` : undefined;
  const manifest = `${stem}.manifest.json`;
  if (!sha256 && m.backend === "llama-cpp" && existsSync(manifest)) {
    sha256 = manifestSha256(manifest, where, problems);
    if (sha256) sha256Source = manifest;
  }
  const golden = goldenFile(m.golden, baseDir, stem, where, problems, checkFiles);
  return Object.freeze({
    name: m.name,
    backend: m.backend,
    path,
    version: m.version,
    ...(sha256 ? { sha256, sha256Source } : {}),
    ...(golden ? { golden } : {}),
    // An upstream model computes elsewhere: it takes no cores from the thread budget.
    threads: m.backend === "upstream" ? 0 : m.threads,
    limits: Object.freeze({ ...limits, ...m.limits }),
    llm: Object.freeze(m.llm ?? llmSchema.parse({})),
    options: Object.freeze({ ...m.options }),
    ...(m.description ? { description: m.description } : {}),
    // Embeddings (transformers) are batched like tensor models; cost settings (docs/Cost.md).
    batching: Object.freeze({ ...m.batching }),
    pricePerHour: m.pricePerHour ?? serverPricePerHour,
    ...(m.pricePerMillionInputTokens !== undefined
      ? { pricePerMillionInputTokens: m.pricePerMillionInputTokens }
      : {}),
    ...(m.pricePerMillionOutputTokens !== undefined
      ? { pricePerMillionOutputTokens: m.pricePerMillionOutputTokens }
      : {}),
    ...(m.upstream ? { upstream: Object.freeze({ ...m.upstream }) } : {}),
  });
}

/**
 * The language models of a parsed config, in file order; problems are appended to `problems`.
 * Also reports `llm` set on a tensor model, which would otherwise be silently ignored.
 */
export function resolveLanguageModels(
  parsed: ParsedConfig,
  baseDir: string,
  source: string,
  problems: string[],
): LanguageModelConfig[] {
  const out: LanguageModelConfig[] = [];
  parsed.models.forEach((m, i) => {
    if (isLanguageBackend(m.backend)) {
      out.push(
        resolveOne(
          m as ParsedModel & { backend: LanguageModelConfig["backend"] },
          i,
          baseDir,
          parsed.limits,
          source,
          problems,
          parsed.server.pricePerHour,
          parsed.server.role !== "api",
        ),
      );
    } else if (m.llm !== undefined) {
      problems.push(
        `${source}: models[${i}].llm: applies only to backends llama-cpp, transformers and upstream`,
      );
    }
  });
  return out;
}
