// Config for language models: .gguf paths pick llama-cpp, language models go to their own
// list with the llm defaults, and their threads count in the core budget.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { backendForPath } from "../../src/config/backends.js";
import { ConfigError, loadConfig } from "../../src/config/load.js";

const dir = mkdtempSync(join(tmpdir(), "modelport-llm-config-"));
writeFileSync(join(dir, "m.gguf"), "not read by loadConfig");
writeFileSync(join(dir, "t.onnx"), "not read by loadConfig");

function yaml(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

describe("language model config", () => {
  it("picks llama-cpp for .gguf, on the command line and in a file without `backend`", () => {
    assert.equal(backendForPath("/x/model.GGUF"), "llama-cpp");
    const single = loadConfig({ modelPath: join(dir, "m.gguf"), cores: 2 });
    assert.equal(single.models.length, 0);
    assert.equal(single.languageModels?.[0]?.backend, "llama-cpp");
    assert.equal(single.languageModels?.[0]?.name, "m");
    const file = yaml("a.yaml", "models:\n  - {name: t, path: t.onnx}\n  - {name: m, path: m.gguf}\n");
    const c = loadConfig({ file, cores: 2 });
    assert.deepEqual(
      c.models.map((m) => m.name),
      ["t"],
    );
    assert.deepEqual(
      c.languageModels?.map((m) => m.name),
      ["m"],
    );
  });

  it("fills the llm defaults and keeps what the file sets", () => {
    const file = yaml(
      "b.yaml",
      "models:\n  - {name: m, path: m.gguf, threads: 2, llm: {sequences: 4, chatTemplate: 'x'}}\n",
    );
    const m = loadConfig({ file, cores: 2 }).languageModels![0]!;
    assert.equal(m.threads, 2);
    assert.equal(m.llm.sequences, 4);
    assert.equal(m.llm.chatTemplate, "x");
    assert.equal(m.llm.contextSize, 2048);
    assert.equal(m.llm.maxWaiting, 16);
    assert.ok(Object.isFrozen(m.llm));
  });

  it("lists problems: llm on a tensor model, unknown llm keys, duplicate names across kinds, threads beyond the cores", () => {
    const file = yaml(
      "c.yaml",
      "models:\n  - {name: t, path: t.onnx, llm: {sequences: 2}}\n  - {name: t, path: m.gguf, threads: 4}\n",
    );
    assert.throws(
      () => loadConfig({ file, cores: 2 }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        const all = err.problems.join("\n");
        assert.match(all, /models\[0\]\.llm: applies only to backends llama-cpp/);
        assert.match(all, /models\[1\]\.name: 't' is already used by models\[0\]/);
        assert.match(all, /model 't': 1 process\(es\) × 4 threads = 4 > 2 cores/);
        return true;
      },
    );
    const bad = yaml("d.yaml", "models:\n  - {name: m, path: m.gguf, llm: {sequence: 2}}\n");
    assert.throws(() => loadConfig({ file: bad, cores: 2 }), /models\[0\]\.llm/);
  });

  it("prices: a llama.cpp model keeps pricePerHour (else the server's), token prices and batchPriceFactor", () => {
    const file = yaml(
      "prices.yaml",
      [
        "server: {pricePerHour: 0.5}",
        "models:",
        "  - {name: m, path: m.gguf, pricePerHour: 2, pricePerMillionInputTokens: 1, pricePerMillionOutputTokens: 3, batchPriceFactor: 0.5}",
        "  - {name: n, path: m.gguf}",
        "  - {name: t, path: t.onnx, batchPriceFactor: 0.25}",
        "",
      ].join("\n"),
    );
    const c = loadConfig({ file, cores: 4 });
    const [m, n] = c.languageModels!;
    assert.equal(m?.pricePerHour, 2);
    assert.equal(m?.pricePerMillionInputTokens, 1);
    assert.equal(m?.pricePerMillionOutputTokens, 3);
    assert.equal(m?.batchPriceFactor, 0.5);
    assert.equal(n?.pricePerHour, 0.5);
    assert.equal(c.models[0]?.batchPriceFactor, 0.25);
  });

  it("refuses pricePerHour on an upstream model and token prices on a tensor model, naming the key", () => {
    const file = yaml(
      "bad-prices.yaml",
      [
        "models:",
        "  - {name: u, backend: upstream, upstream: {url: 'https://api.example.com/v1'}, pricePerHour: 1}",
        "  - {name: t, path: t.onnx, pricePerMillionInputTokens: 1}",
        "",
      ].join("\n"),
    );
    assert.throws(
      () => loadConfig({ file, cores: 2 }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        const all = err.problems.join("\n");
        assert.match(all, /models\[0\]\.pricePerHour: an upstream model uses no machine time/);
        assert.match(all, /models\[1\]\.pricePerMillionInputTokens: applies only to language models/);
        return true;
      },
    );
  });
});
