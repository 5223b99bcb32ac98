// The file `modelport types` writes, from listings with the awkward cases: a model name and an
// input name that need quoting (and a description with a comment end in it), a scalar input (no
// rows), an input without a declared shape, BOOL and BYTES, a model not loaded (loose types), and
// language models. tsc must accept right uses and refuse wrong ones, line by line.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { type ModelListing, modelTypesSource } from "../../src/cli/model-types-ts.js";
import { REPO_ROOT } from "../helpers/server.js";

const LISTING: ModelListing = {
  data: [{ id: 'odd "name"*/' }, { id: "scaler" }, { id: "lazy" }, { id: "chat-a", kind: "language" }],
  models: [
    {
      name: 'odd "name"*/',
      backend: "custom",
      description: "ends a comment */ here",
      inputs: [
        { name: "flag-s", datatype: "BOOL", shape: [-1] },
        { name: "text", datatype: "BYTES" },
      ],
      outputs: [{ name: "out put", datatype: "BYTES", shape: [-1] }],
    },
    {
      name: "scaler",
      backend: "onnx",
      version: "3",
      inputs: [
        { name: "x", datatype: "FP32", shape: [-1, 2] },
        { name: "k", datatype: "FP32", shape: [] },
      ],
      outputs: [{ name: "y", datatype: "FP32", shape: [-1, 2] }],
    },
    { name: "lazy", backend: "onnx", inputs: [], outputs: [] },
  ],
};

function compile(files: Record<string, string>): { status: number | null; output: string } {
  const folder = mkdtempSync(join(tmpdir(), "modelport-types-unit-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(folder, name), text);
  writeFileSync(join(folder, "package.json"), JSON.stringify({ type: "module" }));
  writeFileSync(
    join(folder, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: [],
        lib: ["ES2022", "DOM"],
      },
      files: Object.keys(files),
    }),
  );
  const tsc = join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc");
  const run = spawnSync(process.execPath, [tsc, "-p", folder], { encoding: "utf8" });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

const HEAD = [
  `import { createClient } from ${JSON.stringify(join(REPO_ROOT, "dist", "client", "index.js"))};`,
  'import type { LanguageModel, Models } from "./models.js";',
  'const c = createClient<Models>({ baseUrl: "http://x" });',
];

describe("modelport types: the generated file", () => {
  const source = modelTypesSource(LISTING, "http://127.0.0.1:8080");

  it("declares each tensor model, quotes names, keeps comments closed, names the language models", () => {
    assert.match(source, /"odd \\"name\\"\*\/": \{/);
    assert.doesNotMatch(source, /ends a comment \*\/ here/);
    assert.match(source, /rows: never;/);
    assert.match(source, /export type LanguageModel = "chat-a";/);
  });

  it("tsc accepts right uses and refuses wrong ones, each on its own line", () => {
    const good = [
      ...HEAD,
      "export async function f() {",
      '  await c.predict(\'odd "name"*/\', { rows: [{ "flag-s": true, text: ["a", ["b"]] }] });',
      '  const r = await c.model("scaler").predict({ inputs: { x: [[1, 2]], k: 2 } });',
      "  const y: number[][] = r.outputs.y;",
      '  await c.predict("lazy", { inputs: { anything: 1 } });',
      '  const m: LanguageModel = "chat-a";',
      "  return [y, m];",
      "}",
    ].join("\n");
    const ok = compile({ "models.ts": source, "good.ts": good });
    assert.equal(ok.status, 0, ok.output);
    const bad = [
      ...HEAD,
      "export async function f() {",
      '  await c.model("scaler").predict({ rows: [[1, 2]] });',
      '  await c.predict(\'odd "name"*/\', { inputs: { "flag-s": [2], text: "t" } });',
      '  await c.predict(\'odd "name"*/\', { inputs: { "flag-s": [true], text: [1] } });',
      '  await c.model("scaler").predict({ inputs: { x: [1, 2], k: 2 } });',
      '  await c.model("scaler").predict({ rows: [[1]], inputs: { x: [[1, 2]], k: 2 } });',
      "}",
    ].join("\n");
    const refused = compile({ "models.ts": source, "bad.ts": bad });
    assert.notEqual(refused.status, 0);
    for (let line = 5; line <= 9; line++) {
      assert.match(
        refused.output,
        new RegExp(`bad\\.ts\\(${line},`),
        `line ${line} compiled:\n${refused.output}`,
      );
    }
  });
});
