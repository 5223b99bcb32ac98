// `modelport serve DIR` picks the transformers backend for a Hugging Face folder; upstream models
// take their URL instead of a path and need upstream.url; prices reach the resolved configs; and
// the backend's pooling arithmetic (mean over the mask, cls, normalisation).
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { before, describe, it } from "node:test";
import { stringify } from "yaml";
import { embeddingOptions, pool } from "../../src/backends/transformers/transformers-backend.js";
import { backendForPath } from "../../src/config/backends.js";
import { type ConfigError, loadConfig } from "../../src/config/load.js";
import { testModels } from "../helpers/models.js";

describe("config for embeddings and upstream models", () => {
  let models: string;
  before(async () => {
    models = await testModels();
  });

  it("a folder with config.json and tokenizer.json is a transformers model, golden beside it", () => {
    const folder = join(models, "tiny-embed");
    assert.equal(backendForPath(folder), "transformers");
    assert.equal(backendForPath(join(models, "churn-tree.onnx")), "onnx");
    const config = loadConfig({ modelPath: folder, cores: 2 });
    assert.equal(config.models.length, 0);
    const m = config.languageModels?.[0];
    assert.equal(m?.name, "tiny-embed");
    assert.equal(m?.backend, "transformers");
    assert.equal(m?.path, folder);
    assert.equal(m?.golden, join(models, "tiny-embed.golden.json"));
    assert.equal(m?.batching?.maxBatchRows, 64);
  });

  it("batch row limits default per kind (tensor 256, embeddings 64); a set value wins for both", () => {
    const tree = loadConfig({ modelPath: join(models, "churn-tree.onnx"), cores: 2 });
    assert.equal(tree.models[0]?.batching.maxBatchRows, 256);
    const set = { batchMaxRows: 16 };
    assert.equal(
      loadConfig({ modelPath: join(models, "churn-tree.onnx"), flags: set, cores: 2 }).models[0]?.batching
        .maxBatchRows,
      16,
    );
    const embed = loadConfig({ modelPath: join(models, "tiny-embed"), flags: set, cores: 2 });
    assert.equal(embed.languageModels?.[0]?.batching?.maxBatchRows, 16);
  });

  it("a config entry without backend resolves its path as the command line does (relative to the file)", () => {
    const dir = mkdtempSync(join(tmpdir(), "modelport-cfg-"));
    const file = join(dir, "m.yaml");
    const rel = (p: string) => relative(dir, p);
    const entries = [
      { name: "embed", path: rel(join(models, "tiny-embed")) },
      { name: "tree", path: rel(join(models, "churn-tree.onnx")) },
      { name: "llm", path: rel(join(models, "tiny-llama.gguf")) },
      { name: "pinned", backend: "onnx", path: rel(join(models, "churn-tree.onnx")) },
    ];
    writeFileSync(file, stringify({ models: entries }));
    // From another working directory: the path is the file's, not the process's.
    const config = loadConfig({ file, cwd: tmpdir(), cores: 4 });
    const backends = Object.fromEntries(
      [...config.models, ...(config.languageModels ?? [])].map((m) => [m.name, m.backend]),
    );
    assert.deepEqual(backends, { tree: "onnx", pinned: "onnx", embed: "transformers", llm: "llama-cpp" });
    for (const e of entries.filter((x) => !("backend" in x))) {
      const cli = loadConfig({ modelPath: join(dir, e.path), cores: 4 });
      const one = [...cli.models, ...(cli.languageModels ?? [])][0];
      assert.equal(one?.backend, backends[e.name], `${e.name}: the command line and the file agree`);
    }
  });

  it("--backend overrides the folder's guess", () => {
    const config = loadConfig({
      modelPath: join(models, "tiny-embed"),
      flags: { backend: "transformers" },
      cores: 2,
    });
    assert.equal(config.languageModels?.[0]?.backend, "transformers");
  });

  it("an upstream model takes its URL as path, and prices reach every model", () => {
    const dir = mkdtempSync(join(tmpdir(), "modelport-cfg-"));
    const file = join(dir, "m.yaml");
    writeFileSync(
      file,
      stringify({
        server: { pricePerHour: 0.5 },
        models: [
          { name: "tree", path: join(models, "churn-tree.onnx") },
          { name: "tree2", path: join(models, "churn-tree.onnx"), pricePerHour: 2 },
          {
            name: "hosted",
            backend: "upstream",
            upstream: { url: "https://api.example.com/v1", apiKeyEnv: "EXAMPLE_KEY" },
            pricePerMillionInputTokens: 0.15,
            pricePerMillionOutputTokens: 0.6,
          },
        ],
      }),
    );
    const config = loadConfig({ file, cores: 2 });
    assert.equal(config.models[0]?.pricePerHour, 0.5);
    assert.equal(config.models[1]?.pricePerHour, 2);
    const hosted = config.languageModels?.[0];
    assert.equal(hosted?.path, "https://api.example.com/v1");
    assert.equal(hosted?.threads, 0, "an upstream model takes no cores from the thread budget");
    assert.equal(hosted?.pricePerMillionInputTokens, 0.15);
    assert.equal(hosted?.pricePerMillionOutputTokens, 0.6);
    assert.deepEqual(hosted?.upstream, {
      url: "https://api.example.com/v1",
      apiKeyEnv: "EXAMPLE_KEY",
      timeoutMs: 60_000,
      retries: 3,
      backoffMs: 500,
      maxBackoffMs: 30_000,
      maxEventChars: 1_048_576,
      maxResponseBytes: 64 * 1024 * 1024,
    });
  });

  it("an upstream model without upstream.url is refused with the key", () => {
    const dir = mkdtempSync(join(tmpdir(), "modelport-cfg-"));
    const file = join(dir, "m.yaml");
    writeFileSync(file, stringify({ models: [{ name: "hosted", backend: "upstream", path: "x" }] }));
    assert.throws(
      () => loadConfig({ file, cores: 2 }),
      (err: ConfigError) =>
        err.problems.some((p) => /models\[0\]\.upstream: backend upstream needs upstream\.url/.test(p)),
    );
  });
});

describe("embedding pooling", () => {
  // Two rows, sequence 3, dim 2; the second row's last token is padding.
  const hidden = Float32Array.from([1, 0, 3, 0, 5, 0, 0, 2, 0, 4, 9, 9]);
  const mask = [1, 1, 1, 1, 1, 0];

  it("means over the attention mask and counts the tokens", () => {
    const { vectors, tokens } = pool(hidden, mask, 2, 3, 2, { pooling: "mean", normalize: false });
    assert.deepEqual(Array.from(vectors), [3, 0, 0, 3]);
    assert.deepEqual(Array.from(tokens), [3, 2]);
  });

  it("takes the first token for cls and normalises to unit length", () => {
    const { vectors } = pool(hidden, mask, 2, 3, 2, { pooling: "cls", normalize: true });
    assert.deepEqual(Array.from(vectors), [1, 0, 0, 1]);
  });

  it("reads pooling options with defaults and refuses unknown ones", () => {
    assert.deepEqual(embeddingOptions({}), { pooling: "mean", normalize: true });
    assert.throws(() => embeddingOptions({ pooling: "max" }), /options\.pooling must be "mean" or "cls"/);
  });
});
