// The container image, built and run where a container engine answers (`docker info`); where
// none does (this machine: no daemon, and base images cannot be pulled), the test says so and
// skips that part. Either way it replays the image's install steps (Dockerfile): the runtime
// stage's files (package.json, bin/, dist/src, dist/client, dist/ui and node_modules pruned
// with `npm prune --omit=dev`, the install's lean step (bin/lean-install.js) and the
// Dockerfile's own removals of build leftovers, at most 500 MB) in a clean folder
// owned by root, served by an unprivileged user (nobody) from a writable state folder, models
// and config in a folder it can only read: the example ONNX model, TypeScript handler, GGUF and
// embeddings folder answer, /livez is what the HEALTHCHECK asks, and SIGTERM drains to exit 0.
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { assertListensThenReady, assertServesExamples, stageExamples } from "../helpers/examples.js";
import { freePort, REPO_ROOT } from "../helpers/server.js";

// What the Dockerfile's build stage removes itself (better-sqlite3's build leftovers), read from
// it: the replay removes the same.
const PRUNED = [
  ...readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8")
    .replace(/\\\n/g, " ")
    .matchAll(/\snode_modules\/(\S+)/g),
].map((m) => m[1]!);

describe("container image", () => {
  it("builds and answers /livez in a container engine", (t) => {
    const info = spawnSync("docker", ["info"], { encoding: "utf8", timeout: 10_000 });
    if (info.status !== 0) {
      t.skip(
        `no container engine answers here (docker info: ${(info.stderr || String(info.error ?? "")).trim().split("\n")[0]}); the image's install steps are replayed below instead`,
      );
      return;
    }
    const tag = `modelport-test:${process.pid}`;
    execFileSync("docker", ["build", "-t", tag, "."], {
      cwd: REPO_ROOT,
      stdio: "inherit",
      timeout: 1_200_000,
    });
    const out = execFileSync("docker", ["run", "--rm", "--read-only", "--tmpfs", "/tmp", tag, "--version"], {
      encoding: "utf8",
    });
    assert.match(out, /\d+\.\d+\.\d+/);
  });
});

describe("the image's install steps, replayed in a clean folder as an unprivileged user", () => {
  let root: string;
  let child: ChildProcess | undefined;
  let url: string;

  before(async () => {
    root = mkdtempSync(join(tmpdir(), "modelport-image-"));
    chmodSync(root, 0o755);
    const app = join(root, "app");
    mkdirSync(app);
    for (const p of ["package.json", "package-lock.json", "bin", "dist/src", "dist/client", "dist/ui"])
      cpSync(join(REPO_ROOT, p), join(app, p), { recursive: true });
    // Hard links: the copy costs no disk; npm prune and rm only unlink in the copy.
    execFileSync("cp", ["-al", join(REPO_ROOT, "node_modules"), join(app, "node_modules")]);
    execFileSync("npm", ["prune", "--omit=dev", "--no-audit", "--no-fund", "--ignore-scripts"], {
      cwd: app,
      stdio: "ignore",
    });
    // The lean step as `npm ci` ran it in the build stage (the checkout's own node_modules may
    // have been installed without it).
    execFileSync(process.execPath, [join(app, "bin", "lean-install.js")], { stdio: "ignore" });
    for (const p of PRUNED) rmSync(join(app, "node_modules", p), { recursive: true, force: true });
    // Models and config: readable, not writable, by the server's user.
    const mount = join(root, "models");
    const config = await stageExamples(mount);
    execFileSync("chmod", ["-R", "a+rX,go-w", root]);
    const state = join(root, "state");
    mkdirSync(state);
    const asRoot = process.getuid?.() === 0;
    if (asRoot) execFileSync("chown", ["nobody", state]);
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const cmd = [process.execPath, join(app, "bin", "modelport.js"), "serve", "-c", config];
    cmd.push("--port", String(port), "--log-format", "json");
    // As root: the server runs as nobody (spawn's uid and gid, so SIGTERM reaches it directly).
    const user = asRoot
      ? {
          uid: Number(execFileSync("id", ["-u", "nobody"], { encoding: "utf8" })),
          gid: Number(execFileSync("id", ["-g", "nobody"], { encoding: "utf8" })),
        }
      : {};
    child = spawn(cmd[0]!, cmd.slice(1), {
      cwd: state,
      env: { PATH: process.env.PATH, NODE_ENV: "production", HOME: state },
      stdio: ["ignore", "ignore", "inherit"],
      ...user,
    });
  });

  after(async () => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
    rmSync(root, { recursive: true, force: true });
  });

  it("the pruned install holds no dev dependency and no GPU build, in at most 500 MB", () => {
    const app = join(root, "app", "node_modules");
    assert.ok(PRUNED.includes("better-sqlite3/deps"), PRUNED.join(" "));
    for (const p of [
      "@biomejs/biome",
      "playwright-core",
      "preact",
      "@node-llama-cpp/linux-x64-cuda/bins",
      ...PRUNED,
    ])
      assert.ok(!existsSync(join(app, p)), `${p} is not installed`);
    const kib = Number(execFileSync("du", ["-sk", app], { encoding: "utf8" }).split("\t")[0]);
    assert.ok(kib <= 500 * 1024, `node_modules is ${Math.round(kib / 1024)} MiB`);
  });

  it("serves an ONNX model, a TypeScript handler, a GGUF and an embeddings folder; ready only when all pass", async () => {
    await assertListensThenReady(url);
    assert.equal((await fetch(`${url}/livez`)).status, 200, "the HEALTHCHECK's probe");
    await assertServesExamples(url);
  });

  it("drains and exits 0 on SIGTERM", async () => {
    const exited = once(child!, "exit");
    child!.kill("SIGTERM");
    const [code] = await exited;
    assert.equal(code, 0);
  });
});
