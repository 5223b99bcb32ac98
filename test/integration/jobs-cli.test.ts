// `modelport jobs list|show|cancel|retry|purge`: the real CLI binary on the real SQLite job store
// of a running server (the store takes the CLI as a second writer), then with the server gone.
// Retention: `jobs purge` without --older-than uses jobs.retentionMs and deletes finished jobs
// and their result blobs, never queued or running ones.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { writeControlHandler } from "../fixtures/handlers.js";
import { CLI, type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;
let dir: string;
let config: string;
let blobs: string;

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `modelport jobs ARGS` in the test's folder. */
function cli(args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, "jobs", ...args],
      { cwd: dir, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

async function cliJson(args: string[]): Promise<any> {
  const r = await cli([...args, "--json"]);
  assert.equal(r.code, 0, `jobs ${args.join(" ")}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const api = async (path: string, init?: RequestInit) => {
  const res = await fetch(`${srv.url}${path}`, init);
  return { status: res.status, body: (await res.json()) as any };
};

/** Polls until `pred` holds for the job (state-based; generous bound for a busy machine). */
async function waitJob(id: string, pred: (job: any) => boolean, what: string): Promise<any> {
  const deadline = Date.now() + 60_000;
  let job: any;
  while (Date.now() < deadline) {
    job = (await api(`/v1/jobs/${id}?wait=2`)).body;
    if (pred(job)) return job;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`job ${id} never became ${what}: ${JSON.stringify(job)}`);
}

const submit = async (x: number, rows = 1, extra: Record<string, unknown> = {}) => {
  const r = await postJson(`${srv.url}/v1/models/ctl/jobs`, {
    rows: Array.from({ length: rows }, () => [x]),
    ...extra,
  });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.id as string;
};

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-jobs-cli-"));
  blobs = join(dir, "blobs");
  const handler = writeControlHandler(dir);
  config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "server:",
      "  drainTimeoutMs: 1000",
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${blobs}}`,
      "  concurrency: 1",
      "  maxAttempts: 1",
      "  leaseMs: 1000",
      // Results over 300 bytes go to the blob store, so purge has blobs to delete.
      "  inlineResultMaxBytes: 300",
      // Everything finished is already past retention: `jobs purge -c` with no --older-than purges it.
      "  retentionMs: 1",
      "models:",
      `  - {name: ctl, backend: custom, path: ${handler}, options: {dir: ${dir}, log: ${join(dir, "calls.log")}}}`,
    ].join("\n"),
  );
  srv = await startInProcess({ file: config });
});

after(async () => {
  // Release any blocked call so the drain does not wait on it.
  for (let i = 1; i <= 9; i++) writeFileSync(join(dir, `gate-${i}`), "");
  await srv.close();
});

