// The install's lean step (bin/lean-install.js) on a node_modules laid out as npm lays out a
// user's install (modelport and its dependencies side by side): what it removes by default, what
// MODELPORT_INSTALL keeps, and that a tree it does not expect never fails the install.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { REPO_ROOT } from "../helpers/server.js";

const here = `${process.platform}/${process.arch}`;
const other = process.platform === "win32" ? "linux/x64" : "win32/x64";
const llamaPlatform = { linux: "linux", darwin: "mac", win32: "win" }[process.platform as string];
const cpu = `@node-llama-cpp/${llamaPlatform}-${process.arch}`;

const FILES = [
  `${cpu}/bins/llama.node`,
  `${cpu}-cuda/bins/llama.node`,
  `${cpu}-cuda-ext/bins/cuda.so`,
  `${cpu}-vulkan/bins/llama.node`,
  `onnxruntime-node/bin/napi-v6/${here}/onnxruntime_binding.node`,
  `onnxruntime-node/bin/napi-v6/${here}/libonnxruntime_providers_cuda.so`,
  `onnxruntime-node/bin/napi-v6/${other}/onnxruntime_binding.node`,
  "onnxruntime-web/dist/ort.wasm",
];

let root: string | undefined;
afterEach(() => root && rmSync(root, { recursive: true, force: true }));

/** A user's node_modules with modelport, node-llama-cpp and its builds, onnxruntime, transformers. */
function install(): string {
  root = mkdtempSync(join(tmpdir(), "modelport-lean-"));
  const nm = join(root, "node_modules");
  const pkg = (name: string, extra: object = {}) => {
    mkdirSync(join(nm, name), { recursive: true });
    writeFileSync(join(nm, name, "package.json"), JSON.stringify({ name, version: "1.0.0", ...extra }));
  };
  pkg("modelport");
  cpSync(join(REPO_ROOT, "bin", "lean-install.js"), join(nm, "modelport", "bin", "lean-install.js"));
  writeFileSync(join(nm, "modelport", "package.json"), JSON.stringify({ name: "modelport", type: "module" }));
  const builds = [cpu, `${cpu}-cuda`, `${cpu}-cuda-ext`, `${cpu}-vulkan`];
  pkg("node-llama-cpp", { optionalDependencies: Object.fromEntries(builds.map((b) => [b, "1.0.0"])) });
  for (const b of builds) pkg(b);
  for (const p of ["onnxruntime-node", "onnxruntime-web", "@huggingface/transformers"]) pkg(p);
  for (const f of FILES) {
    mkdirSync(dirname(join(nm, f)), { recursive: true });
    writeFileSync(join(nm, f), "x".repeat(1024));
  }
  return nm;
}

function lean(nm: string, env: Record<string, string> = {}) {
  const run = spawnSync(process.execPath, [join(nm, "modelport", "bin", "lean-install.js")], {
    encoding: "utf8",
    env: { PATH: process.env.PATH, ...env },
  });
  assert.equal(run.status, 0, run.stderr);
  return run.stdout + run.stderr;
}

const present = (nm: string) => FILES.filter((f) => existsSync(join(nm, f)));

describe("the install's lean step", () => {
  it("keeps only this platform's CPU builds by default, and every package.json", () => {
    const nm = install();
    const out = lean(nm);
    assert.deepEqual(present(nm), [
      `${cpu}/bins/llama.node`,
      `onnxruntime-node/bin/napi-v6/${here}/onnxruntime_binding.node`,
    ]);
    for (const p of [`${cpu}-cuda`, `${cpu}-vulkan`, "onnxruntime-web"])
      assert.ok(existsSync(join(nm, p, "package.json")), `${p} still installed for npm`);
    assert.match(out, /modelport: removed \d+ MB .*MODELPORT_INSTALL/);
  });

  it("keeps the CUDA builds with MODELPORT_INSTALL=cuda and the Vulkan one with vulkan", () => {
    const nm = install();
    lean(nm, { MODELPORT_INSTALL: "cuda" });
    const kept = present(nm);
    for (const f of [`${cpu}-cuda/bins/llama.node`, `${cpu}-cuda-ext/bins/cuda.so`])
      assert.ok(kept.includes(f), f);
    assert.ok(kept.includes(`onnxruntime-node/bin/napi-v6/${here}/libonnxruntime_providers_cuda.so`));
    assert.ok(!kept.includes(`${cpu}-vulkan/bins/llama.node`));
    const nm2 = install();
    lean(nm2, { MODELPORT_INSTALL: " Vulkan " });
    assert.ok(present(nm2).includes(`${cpu}-vulkan/bins/llama.node`));
    assert.ok(!present(nm2).includes(`${cpu}-cuda/bins/llama.node`));
  });

  it("keeps everything with MODELPORT_INSTALL=full, and --dry-run removes nothing", () => {
    const nm = install();
    lean(nm, { MODELPORT_INSTALL: "full" });
    assert.deepEqual(present(nm), FILES);
    const nm2 = install();
    const run = spawnSync(process.execPath, [join(nm2, "modelport", "bin", "lean-install.js"), "--dry-run"], {
      encoding: "utf8",
    });
    assert.equal(run.status, 0);
    assert.match(run.stdout, /would remove/);
    assert.deepEqual(present(nm2), FILES);
  });

  it("never fails an install: missing packages and an unreadable manifest leave it at exit 0", () => {
    const nm = install();
    rmSync(join(nm, "onnxruntime-web"), { recursive: true });
    rmSync(join(nm, "onnxruntime-node"), { recursive: true });
    writeFileSync(join(nm, "node-llama-cpp", "package.json"), "{ not json");
    const out = lean(nm);
    assert.match(out, /did not finish .*the install goes on/);
    assert.ok(existsSync(join(nm, `${cpu}-cuda/bins/llama.node`)), "nothing removed on a failed plan");
  });
});
