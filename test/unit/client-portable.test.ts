// modelport/client must run in browsers as well as on Node 20+: no import of a node: module (or
// of a bare Node built-in) anywhere in client/, from src/ only two modules that import nothing
// (the tensor types, the half-float conversion), and client/ type-checks with
// only the DOM and ES2022 libraries (client/tsconfig.json: no Node types, so no Buffer or process).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT } from "../helpers/server.js";

const CLIENT = join(REPO_ROOT, "client");
const SPECIFIER =
  /(?:^|[;\s])(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?["']([^"']+)["']|(?:import|require)\(\s*["']([^"']+)["']\s*\)/g;

function sources(): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of readdirSync(CLIENT)) {
    if (name.endsWith(".ts")) out.set(name, readFileSync(join(CLIENT, name), "utf8"));
  }
  return out;
}

/** Modules of src/ that import nothing and run anywhere, shared with the server instead of copied. */
const SHARED = ["../src/protocol/float16.js", "../src/tensor.js"];

describe("client/ is portable", () => {
  it("imports no node: module, no Node built-in, no package and from src/ only the dependency-free shared modules", () => {
    const files = sources();
    assert.ok(files.size >= 8, `only ${files.size} files in ${CLIENT}`);
    const builtins = new Set(builtinModules);
    let imports = 0;
    for (const [file, text] of files) {
      assert.doesNotMatch(text, /["']node:/, `${file} names a node: module`);
      for (const m of text.replace(/^\s*\/\/.*$/gm, "").matchAll(SPECIFIER)) {
        const spec = (m[1] ?? m[2])!;
        imports++;
        assert.ok(!builtins.has(spec), `${file} imports the Node built-in '${spec}'`);
        if (SHARED.includes(spec)) continue;
        assert.match(spec, /^\.\/[\w-]+\.js$/, `${file} imports '${spec}': only sibling files of client/`);
      }
    }
    // The two modules of src/ the client shares import nothing themselves.
    for (const spec of SHARED) {
      const text = readFileSync(join(CLIENT, spec.replace(/\.js$/, ".ts")), "utf8");
      assert.doesNotMatch(
        text.replace(/^\s*\/\/.*$/gm, ""),
        /^\s*(import|export .* from)\s/m,
        `${spec} imports something`,
      );
    }
    assert.ok(imports > 10, `only ${imports} imports seen: is the scanner reading the files?`);
  });

  it("type-checks with the DOM and ES2022 libraries only (no Node types)", () => {
    const tsc = join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc");
    const run = spawnSync(process.execPath, [tsc, "-p", join(CLIENT, "tsconfig.json")], { encoding: "utf8" });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
  });
});
