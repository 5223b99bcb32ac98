// Resolves the config entries whose backend is a language backend (llama-cpp, transformers,
// upstream) into LanguageModelConfig: absolute paths, sha256 from config or manifest, the
// golden file beside the model, and the llm defaults. Tensor models stay in load.ts.
import { existsSync, statSync } from "node:fs";
import { basename, dirname, extname, resolve } from "node:path";
import type { z } from "zod";
import { goldenFile, manifestSha256 } from "./model-files.js";
import { type configSchema, type LanguageModelConfig, llmSchema, withBatchDefaults } from "./schema.js";

type ParsedConfig = z.output<typeof configSchema>;
type ParsedModel = ParsedConfig["models"][number];

function stemOf(path: string): string {
  return resolve(dirname(path), basename(path, extname(path)));
}

export function resolveLanguageModel(
  m: ParsedModel & { backend: LanguageModelConfig["backend"] },
  where: string,
  baseDir: string,
  limits: ParsedConfig["limits"],
  problems: string[],
  serverPricePerHour = 0,
  checkFiles = true,
): LanguageModelConfig {
  // upstream: `path` is the upstream's URL (config/load.ts fills it in from upstream.url).
  const path = m.backend === "upstream" ? (m.upstream?.url ?? m.path) : resolve(baseDir, m.path);
  if (m.backend === "upstream" && !m.upstream) {
    problems.push(`${where}.upstream: backend upstream needs upstream.url (an OpenAI-compatible base URL)`);
  } else if (m.backend !== "upstream" && m.upstream) {
    problems.push(`${where}.upstream: applies only to backend upstream`);
  }
  // Waiting on an upstream is not machine time: its price is its tokens' (docs/Cost.md).
  if (m.backend === "upstream" && m.pricePerHour !== undefined) {
    problems.push(
      `${where}.pricePerHour: an upstream model uses no machine time here; price its tokens with pricePerMillionInputTokens / pricePerMillionOutputTokens`,
    );
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
  let sha256Source = sha256 ? `${where}.sha256` : undefined;
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
    ...(m.load === "lazy" ? { load: "lazy" as const } : {}),
    ...(m.idleUnloadMs !== undefined ? { idleUnloadMs: m.idleUnloadMs } : {}),
    options: Object.freeze({ ...m.options }),
    ...(m.description ? { description: m.description } : {}),
    // Embeddings (transformers) are batched like tensor models; cost settings (docs/Cost.md):
    // local models' machine time at their price or the server's, tokens wherever priced.
    batching: withBatchDefaults(m.batching, "embeddings"),
    ...(m.backend !== "upstream" ? { pricePerHour: m.pricePerHour ?? serverPricePerHour } : {}),
    ...(m.batchPriceFactor !== undefined ? { batchPriceFactor: m.batchPriceFactor } : {}),
    ...(m.pricePerMillionInputTokens !== undefined
      ? { pricePerMillionInputTokens: m.pricePerMillionInputTokens }
      : {}),
    ...(m.pricePerMillionOutputTokens !== undefined
      ? { pricePerMillionOutputTokens: m.pricePerMillionOutputTokens }
      : {}),
    ...(m.upstream ? { upstream: Object.freeze({ ...m.upstream }) } : {}),
    ...(m.capture
      ? { capture: Object.freeze({ ...m.capture, redact: Object.freeze([...m.capture.redact]) as string[] }) }
      : {}),
  });
}
