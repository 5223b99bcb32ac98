// A llama-cpp model (the one lifecycle around LlamaCppEngine) through the LanguageModel conformance suite: the real tiny-llama GGUF on the real
// node-llama-cpp, with one sequence and with two.
import { join } from "node:path";
import { pino } from "pino";
import { createLanguageModel } from "../../src/catalogue/model-factory.js";
import { type LanguageModelConfig, llmSchema } from "../../src/config/schema.js";
import { languageModelConformance } from "../conformance/language-model.conformance.js";
import { testModels } from "../helpers/models.js";

for (const sequences of [1, 2]) {
  languageModelConformance(`llama-cpp, ${sequences} sequence(s)`, async () => {
    const dir = await testModels();
    const maxWaiting = 2;
    const config: LanguageModelConfig = {
      name: "tiny-llama",
      backend: "llama-cpp",
      path: join(dir, "tiny-llama.gguf"),
      version: "1",
      golden: join(dir, "tiny-llama.golden.json"),
      threads: 1,
      limits: { maxBodyBytes: 1 << 20, maxBatchRows: 1, maxQueueRows: 1, timeoutMs: 60_000 },
      llm: llmSchema.parse({ contextSize: 8192, sequences, maxWaiting }),
      options: {},
    };
    const model = createLanguageModel(config, { log: pino({ level: "silent" }) });
    await model.start();
    return {
      model,
      maxWaiting,
      admission: "queue",
      sequences,
      request: { prompt: " the model will serve", maxTokens: 12 },
      long: { prompt: " the", maxTokens: 8000 },
      deterministic: true,
    };
  });
}
