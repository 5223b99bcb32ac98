// Keeping API keys off the command line: --api-key-file FILE (one key per line) works like
// --api-key, and a key given with --api-key is masked in /proc/PID/cmdline (what `ps` shows
// other users) once the server has started, with a warning that names the safer options.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type ChildServer, postJson, startChild, waitReady } from "../helpers/server.js";

let dir: string;
let model: string;
const children: ChildServer[] = [];
const body = { rows: [[1, 2, 3, 1, 0, 4]] };

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-keys-"));
  model = join(await testModels(), "churn-tree.onnx");
});
after(async () => {
  for (const c of children) await c.stop("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

describe("API keys off the command line", () => {
  it("--api-key-file: each key on a line works; none is 401", async () => {
    const file = join(dir, "keys");
    writeFileSync(file, "# keys for modelport\nfirst-key-from-file\n\n  second-key-from-file  \n");
    const child = await startChild([model, "--api-key-file", file], { MODELPORT_API_KEYS: "" });
    children.push(child);
    await waitReady(child.url);
    const url = `${child.url}/v1/models/churn-tree/predict`;
    assert.equal((await postJson(url, body)).status, 401);
    assert.equal((await postJson(url, body, { authorization: "Bearer # keys for modelport" })).status, 401);
    for (const key of ["first-key-from-file", "second-key-from-file"])
      assert.equal((await postJson(url, body, { authorization: `Bearer ${key}` })).status, 200, key);
    assert.doesNotMatch(readFileSync(`/proc/${child.proc.pid}/cmdline`, "utf8"), /key-from-file/);
  });

  it("--api-key-file that cannot be read: exit 2 with the file named", async () => {
    const missing = join(dir, "no-such-file");
    await assert.rejects(startChild([model, "--api-key-file", missing]), (err: Error) => {
      assert.match(err.message, /exited with 2/);
      assert.match(err.message, /--api-key-file .*no-such-file/);
      return true;
    });
  });

  it("--api-key: the key still works, is masked in /proc/PID/cmdline, and a warning says so", async () => {
    const key = "cmdline-secret-key-4711";
    const child = await startChild([model, "--api-key", key], { MODELPORT_API_KEYS: "" });
    children.push(child);
    await waitReady(child.url);
    const cmdline = readFileSync(`/proc/${child.proc.pid}/cmdline`, "utf8");
    assert.doesNotMatch(cmdline, /cmdline-secret/);
    assert.match(cmdline, /--api-key \*\*\*/);
    const url = `${child.url}/v1/models/churn-tree/predict`;
    assert.equal((await postJson(url, body, { authorization: `Bearer ${key}` })).status, 200);
    assert.equal((await postJson(url, body)).status, 401);
    assert.match(child.output(), /--api-key-file/);
  });
});
