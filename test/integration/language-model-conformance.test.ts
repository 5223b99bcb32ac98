// The generative language models that test/unit/llama-cpp-model.test.ts does not run through
// the language-model suite (test/conformance/language-model.conformance.ts): an upstream model
// against a real OpenAI-compatible HTTP server, and the API tier's remote model forwarding to a
// `--role runner` process that serves the GGUF model with llama.cpp.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { Catalogue } from "../../src/catalogue/catalogue.js";
import { createLanguageModel } from "../../src/catalogue/model-factory.js";
import { loadConfig } from "../../src/config/load.js";
import { limitsSchema, llmSchema, upstreamSchema } from "../../src/config/schema.js";
import { languageModelConformance } from "../conformance/language-model.conformance.js";
import { testModels } from "../helpers/models.js";
import { startOpenAiStub } from "../helpers/openai-stub.js";
import { startChild, waitReady } from "../helpers/server.js";

const log = pino({ level: "silent" });

languageModelConformance("upstream (a real OpenAI-compatible HTTP server)", async () => {
  const stub = await startOpenAiStub();
  stub.generate = true;
  stub.streamGapMs = 5;
  const sequences = 2;
  const maxWaiting = 1;
  const model = createLanguageModel(
    {
      name: "hosted",
      backend: "upstream",
      path: stub.url,
      version: "1",
      threads: 1,
      limits: limitsSchema.parse({}),
      llm: llmSchema.parse({ sequences, maxWaiting }),
      options: {},
      upstream: upstreamSchema.parse({ url: stub.url, model: "stub-model", retries: 0 }),
    },
    { log },
  );
  await model.start();
  return {
    model,
    maxWaiting,
    admission: "concurrent",
    sequences,
    request: { prompt: "say something", maxTokens: 12 },
    long: { prompt: "go on", maxTokens: 100_000 },
    deterministic: true,
    cleanup: () => stub.close(),
  };
});

languageModelConformance("remote (API tier → runner process with llama.cpp)", async () => {
  const dir = await testModels();
  const tmp = mkdtempSync(join(tmpdir(), "modelport-llm-remote-"));
  const entry = `  - {name: tiny-llama, path: ${join(dir, "tiny-llama.gguf")}, threads: 1, llm: {contextSize: 8192, sequences: 1, maxWaiting: 2}}`;
  const runnerFile = join(tmp, "runner.yaml");
  writeFileSync(runnerFile, ["server:", "  role: runner", "models:", entry, ""].join("\n"));
  const runner = await startChild(["-c", runnerFile]);
  await waitReady(runner.url, 120_000);
  const apiFile = join(tmp, "api.yaml");
  writeFileSync(
    apiFile,
    [
      "server:",
      "  role: api",
      "  runnerPollMs: 300",
      `  runners: [${runner.url}]`,
      "models:",
      entry,
      "",
    ].join("\n"),
  );
  const catalogue = new Catalogue(loadConfig({ file: apiFile, cores: 2 }), { log });
  await catalogue.startAll();
  return {
    model: catalogue.get("tiny-llama"),
    maxWaiting: 2,
    admission: "runner",
    sequences: 1,
    runnerLoad: async () => {
      const res = await fetch(`${runner.url}/v1/models/tiny-llama`);
      const body = (await res.json()) as { concurrency: { active: number; waiting: number } };
      return body.concurrency;
    },
    request: { prompt: " the model will serve", maxTokens: 12 },
    long: { prompt: " the", maxTokens: 8000 },
    deterministic: true,
    cleanup: async () => {
      await catalogue.closeAll();
      await runner.stop();
    },
  };
});
