// Every embeddings model through one suite (test/conformance/embeddings.conformance.ts):
// transformers.js in a worker thread, an upstream model against a real OpenAI-compatible HTTP
// server, and the API tier's remote model forwarding to a `--role runner` process.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { Catalogue } from "../../src/catalogue/catalogue.js";
import { loadConfig } from "../../src/config/load.js";
import { embeddingsConformance } from "../conformance/embeddings.conformance.js";
import { testModels } from "../helpers/models.js";
import { startOpenAiStub } from "../helpers/openai-stub.js";
import { startChild, waitReady } from "../helpers/server.js";

const log = pino({ level: "silent" });

/** A catalogue from YAML lines (the models section and what comes before it). */
async function catalogueOf(lines: string[]): Promise<Catalogue> {
  const file = join(mkdtempSync(join(tmpdir(), "modelport-embed-conf-")), "modelport.yaml");
  writeFileSync(file, [...lines, ""].join("\n"));
  const catalogue = new Catalogue(loadConfig({ file, cores: 2 }), { log });
  await catalogue.startAll();
  return catalogue;
}

embeddingsConformance("transformers (worker thread)", async () => {
  const dir = await testModels();
  const catalogue = await catalogueOf([
    "models:",
    `  - {name: embed, path: ${join(dir, "tiny-embed")}, threads: 1}`,
  ]);
  return { model: catalogue.get("embed"), cleanup: () => catalogue.closeAll() };
});

embeddingsConformance("upstream (a real OpenAI-compatible HTTP server)", async () => {
  const stub = await startOpenAiStub();
  const catalogue = await catalogueOf([
    "models:",
    `  - {name: embed, backend: upstream, upstream: {url: "${stub.url}", model: stub-model, retries: 0}}`,
  ]);
  return {
    model: catalogue.get("embed"),
    cleanup: async () => {
      await catalogue.closeAll();
      await stub.close();
    },
  };
});

embeddingsConformance("remote (API tier → runner process with transformers)", async () => {
  const dir = await testModels();
  const runner = await startChild([
    join(dir, "tiny-embed"),
    "--name",
    "embed",
    "--role",
    "runner",
    "--threads",
    "1",
  ]);
  await waitReady(runner.url, 120_000);
  const catalogue = await catalogueOf([
    "server:",
    "  role: api",
    "  runnerPollMs: 300",
    `  runners: [${runner.url}]`,
    "models:",
    `  - {name: embed, path: ${join(dir, "tiny-embed")}}`,
  ]);
  return {
    model: catalogue.get("embed"),
    cleanup: async () => {
      await catalogue.closeAll();
      await runner.stop();
    },
  };
});
