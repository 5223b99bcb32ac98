// What `npm pack` would publish: every entry point package.json names (main, exports, bin) and
// the files the server reads at run time (the Redis job store's Lua scripts, the gRPC .proto,
// the dashboard's bundle) are in it, and no test or benchmark is. A `files` list that forgot
// one would publish a package that cannot start.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT } from "../helpers/server.js";

describe("the published package", () => {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  const files = new Set((JSON.parse(out)[0].files as { path: string }[]).map((f) => f.path));

  it("holds every entry point: main, each export, each bin", () => {
    const targets = [pkg.main, ...Object.values(pkg.bin as Record<string, string>)];
    for (const e of Object.values(pkg.exports as Record<string, Record<string, string>>))
      targets.push(...Object.values(e));
    for (const t of targets) assert.ok(files.has(t.replace(/^\.\//, "")), `${t} is not packed`);
  });

  it("holds the script its install step runs (a user's install fails without it)", () => {
    const script = /^node (\S+)$/.exec(pkg.scripts.postinstall)?.[1];
    assert.ok(script, `postinstall runs one node script: ${pkg.scripts.postinstall}`);
    assert.ok(files.has(script!), `${script} is not packed`);
  });

  it("holds the files read at run time, and no tests or benchmarks", () => {
    for (const f of [
      "dist/src/grpc/inference.proto",
      "dist/src/jobs/stores/redis-lua/claim.lua",
      "dist/ui/index.html",
      "dist/ui/app.js",
      "dist/ui/app.css",
    ])
      assert.ok(files.has(f), `${f} is not packed`);
    assert.ok(
      ![...files].some(
        (f) => f.startsWith("dist/test/") || f.startsWith("test/") || f.startsWith("dist/bench/"),
      ),
    );
  });
});
