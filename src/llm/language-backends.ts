// Which class serves each language backend. One line per backend; each backend module imports
// its driver lazily in start(), so listing it here costs nothing for servers that never use it.
// A backend missing from this table is reported as not ready ("not available in this build").

import { LlamaCppModel } from "../backends/llama-cpp/llama-cpp-model.js";
import { TransformersLanguageModel } from "../backends/transformers/transformers-language-model.js";
import { UpstreamLanguageModel } from "../backends/upstream/upstream-language-model.js";
import type { LanguageModelConfig } from "../config/schema.js";
import type { LanguageBackend, LanguageModel } from "./language-model.js";
import type { LanguageModelDeps } from "./language-model-registry.js";

export type LanguageModelFactory = (config: LanguageModelConfig, deps: LanguageModelDeps) => LanguageModel;

export const LANGUAGE_MODEL_FACTORIES: { readonly [B in LanguageBackend]?: LanguageModelFactory } = {
  "llama-cpp": (config, deps) => new LlamaCppModel(config, deps),
  transformers: (config, deps) => new TransformersLanguageModel(config, deps.log, deps),
  upstream: (config, deps) => new UpstreamLanguageModel(config, deps.log, deps),
};