describe("modelport jobs (CLI)", () => {
  it("no action prints the usage and exits 2; --help exits 0", async () => {
    const none = await cli([]);
    assert.equal(none.code, 2);
    assert.match(none.stdout, /Usage: modelport jobs <list\|show\|cancel\|retry\|purge>/);
    assert.equal((await cli(["--help"])).code, 0);
  });

  it("a missing store is reported, exit 1", async () => {
    const r = await cli(["list", "--db", join(dir, "nowhere.db")]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no job store at .*nowhere\.db/);
  });

  it("list (filters, cursor pages) and show agree with the HTTP API while the server runs", async () => {
    const ok1 = await submit(1, 200);
    await waitJob(ok1, (j) => j.status === "succeeded", "succeeded");
    const ok2 = await submit(2);
    await waitJob(ok2, (j) => j.status === "succeeded", "succeeded");
    writeFileSync(join(dir, "fail"), "");
    const bad = await submit(666);
    await waitJob(bad, (j) => j.status === "failed", "failed");

    const all = await cliJson(["list", "-c", config]);
    const ids = all.jobs.map((j: any) => j.id);
    assert.deepEqual(ids, [bad, ok2, ok1], "newest first");
    assert.deepEqual(all.jobs, (await api("/v1/jobs")).body.jobs);

    const failed = await cliJson(["list", "-c", config, "--status", "failed"]);
    assert.deepEqual(
      failed.jobs.map((j: any) => j.id),
      [bad],
    );
    assert.equal(failed.jobs[0].last_error.code, "MP_ERR_HANDLER_FAILED");
    assert.deepEqual((await cliJson(["list", "-c", config, "--model", "other"])).jobs, []);

    const page1 = await cliJson(["list", "-c", config, "--limit", "2"]);
    assert.equal(page1.jobs.length, 2);
    assert.ok(page1.next_cursor);
    const page2 = await cliJson(["list", "-c", config, "--limit", "2", "--cursor", page1.next_cursor]);
    assert.deepEqual(
      [...page1.jobs, ...page2.jobs].map((j: any) => j.id),
      ids,
    );
    assert.equal(page2.next_cursor, undefined);

    // The text form: one line per job with its id, status and the failed one's error code.
    const text = await cli(["list", "--db", join(dir, "jobs.db")]);
    assert.equal(text.code, 0, text.stderr);
    const lines = text.stdout.trim().split("\n");
    assert.equal(lines.length, 3);
    assert.match(lines[0]!, new RegExp(`^${bad}\\s+failed\\s+ctl\\s+attempts 1/1 .*MP_ERR_HANDLER_FAILED$`));
    assert.match(lines[2]!, new RegExp(`^${ok1}\\s+succeeded`));

    const shown = await cliJson(["show", ok1, "-c", config]);
    assert.deepEqual(shown, (await api(`/v1/jobs/${ok1}`)).body);
    assert.ok(shown.result_bytes > 300, "the 200-row result went to the blob store");
    const missing = await cli(["show", "00000000-0000-0000-0000-000000000000", "-c", config]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /MP_ERR_JOB_NOT_FOUND/);
    const unknown = await cli(["frobnicate", "-c", config]);
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.match(unknown.stderr, /unknown jobs action 'frobnicate'/);
    // A usage error is a usage error whether or not a store exists yet.
    const unknownNoStore = await cli(["frobnicate", "--db", join(tmpdir(), "modelport-no-such-store.db")]);
    assert.equal(unknownNoStore.code, 2, unknownNoStore.stderr);
    const noId = await cli(["show", "-c", config]);
    assert.equal(noId.code, 2);
    assert.match(noId.stderr, /needs a job ID/);
  });

  it("cancel: a queued job at once; a running one is stopped by its server; a final one is left alone", async () => {
    const blocker = await submit(-1);
    await waitJob(blocker, (j) => j.status === "running", "running");
    const queued = await submit(3);
    assert.equal((await api(`/v1/jobs/${queued}`)).body.status, "queued");

    const q = await cli(["cancel", queued, "-c", config]);
    assert.equal(q.code, 0, q.stderr);
    assert.equal(q.stdout, `canceled ${queued}\n`);
    assert.equal((await api(`/v1/jobs/${queued}`)).body.status, "canceled");

    const r = await cli(["cancel", blocker, "-c", config]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `cancel requested for running job ${blocker}\n`);
    assert.equal((await api(`/v1/jobs/${blocker}`)).body.cancel_requested, true);
    // The server notices the request in the store when it renews the lease (every leaseMs / 3 =
    // 333 ms here); the call already computing then finishes and its result is discarded. Release
    // it only after several renewals, so the job cannot have finished before the notice.
    await new Promise((r) => setTimeout(r, 3000));
    writeFileSync(join(dir, "gate-1"), "");
    const ended = await waitJob(blocker, (j) => j.status !== "running", "final");
    assert.equal(ended.status, "canceled");

    const succeeded = (await cliJson(["list", "-c", config, "--status", "succeeded", "--limit", "1"]))
      .jobs[0];
    const final = await cli(["cancel", succeeded.id, "-c", config]);
    assert.equal(final.code, 0, final.stderr);
    assert.equal(final.stdout, `${succeeded.id} is already succeeded\n`);
    assert.deepEqual((await api(`/v1/jobs/${succeeded.id}`)).body, succeeded);
    const result = await api(`/v1/jobs/${queued}/result`);
    assert.equal(result.body.error.code, "MP_ERR_JOB_NOT_SUCCEEDED");
  });

  it("retry: a failed job goes back to the queue with fresh attempts and the server runs it again", async () => {
    const failed = (await cliJson(["list", "-c", config, "--status", "failed"])).jobs[0];
    assert.ok(failed, "a failed job from the list test");
    rmFail();
    const r = await cliJson(["retry", failed.id, "-c", config]);
    assert.equal(r.status, "queued");
    assert.equal(r.attempts, 0);
    const done = await waitJob(failed.id, (j) => ["succeeded", "failed"].includes(j.status), "final");
    assert.equal(done.status, "succeeded", JSON.stringify(done));
    assert.deepEqual((await api(`/v1/jobs/${failed.id}/result`)).body.outputs.y, [[1332]]);
  });

  it("purge: --older-than keeps recent jobs; with the config's retentionMs finished jobs and their blobs go, queued ones stay", async () => {
    const blocker = await submit(-2);
    await waitJob(blocker, (j) => j.status === "running", "running");
    const waiting = await submit(4);
    const results = join(blobs, "results");
    const blobFiles = () => (existsSync(results) ? readdirSync(results) : []);
    assert.ok(blobFiles().length > 0, "the 200-row result is a blob");

    const keep = await cli(["purge", "-c", config, "--older-than", "1h"]);
    assert.equal(keep.code, 0, keep.stderr);
    assert.match(keep.stdout, /^purged 0 finished job\(s\) older than 3600 s/);
    assert.equal((await cliJson(["purge", "-c", config, "--older-than", "7d"])).purged, 0);
    const bad = await cli(["purge", "-c", config, "--older-than", "soon"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--older-than must look like/);

    const before = (await api("/v1/jobs?limit=100")).body.jobs;
    const finished = before.filter((j: any) => ["succeeded", "failed", "canceled"].includes(j.status));
    assert.ok(finished.length >= 4, JSON.stringify(before.map((j: any) => j.status)));
    const purged = await cliJson(["purge", "-c", config]);
    assert.equal(purged.purged, finished.length);

    const left = (await api("/v1/jobs?limit=100")).body.jobs.map((j: any) => j.id).sort();
    assert.deepEqual(left, [blocker, waiting].sort(), "only the running and the queued job are left");
    for (const j of finished) assert.equal((await api(`/v1/jobs/${j.id}`)).status, 404);
    assert.deepEqual(blobFiles(), [], "their result blobs are deleted too");

    writeFileSync(join(dir, "gate-2"), "");
    assert.equal((await waitJob(waiting, (j) => j.status === "succeeded", "succeeded")).status, "succeeded");
  });

  it("works with the server stopped (the store is a file)", async () => {
    await srv.close();
    const page = await cliJson(["list", "-c", config]);
    assert.ok(page.jobs.length >= 2);
    const id = page.jobs[0].id;
    const shown = await cliJson(["show", id, "-c", config]);
    assert.equal(shown.id, id);
    assert.equal((await cliJson(["purge", "-c", config])).purged, page.jobs.length);
    assert.deepEqual((await cliJson(["list", "-c", config])).jobs, []);
  });
});

/** From now on the control handler's x = 666 succeeds. */
function rmFail(): void {
  rmSync(join(dir, "fail"), { force: true });
}
