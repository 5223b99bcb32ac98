#!/usr/bin/env node
// modelport's install step (package.json "postinstall"): removes what CPU serving on this machine
// never loads from the installed dependencies, so that a default install stays under 500 MB
// (~300 MB on Linux x64) instead of ~1.33 GB:
//   - llama.cpp's CUDA and Vulkan builds and its builds for other platforms (node-llama-cpp
//     installs every build for the OS as optional packages; modelport runs GGUF models on the CPU);
//   - onnxruntime-node's binaries for other platforms, and its CUDA execution provider when its
//     own install script fetched one;
//   - onnxruntime-web's browser bundles (@huggingface/transformers depends on it, but its Node build
//     carries its own copy and loads onnxruntime-node).
// Each package keeps its package.json (only binaries and bundles go), so npm still sees it
// installed and later installs do not bring the files back. What to keep is chosen at install
// time with MODELPORT_INSTALL (a comma-separated list): "cuda" keeps the CUDA builds (a GPU host
// with `device: cuda`), "vulkan" the Vulkan build, "full" everything (an install copied to another
// platform). To change it, remove node_modules and install again. This step never fails an install: a problem is printed
// and the install goes on with the files in place. `node bin/lean-install.js --dry-run` lists
// what it would remove.
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const keep = new Set(
  (process.env.MODELPORT_INSTALL ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean),
);
const dryRun = process.argv.includes("--dry-run");

/** The folder of a package as Node's lookup from `from` finds it, or undefined when not installed. */
function packageDir(name, from) {
  const paths = createRequire(join(from, "noop.js")).resolve.paths(name) ?? [];
  return paths.map((p) => join(p, name)).find((d) => existsSync(join(d, "package.json")));
}

/** What to remove: [path, why] pairs. */
function plan() {
  const here = dirname(dirname(fileURLToPath(import.meta.url)));
  const out = [];
  const platform = { linux: "linux", darwin: "mac", win32: "win" }[process.platform];
  const wanted = new Set([`${platform}-${process.arch}`, `${platform}-${process.arch}-metal`]);
  if (keep.has("cuda"))
    wanted.add(`${platform}-${process.arch}-cuda`).add(`${platform}-${process.arch}-cuda-ext`);
  if (keep.has("vulkan")) wanted.add(`${platform}-${process.arch}-vulkan`);

  const llama = packageDir("node-llama-cpp", here);
  const llamaPkg = llama && JSON.parse(readFileSync(join(llama, "package.json"), "utf8"));
  for (const name of Object.keys(llamaPkg?.optionalDependencies ?? {})) {
    const dir = name.startsWith("@node-llama-cpp/") && packageDir(name, llama);
    if (dir && !wanted.has(name.slice("@node-llama-cpp/".length)) && existsSync(join(dir, "bins")))
      out.push([join(dir, "bins"), "a llama.cpp build modelport does not load here"]);
  }

  const ort = packageDir("onnxruntime-node", here);
  const napi = ort && join(ort, "bin", "napi-v6");
  if (napi && existsSync(napi))
    for (const os of readdirSync(napi))
      for (const arch of readdirSync(join(napi, os))) {
        const dir = join(napi, os, arch);
        if (os !== process.platform || arch !== process.arch)
          out.push([dir, "onnxruntime-node for another platform"]);
        else if (!keep.has("cuda"))
          for (const f of readdirSync(dir))
            if (/providers_(cuda|tensorrt|shared)/.test(f))
              out.push([join(dir, f), "onnxruntime's CUDA provider"]);
      }

  const transformers = packageDir("@huggingface/transformers", here);
  const web = transformers && packageDir("onnxruntime-web", transformers);
  if (web && existsSync(join(web, "dist")))
    out.push([join(web, "dist"), "onnxruntime-web's browser bundles"]);
  return out;
}

function size(path) {
  const s = statSync(path, { throwIfNoEntry: false });
  if (!s) return 0;
  if (!s.isDirectory()) return s.size;
  let n = 0;
  for (const f of readdirSync(path)) n += size(join(path, f));
  return n;
}

try {
  if (keep.has("full")) process.exit(0);
  let bytes = 0;
  for (const [path, why] of plan()) {
    const n = size(path);
    bytes += n;
    if (dryRun) console.log(`${(n / 2 ** 20).toFixed(1).padStart(7)} MB  ${path}  (${why})`);
    else rmSync(path, { recursive: true, force: true });
  }
  if (bytes > 0)
    console.log(
      `modelport: ${dryRun ? "would remove" : "removed"} ${Math.round(bytes / 2 ** 20)} MB that CPU serving on ${process.platform}-${process.arch} does not load (MODELPORT_INSTALL=cuda, vulkan or full keeps it; see docs/Deploy.md)`,
    );
} catch (err) {
  console.warn(
    `modelport: the install step that removes unused builds did not finish (${err?.message ?? err}); the install goes on`,
  );
}
