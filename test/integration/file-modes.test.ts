// What modelport writes to disk is its owner's alone (src/private-files.ts): a real `modelport
// serve` under umask 022, with a key file, the SQLite job store (and the usage table in it),
// result blobs on the filesystem, payload capture to files and an audit log file, all under a
// temporary folder. Every writer is exercised, then the folder is walked while the server runs
// (SQLite's -wal and -shm exist then) and again after it stopped: every file 0600, every folder
// modelport made 0700, and a folder that existed before keeps the mode its owner gave it.
import assert from "node:assert/strict";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, before, describe, it } from "node:test";
import { createKey } from "../../src/tenants/key-file.js";
import { testModels } from "../helpers/models.js";
import { type ChildServer, startChild, waitReady } from "../helpers/server.js";
import { until } from "../helpers/until.js";

/** Every file and folder under `root` (not root itself), with its permission bits. */
function walk(root: string): { path: string; dir: boolean; mode: number }[] {
  const out: { path: string; dir: boolean; mode: number }[] = [];
  for (const name of readdirSync(root)) {
    const path = join(root, name);
    const stat = lstatSync(path);
    out.push({ path: relative(root, path), dir: stat.isDirectory(), mode: stat.mode & 0o777 });
    if (stat.isDirectory()) for (const e of walk(path)) out.push({ ...e, path: join(name, e.path) });
  }
  return out;
}

const octal = (mode: number) => `0${mode.toString(8)}`;

describe("file modes: what modelport writes is owner-only, whatever the umask", () => {
  let work: string;
  let data: string;
  let userDir: string;
  let server: ChildServer;
  let admin: string;
  let client: string;

  before(async () => {
    const models = await testModels();
    work = mkdtempSync(join(tmpdir(), "modelport-modes-"));
    mkdirSync(join(work, "conf"));
    data = join(work, "data");
    // A folder the user made for the captures: modelport writes into it and leaves its mode alone.
    userDir = join(work, "captures-of-mine");
    mkdirSync(userDir);
    chmodSync(userDir, 0o755);
    const keys = join(work, "conf", "keys.yaml");
    admin = createKey(keys, "ops", { role: "admin" }).key;
    client = createKey(keys, "team").key;
    const config = join(work, "conf", "modelport.yaml");
    writeFileSync(
      config,
      [
        "server:",
        `  keys: ${keys}`,
        `  auditLog: ${join(data, "audit", "audit.jsonl")}`,
        `  capture: {dir: ${userDir}}`,
        "models:",
        `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}, capture: {sampleRate: 1}}`,
        "jobs:",
        `  sqlitePath: ${join(data, "state", "jobs.db")}`,
        // Every result goes to the blob store.
        "  inlineResultMaxBytes: 1",
        `  blobs: {backend: fs, dir: ${join(data, "blobs")}}`,
      ].join("\n"),
    );
    // The server as a user starts it from a shell whose umask lets everyone read new files.
    server = await startChild(["-c", config], {}, 0, ["sh", "-c", 'umask 022 && exec "$@"', "sh"]);
    await waitReady(server.url);
  });
  after(async () => {
    await server?.stop();
  });

  it("job store with its -wal and -shm, usage, blobs, captures and audit log: files 0600, folders 0700", async () => {
    const as = (key: string) => ({ authorization: `Bearer ${key}`, "content-type": "application/json" });
    const rows = JSON.stringify({ rows: [[1, 2, 3, 1, 0, 4]] });
    // Capture and usage: a predict with a key.
    const predict = await fetch(`${server.url}/v1/models/churn-tree/predict`, {
      method: "POST",
      headers: as(client),
      body: rows,
    });
    assert.equal(predict.status, 200);
    // The job store and a result blob: a job run to its end.
    const submitted = (await (
      await fetch(`${server.url}/v1/models/churn-tree/jobs`, {
        method: "POST",
        headers: as(client),
        body: rows,
      })
    ).json()) as { id: string };
    const job = (await (
      await fetch(`${server.url}/v1/jobs/${submitted.id}?wait=30`, { headers: as(client) })
    ).json()) as { status: string; result_bytes?: number };
    assert.equal(job.status, "succeeded");
    const result = await fetch(`${server.url}/v1/jobs/${submitted.id}/result`, { headers: as(client) });
    assert.equal(result.status, 200, "the result comes back from the blob store");
    // The audit log: a management call refused for want of an admin key is audited.
    const refused = await fetch(`${server.url}/v2/repository/models/churn-tree/unload`, {
      method: "POST",
      headers: { authorization: `Bearer ${client}` },
    });
    assert.equal(refused.status, 403);
    // Usage reaches the store at its next flush.
    await until("usage flushed to the job store's file", async () => {
      const usage = (await (await fetch(`${server.url}/v1/usage`, { headers: as(admin) })).json()) as {
        data: { requests: number }[];
      };
      return usage.data.some((r) => r.requests > 0);
    });
    await until("the captured pair written", () => readdirSync(userDir).some((n) => n.endsWith(".jsonl")));
    assert.ok(existsSync(join(data, "audit", "audit.jsonl")));

    const running = walk(data);
    const names = running.map((e) => e.path);
    for (const expected of [
      join("state", "jobs.db"),
      join("state", "jobs.db-wal"),
      join("state", "jobs.db-shm"),
      join("audit", "audit.jsonl"),
      "blobs",
    ])
      assert.ok(names.includes(expected), `${expected} in ${names.join(", ")}`);
    assert.ok(
      running.some((e) => e.path.startsWith(join("blobs", "results")) && !e.dir),
      "a result blob",
    );
    for (const e of running)
      assert.equal(octal(e.mode), e.dir ? "0700" : "0600", `${e.dir ? "folder" : "file"} ${e.path}`);
    const captured = walk(userDir);
    assert.ok(captured.length > 0);
    for (const e of captured) assert.equal(octal(e.mode), "0600", `capture file ${e.path}`);
    assert.equal(octal(lstatSync(userDir).mode & 0o777), "0755", "a folder the user made keeps its mode");
    assert.equal(octal(lstatSync(data).mode & 0o777), "0700", "the folder modelport made for the paths");

    // Stopped: usage and captures flushed, the job store checkpointed; nothing else was left readable.
    assert.equal(await server.stop(), 0);
    for (const e of [...walk(data), ...walk(userDir).map((f) => ({ ...f, path: join(userDir, f.path) }))])
      assert.equal(octal(e.mode), e.dir ? "0700" : "0600", `after stop: ${e.path}`);
  });
});
