// The suite's own runner (test/run.ts with test/assertion-guard.ts and test/reporter.ts), run as
// `npm test` runs it on small test files written here: only *.test.js files run; a test with no
// assertion fails, also when its only assertion sat in a branch that did not run; a test file
// with no test fails the run; skips are listed with their reasons; and a clean set passes.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { REPO_ROOT } from "../helpers/server.js";

const RUN = join(REPO_ROOT, "dist", "test", "run.js");
const dirs: string[] = [];

after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Writes `files` (relative path → source) into a fresh folder and runs the runner on it. */
function runOn(files: Record<string, string>): { code: number | null; out: string } {
  const dir = mkdtempSync(join(tmpdir(), "modelport-runner-"));
  dirs.push(dir);
  for (const [name, source] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), source);
  }
  // Without the marker node sets for a test file's process, the runner starts a run of its own.
  const env = { ...process.env };
  delete env["NODE_TEST_CONTEXT"];
  const r = spawnSync(process.execPath, [RUN, dir], { encoding: "utf8", timeout: 120_000, env });
  return { code: r.status, out: r.stdout + r.stderr };
}

const HEAD = 'import assert from "node:assert/strict";\nimport { describe, it } from "node:test";\n';

describe("the test runner", () => {
  it("a clean set passes and keeps node's summary; helpers beside tests are not run as tests", () => {
    const { code, out } = runOn({
      "unit/a.test.js": `${HEAD}describe("a", () => { it("checks", () => { assert.equal(1 + 1, 2); }); });\n`,
      "deep/er/b.test.js": `${HEAD}it("checks in a helper", async () => { const { check } = await import("../../helpers/h.js"); check(); });\n`,
      "named.test.js":
        'import { equal } from "node:assert/strict";\nimport { it } from "node:test";\nit("named import", () => { equal(1, 1); });\n',
      "helpers/h.js":
        'import assert from "node:assert/strict";\nexport function check() { assert.ok(true); }\n',
      "helpers/not-a-test.js": 'throw new Error("only *.test.js files run");\n',
    });
    assert.equal(code, 0, out);
    assert.match(out, /^# tests 3$/m);
    assert.match(out, /^# pass 3$/m);
    assert.match(out, /^skipped tests: 0$/m);
  });

  it("a test without an assertion fails, also when its assertions sat in a branch that did not run", () => {
    const { code, out } = runOn({
      "x.test.js": `${HEAD}it("nothing checked", async () => { await new Promise((r) => setTimeout(r, 1)); });
it("only in a branch", () => { const ready = undefined; if (ready) assert.equal(ready.status, 503); });
it("checked", () => { assert.match("abc", /b/); assert.doesNotMatch("abc", /z/); });\n`,
    });
    assert.equal(code, 1, out);
    assert.match(out, /no assertion ran in test "nothing checked"/);
    assert.match(out, /no assertion ran in test "only in a branch"/);
    assert.match(out, /^# pass 1$/m);
    assert.match(out, /^# fail 2$/m);
  });

  it("a failed assertion points at the test's own line", () => {
    const { code, out } = runOn({ "y.test.js": `${HEAD}it("wrong", () => {\n  assert.equal(1, 2);\n});\n` });
    assert.equal(code, 1, out);
    assert.match(out, /y\.test\.js:4:10/);
  });

  it("skips are listed at the end with their reasons; a skipped test needs no assertion", () => {
    const { code, out } = runOn({
      "s.test.js": `${HEAD}describe("suite", () => {
  it("declared skip", { skip: "nginx is not installed" }, () => {});
  it("runtime skip", (t) => { t.skip("network namespaces need root"); });
  it("runs", () => { assert.ok(true); });
});\n`,
    });
    assert.equal(code, 0, out);
    const tail = out.slice(out.lastIndexOf("skipped tests:"));
    assert.match(tail, /^skipped tests: 2$/m);
    assert.match(tail, /suite › declared skip: nginx is not installed/);
    assert.match(tail, /suite › runtime skip: network namespaces need root/);
  });

  it("a test file that declares no test fails the run", () => {
    const { code, out } = runOn({
      "empty.test.js": "// nothing here\n",
      "ok.test.js": `${HEAD}it("checks", () => { assert.ok(true); });\n`,
    });
    assert.equal(code, 1, out);
    assert.match(out, /test files that ran no test: 1\n {2}- .*empty\.test/);
  });
});
