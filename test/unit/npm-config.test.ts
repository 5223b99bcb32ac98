// npm in this checkout: `npx modelport` prints no npm warning (the project has no .npmrc key npm
// does not know), while every install this repository runs still skips onnxruntime-node's CUDA
// download (.ci/run, the Dockerfile, README's checkout install), through ONNXRUNTIME_NODE_INSTALL.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT } from "../helpers/server.js";

const read = (name: string) => readFileSync(join(REPO_ROOT, name), "utf8");

describe("npm configuration", () => {
  it("npx modelport in the checkout prints the version and no npm warning", () => {
    const r = spawnSync("npx", ["--no", "modelport", "version"], {
      cwd: REPO_ROOT,
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^\d+\.\d+\.\d+\n$/);
    assert.doesNotMatch(r.stderr, /npm warn/i);
    if (existsSync(join(REPO_ROOT, ".npmrc"))) assert.doesNotMatch(read(".npmrc"), /onnxruntime/);
  });

  it("every install here skips onnxruntime-node's CUDA download", () => {
    const ci = read(".ci/run");
    const skip = ci.indexOf("export ONNXRUNTIME_NODE_INSTALL=skip");
    assert.ok(skip >= 0 && skip < ci.indexOf("npm ci"), ".ci/run exports it before its first npm ci");
    const docker = read("Dockerfile");
    const arg = docker.indexOf("ARG ONNXRUNTIME_NODE_INSTALL=skip");
    assert.ok(arg >= 0 && arg < docker.indexOf("RUN npm ci"), "the Dockerfile sets it before npm ci");
    assert.match(read("README.md"), /`ONNXRUNTIME_NODE_INSTALL=skip npm ci`/);
  });
});
