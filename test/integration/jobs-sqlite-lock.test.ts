// Another process holding the SQLite job database's write lock must not freeze the server:
// store calls wait for it without blocking the event loop (/livez keeps answering), then either
// succeed once the lock is released or answer 503 MP_ERR_JOB_STORE_UNAVAILABLE after
// jobs.storeBusyRetryMs, never hang.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { postJson, REPO_ROOT } from "../helpers/server.js";
import { type JobsServer, startJobsServer } from "./jobs-harness.js";

const ROW = [3, 95, 4, 1, 0, 20];

/** A child process that takes the write lock (BEGIN IMMEDIATE) and holds it for `holdMs`. */
async function holdWriteLock(
  dbPath: string,
  holdMs: number,
): Promise<{ child: ChildProcess; released: Promise<void> }> {
  const script = `
    const Database = require("better-sqlite3");
    const binding = process.env.MODELPORT_SQLITE_BINDING;
    const db = new Database(process.argv[1], binding ? { nativeBinding: binding } : {});
    db.exec("BEGIN IMMEDIATE");
    process.stdout.write("locked\\n");
    setTimeout(() => { db.exec("COMMIT"); db.close(); process.stdout.write("released\\n"); }, Number(process.argv[2]));
  `;
  const child = spawn(process.execPath, ["-e", script, dbPath, String(holdMs)], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  const seen = (word: string) =>
    new Promise<void>((resolve, reject) => {
      const check = () => out.includes(word) && resolve();
      child.stdout!.on("data", (c: Buffer) => {
        out += c;
        check();
      });
      child.once("exit", (code) =>
        out.includes(word) ? resolve() : reject(new Error(`lock holder exited ${code}: ${out}`)),
      );
      check();
    });
  const released = seen("released");
  await seen("locked");
  return { child, released };
}

/** Probes /livez back to back until `stop` resolves; returns each probe's time in ms. */
async function probeLivez(url: string, stop: Promise<unknown>): Promise<number[]> {
  let done = false;
  void stop.then(() => {
    done = true;
  });
  const times: number[] = [];
  while (!done) {
    const t = performance.now();
    const res = await fetch(`${url}/livez`);
    await res.arrayBuffer();
    times.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 20));
  }
  return times;
}

describe("SQLite job store under another process's write lock", () => {
  const servers: JobsServer[] = [];
  after(async () => {
    for (const s of servers) await s.close();
  });

  it("a submit waits for the lock without freezing the server, then succeeds", async () => {
    const srv = await startJobsServer();
    servers.push(srv);
    // The database exists (and is open) before the lock is taken.
    const first = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] });
    assert.equal(first.status, 202);
    const { released } = await holdWriteLock(join(srv.dir, "jobs.db"), 3000);
    const submit = postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] });
    const times = await probeLivez(srv.url, released);
    const res = await submit;
    // Before: the synchronous driver waited up to 5 s inside one call, and every probe sent
    // meanwhile waited with it (2.7 s seen). A generous bound, far from that.
    assert.ok(times.length >= 5, `probes: ${times.length}`);
    assert.ok(Math.max(...times) < 1000, `slowest /livez ${Math.max(...times).toFixed(0)} ms`);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const done = (await (await fetch(`${srv.url}/v1/jobs/${res.body.id}?wait=20`)).json()) as any;
    assert.equal(done.status, "succeeded");
  });

  it("a lock held past jobs.storeBusyRetryMs: 503 MP_ERR_JOB_STORE_UNAVAILABLE, not a hang", async () => {
    const srv = await startJobsServer({ jobs: ["  storeBusyRetryMs: 300"] });
    servers.push(srv);
    assert.equal((await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] })).status, 202);
    const { released } = await holdWriteLock(join(srv.dir, "jobs.db"), 3000);
    const submit = postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] });
    const res = await Promise.race([submit, released.then(() => "released" as const)]);
    assert.notEqual(res, "released", "the submit was answered while the lock was still held");
    if (res === "released") return;
    assert.equal(res.status, 503);
    assert.equal(res.body.error.code, "MP_ERR_JOB_STORE_UNAVAILABLE");
    assert.match(res.body.error.message, /locked/);
    assert.ok(res.headers.get("retry-after"));
    await released;
    // Once released, the same submit goes through.
    assert.equal((await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] })).status, 202);
  });
});
