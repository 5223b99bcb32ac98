// modelport/client must run in browsers as well as on Node 20+: no import of a node: module (or
// of a bare Node built-in) anywhere in client/, nothing from src/, and client/ type-checks with
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

describe("client/ is portable", () => {
  it("imports no node: module, no Node built-in, nothing outside client/ and no package", () => {
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
        assert.match(spec, /^\.\/[\w-]+\.js$/, `${file} imports '${spec}': only sibling files of client/`);
      }
    }
    assert.ok(imports > 10, `only ${imports} imports seen: is the scanner reading the files?`);
  });

  it("type-checks with the DOM and ES2022 libraries only (no Node types)", () => {
    const tsc = join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc");
    const run = spawnSync(process.execPath, [tsc, "-p", join(CLIENT, "tsconfig.json")], { encoding: "utf8" });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
  });
});
