// limits.hardTimeoutMs: optional at server and model level, validated like every limit, and
// when absent derived from the model's own timeoutMs as max(2 × timeoutMs, 60 s).
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ConfigError, loadConfig } from "../../src/config/load.js";
import { hardTimeoutMs } from "../../src/config/schema.js";

function configFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "modelport-hard-timeout-"));
  writeFileSync(join(dir, "h.ts"), "export function load() {} export function predict() {}\n");
  const file = join(dir, "modelport.yaml");
  writeFileSync(file, text);
  return file;
}

describe("limits.hardTimeoutMs", () => {
  it("defaults to max(2 × timeoutMs, 60 s); an explicit value wins", () => {
    assert.equal(hardTimeoutMs({ timeoutMs: 1000 }), 60_000);
    assert.equal(hardTimeoutMs({ timeoutMs: 45_000 }), 90_000);
    assert.equal(hardTimeoutMs({ timeoutMs: 45_000, hardTimeoutMs: 5000 }), 5000);
  });

  it("is read per model, over the server-wide limits, and the default follows the model's timeoutMs", () => {
    const file = configFile(
      [
        "limits: { hardTimeoutMs: 120000 }",
        "models:",
        "  - { name: a, backend: custom, path: h.ts }",
        "  - { name: b, backend: custom, path: h.ts, limits: { hardTimeoutMs: 2500 } }",
        "",
      ].join("\n"),
    );
    const c = loadConfig({ file, env: {} });
    assert.equal(hardTimeoutMs(c.models[0]!.limits), 120_000);
    assert.equal(hardTimeoutMs(c.models[1]!.limits), 2500);
    const derived = loadConfig({
      file: configFile(
        "models:\n  - { name: a, backend: custom, path: h.ts, limits: { timeoutMs: 50000 } }\n",
      ),
      env: {},
    });
    assert.equal(hardTimeoutMs(derived.models[0]!.limits), 100_000);
  });

  it("must be a positive integer", () => {
    const file = configFile(
      "models:\n  - { name: a, backend: custom, path: h.ts, limits: { hardTimeoutMs: 0 } }\n",
    );
    assert.throws(() => loadConfig({ file, env: {} }), ConfigError);
  });
});
