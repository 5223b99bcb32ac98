// modelport installed the way a user installs it: the package `npm pack` publishes, installed with
// `npm install <tarball> --omit=dev` into an empty folder, then `npx modelport serve` from there
// serving the example ONNX model, TypeScript handler, GGUF and embeddings folder. The install must
// stay within 500 MB (the lean step of bin/lean-install.js, run by npm as modelport's postinstall).
// What differs from a user's machine, because this one reaches only the npm registry:
//   - onnxruntime-node's own install step is told to skip its CUDA download
//     (ONNXRUNTIME_NODE_INSTALL=skip, as docs/Deploy.md says to on a CPU host);
//   - better-sqlite3's prebuilt binary, which npm fetches from GitHub, comes from a local mirror
//     serving this checkout's build of it (prebuild-install's documented binary-host variable), so
//     the install does not compile SQLite for a minute and a half.
// Packages come from npm's cache when it has them (--prefer-offline), from the registry otherwise.
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { assertListensThenReady, assertServesExamples, stageExamples } from "../helpers/examples.js";
import { freePort, REPO_ROOT } from "../helpers/server.js";

/** The environment of a user's shell: none of the npm_* variables `npm test` sets for this run. */
function userEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^npm_/i.test(k) && k !== "INIT_CWD" && k !== "ONNXRUNTIME_NODE_INSTALL") env[k] = v;
  return { ...env, ...extra };
}

/** A local stand-in for better-sqlite3's release downloads, serving this checkout's build. */
async function sqliteMirror(dir: string): Promise<{ server: Server; url: string }> {
  const version = JSON.parse(
    readFileSync(join(REPO_ROOT, "node_modules", "better-sqlite3", "package.json"), "utf8"),
  ).version;
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const tarball = join(dir, name);
  execFileSync("tar", [
    "czf",
    tarball,
    "-C",
    join(REPO_ROOT, "node_modules", "better-sqlite3"),
    "build/Release/better_sqlite3.node",
  ]);
  const server = createServer((req, res) => {
    if (req.url === `/v${version}/${name}`) res.end(readFileSync(tarball));
    else res.writeHead(404).end();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe("the packed package, installed with --omit=dev into an empty folder", () => {
  let root: string;
  let app: string;
  let installLog = "";
  let mirror: Server | undefined;
  let child: ChildProcess | undefined;

  before(async () => {
    root = mkdtempSync(join(tmpdir(), "modelport-packed-"));
    const packed = JSON.parse(
      execFileSync("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", root], {
        cwd: REPO_ROOT,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      }),
    )[0].filename as string;
    app = join(root, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "a-user-project", private: true }));
    const m = await sqliteMirror(root);
    mirror = m.server;
    const install = spawn(
      "npm",
      [
        "install",
        join(root, packed),
        "--omit=dev",
        "--no-audit",
        "--no-fund",
        "--prefer-offline",
        "--foreground-scripts",
      ],
      {
        cwd: app,
        env: userEnv({ ONNXRUNTIME_NODE_INSTALL: "skip", npm_config_better_sqlite3_binary_host: m.url }),
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    install.stdout!.on("data", (d) => (installLog += d));
    install.stderr!.on("data", (d) => (installLog += d));
    const [code] = await once(install, "exit");
    assert.equal(code, 0, installLog.slice(-4000));
  });

  after(async () => {
    if (child && child.exitCode === null) process.kill(-child.pid!, "SIGKILL");
    mirror?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("takes at most 500 MB, without GPU builds, other platforms' binaries or browser bundles", () => {
    const nm = join(app, "node_modules");
    assert.match(installLog, /modelport: removed \d+ MB/);
    for (const p of [
      "@node-llama-cpp/linux-x64-cuda/bins",
      "@node-llama-cpp/linux-x64-vulkan/bins",
      "onnxruntime-node/bin/napi-v6/win32/x64",
      "onnxruntime-web/dist",
      "typescript",
      "@biomejs/biome",
    ])
      assert.ok(!existsSync(join(nm, p)), `${p} is not installed`);
    assert.ok(existsSync(join(nm, `onnxruntime-node/bin/napi-v6/${process.platform}/${process.arch}`)));
    const kib = Number(execFileSync("du", ["-sk", nm], { encoding: "utf8" }).split("\t")[0]);
    console.log(`node_modules after the install: ${Math.round(kib / 1024)} MiB`);
    assert.ok(kib <= 500 * 1024, `node_modules is ${Math.round(kib / 1024)} MiB`);
  });

  it("serves an ONNX model, a TypeScript handler, a GGUF and an embeddings folder with `npx modelport serve`", async () => {
    const config = await stageExamples(join(root, "project"));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    let output = "";
    child = spawn("npx", ["modelport", "serve", "-c", config, "--port", String(port)], {
      cwd: app,
      env: userEnv({}),
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    child.stdout!.on("data", (d) => (output += d));
    child.stderr!.on("data", (d) => (output += d));
    await assertListensThenReady(url, () => output);
    await assertServesExamples(url);
    const exited = once(child, "exit");
    process.kill(-child.pid!, "SIGTERM");
    await exited;
  });
});
