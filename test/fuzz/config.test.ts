// Fuzzes configuration loading: random YAML text, mutations of a valid config and random
// command-line flags go into loadConfig, which must return a Config or throw a ConfigError that
// lists at least one problem, never another exception; and key files (random text, mutations of a
// valid one) into readKeyFile, which must return valid entries or throw an Error naming the file.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { stringify } from "yaml";
import { ConfigError, loadConfig, type ServeFlags } from "../../src/config/load.js";
import { KEY_NAME, readKeyFile } from "../../src/tenants/key-file.js";
import { testModels } from "../helpers/models.js";
import { Deep, edgeNumber, edgeString, encode, type Json, mutated } from "./arbitraries.js";
import { caseCounts, check, runsFor, SHARES } from "./harness.js";

let dir: string;
let models: string;

before(async () => {
  models = await testModels();
  dir = mkdtempSync(join(tmpdir(), "modelport-fuzz-config-"));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** loadConfig's contract: a Config, or a ConfigError with its problems; anything else fails. */
function load(options: Parameters<typeof loadConfig>[0], what: () => string): void {
  try {
    loadConfig({ cwd: dir, cores: 2, env: {}, ...options });
  } catch (err) {
    if (err instanceof ConfigError) {
      assert.ok(err.problems.length > 0, `a ConfigError without problems: ${what()}`);
      for (const p of err.problems) assert.equal(typeof p, "string");
      return;
    }
    assert.fail(`loadConfig threw ${(err as Error)?.stack ?? String(err)}\nfor ${what()}`);
  }
}

/** YAML for configs without deep values (yaml's writer recurses per level), else JSON. */
function yamlOrJson(config: Json): string {
  const deep = (v: Json): boolean =>
    v instanceof Deep ||
    (v !== null && typeof v === "object" && Object.values(v).some((x) => deep(x as Json)));
  return deep(config) ? encode(config) : stringify(config, { aliasDuplicateObjects: false });
}

const validConfig = (): fc.Arbitrary<Json> =>
  fc.constant({
    server: { host: "127.0.0.1", port: 0, requestLogging: false },
    limits: { maxBodyBytes: 1048576, maxBatchRows: 64, timeoutMs: 1000 },
    jobs: { sqlitePath: "jobs.db", concurrency: 2, blobs: { backend: "fs", dir: "blobs" } },
    models: [
      {
        name: "tree",
        path: "MODELS/churn-tree.onnx",
        threads: 1,
        batching: { enabled: true, maxDelayMs: 2 },
      },
      { name: "llm", path: "MODELS/tiny-llama.gguf", llm: { contextSize: 256, sequences: 1 } },
      { name: "embed", backend: "transformers", path: "MODELS/tiny-embed" },
      { name: "up", backend: "upstream", upstream: { url: "http://127.0.0.1:1/v1" } },
    ],
  } as Json);

/** YAML-ish text: tabs, anchors, tags, merge keys, duplicate keys, garbage. */
const yamlText = fc.oneof(
  fc.string({ unit: "binary", maxLength: 200 }),
  fc
    .array(
      fc.constantFrom(
        "server:",
        "  port: !!str 1",
        "limits: &a {maxBatchRows: 1}",
        "jobs: *a",
        "<<: *a",
        "models:",
        "  - name: x",
        "    path: [",
        "\tport: 1",
        "models: []",
        "models: {}",
        "server: null",
        "server: 5",
        "!!binary aGVsbG8=",
        "? complex key",
        "%YAML 1.2",
        "---",
        "...",
        "models: [{name: a, path: b}, {name: a, path: b}]",
        "x: &x [*x]",
      ),
      { maxLength: 8 },
    )
    .map((lines) => lines.join("\n")),
);

const HASH = `sha256:${"ab".repeat(32)}`;
const validKeyFile = (): fc.Arbitrary<Json> =>
  fc.constant({
    keys: [
      {
        name: "team-a",
        hash: HASH,
        role: "client",
        models: ["tree"],
        limits: { requestsPerSecond: 5, burst: 10 },
      },
      { name: "ops", hash: `sha256:${"cd".repeat(32)}`, role: "admin" },
      { name: "scrape", hash: `sha256:${"ef".repeat(32)}`, role: "metrics" },
    ],
  } as Json);

/** Key-file-ish YAML lines: entries bent, duplicated, aliased. */
const keyFileText = fc
  .array(
    fc.constantFrom(
      "keys:",
      "keys: []",
      "keys: null",
      "keys: 5",
      `  - {name: a, hash: "${HASH}"}`,
      `  - {name: a, hash: "${HASH}", role: root}`,
      `  - {name: m, hash: "${HASH}", role: metrics, models: [tree]}`,
      `  - {name: "a b", hash: "${HASH}"}`,
      "  - {name: b, hash: sha256:XYZ}",
      `  - &e {name: c, hash: "${HASH}"}`,
      "  - *e",
      `  - {name: d, hash: "${HASH}", limits: {burst: -1, concurrent: 1.5}}`,
      `  - {name: e, hash: "${HASH}", models: [], limits: null}`,
      "extra: 1",
      "<<: {keys: []}",
      "---",
    ),
    { maxLength: 6 },
  )
  .map((lines) => lines.join("\n"));

describe("loadConfig", () => {
  it("random YAML text yields a Config or a ConfigError listing problems", () =>
    check(
      "configText",
      fc.property(yamlText, fc.nat(), (text, n) => {
        const file = join(dir, `text-${n % 8}.yaml`);
        writeFileSync(file, text);
        load({ file }, () => JSON.stringify(text));
      }),
    ));

  it("mutated config files and random flags yield a Config or a ConfigError listing problems", () =>
    check(
      "config",
      fc.property(
        mutated(validConfig()),
        fc.record(
          {
            port: edgeNumber,
            threads: edgeNumber,
            maxBatchRows: edgeNumber,
            maxBodyBytes: edgeNumber,
            timeoutMs: edgeNumber,
            processes: edgeNumber,
            apiKeys: fc.array(edgeString, { maxLength: 2 }),
            role: edgeString,
            runners: fc.array(edgeString, { maxLength: 2 }),
            logLevel: edgeString,
          },
          { requiredKeys: [] },
        ),
        fc.nat(),
        (config, flags, n) => {
          const file = join(dir, `mutated-${n % 8}.yaml`);
          // JSON is YAML too, and is what deep values can be written as (yaml's writer recurses).
          const text = (n % 2 ? encode(config) : yamlOrJson(config)).replaceAll("MODELS", models);
          writeFileSync(file, text);
          load({ file, flags: flags as ServeFlags }, () => `${text}\nflags ${JSON.stringify(flags)}`);
        },
      ),
    ));

  // Found by the property above: flags were written into `server` and `limits` whatever the file
  // had there, so a number threw a TypeError and a string of API keys was split into one key per
  // character.
  it("a section that is not a mapping is a listed problem, with or without flags", () => {
    const cases: [string, ServeFlags, RegExp][] = [
      ["limits: 5", { maxBatchRows: 8 }, /limits/],
      ["limits: 5", {}, /limits/],
      ["server: 5", { port: 0 }, /server/],
      ["server: [1]", {}, /server/],
      ["server: {apiKeys: 5}", { apiKeys: ["k"] }, /apiKeys/],
      ["server: {apiKeys: secret-key}", {}, /apiKeys/],
      ["server: {runners: 5}", {}, /runners/],
    ];
    for (const [yaml, flags, problem] of cases) {
      const file = join(dir, "section.yaml");
      writeFileSync(file, `${yaml}\nmodels: [{name: tree, path: ${join(models, "churn-tree.onnx")}}]\n`);
      assert.throws(
        () => loadConfig({ file, flags, cwd: dir, cores: 2, env: {} }),
        (err: unknown) => err instanceof ConfigError && err.problems.some((p) => problem.test(p)),
        `${yaml} with ${JSON.stringify(flags)}`,
      );
    }
  });

  // Found by the property above with deep values: yaml's composer recurses once per level, so a
  // config nested a few thousand deep threw a RangeError, or ended the process (V8 gave up
  // compiling a regular expression near the stack's end).
  it("a config nested thousands deep, in flow or block style, is a listed problem", () => {
    const tree = join(models, "churn-tree.onnx");
    const cases: Record<string, string> = {
      "flow mappings": `{"limits":${'{"a":'.repeat(5000)}1${"}".repeat(5000)},"models":[{"name":"t","path":"${tree}"}]}`,
      "flow lists": `models: [{name: t, path: ${tree}, threads: ${"[".repeat(20_000)}1${"]".repeat(20_000)}}]`,
      "block lists": `x:\n${Array.from({ length: 3000 }, (_, i) => `${" ".repeat(i + 1)}- `).join("\n")}1\nmodels: []`,
      "compact block lists": `x:\n  ${"- ".repeat(20_000)}1\nmodels: [{name: t, path: ${tree}}]`,
    };
    for (const [what, text] of Object.entries(cases)) {
      const file = join(dir, "deep.yaml");
      writeFileSync(file, text);
      assert.throws(
        () => loadConfig({ file, cwd: dir, cores: 2, env: {} }),
        (err: unknown) =>
          err instanceof ConfigError && err.problems.some((p) => /deeper than 64 levels/.test(p)),
        what,
      );
    }
  });

  it("random and mutated key files yield valid keys or an Error naming the file", () =>
    check(
      "keyFile",
      fc.property(
        fc.oneof(
          yamlText,
          keyFileText,
          fc
            .tuple(mutated(validKeyFile()), fc.boolean())
            .map(([k, json]) => (json ? encode(k) : yamlOrJson(k))),
        ),
        fc.nat(),
        (text, n) => {
          const file = join(dir, `keys-${n % 8}.yaml`);
          writeFileSync(file, text);
          let keys: ReturnType<typeof readKeyFile>;
          try {
            keys = readKeyFile(file);
          } catch (err) {
            assert.ok(
              err instanceof Error &&
                err.constructor === Error &&
                err.message.startsWith(`key file ${file}: `),
              `readKeyFile threw ${(err as Error)?.stack ?? String(err)}\nfor ${JSON.stringify(text.slice(0, 500))}`,
            );
            return;
          }
          for (const k of keys) {
            assert.match(k.name, KEY_NAME);
            assert.match(k.hash, /^sha256:[0-9a-f]{64}$/);
            assert.ok(k.role === "admin" || k.role === "client" || k.role === "metrics");
            // A metrics key uses no model: a file giving it models is refused, never half-read.
            assert.ok(k.role !== "metrics" || k.models === undefined, `${k.name}: a metrics key with models`);
          }
          assert.equal(new Set(keys.map((k) => k.name)).size, keys.length, "names are unique");
        },
      ),
    ));

  it("a key file nested thousands deep is refused for its depth", () => {
    const file = join(dir, "deep-keys.yaml");
    for (const text of [
      `keys: ${"[".repeat(20_000)}1${"]".repeat(20_000)}`,
      `keys:\n  ${"- ".repeat(20_000)}1\n`,
      `{"keys":${'{"a":'.repeat(5000)}1${"}".repeat(5000)}}`,
    ]) {
      writeFileSync(file, text);
      assert.throws(() => readKeyFile(file), /deeper than 64 levels/, text.slice(0, 40));
    }
  });

  it("the properties' shares add up to the whole suite", () => {
    const total = Object.values(SHARES).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(total - 1) < 1e-9, `shares add up to ${total}`);
  });

  it("ran each property's share of the suite's cases", (t) => {
    t.diagnostic(`cases: ${JSON.stringify(caseCounts())}`);
    assert.deepEqual(caseCounts(), {
      configText: runsFor("configText"),
      config: runsFor("config"),
      keyFile: runsFor("keyFile"),
    });
  });
});
