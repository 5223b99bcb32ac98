// Chaos: the disk holding the SQLite job file fills up while jobs are running. The file lives on a
// small tmpfs of the test's own (mounting needs root: without it the test is skipped, visibly);
// a filler file takes the rest of the space while jobs are in flight. Submissions must be refused
// quickly with 503 MP_ERR_JOB_STORE_UNAVAILABLE (not a 500, not a hang), the server must keep
// answering, jobs accepted before must not be lost (their completions fail while the disk is full
// and are retried under the lease), and once the filler is deleted submissions are accepted again
// and every accepted job ends succeeded.
//
// The tmpfs is 16 MiB, not 1: SQLite's write-ahead log grows to about 4 MiB (1000 pages) before a
// checkpoint folds it into the file, and each job writes several transactions, so on a 1 MiB disk
// the log itself fills it after a few dozen jobs and a checkpoint cannot run until more is freed.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { type ChildServer, startChild, waitReady } from "../helpers/server.js";
import {
  assertNothingLost,
  executions,
  type Submission,
  sleep,
  submit,
  until,
  writeConfig,
} from "./chaos.js";

const dir = mkdtempSync(join(tmpdir(), "modelport-chaos-disk-"));
const mnt = join(dir, "disk");
let mounted = false;
let server: ChildServer | undefined;

after(async () => {
  await server?.stop("SIGKILL");
  if (mounted) execFileSync("umount", ["-l", mnt]);
  rmSync(dir, { recursive: true, force: true });
});

/** Writes zeros to `file` until the filesystem refuses (ENOSPC); returns the bytes written. */
function fill(file: string): number {
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(64 * 1024);
  let written = 0;
  try {
    for (;;) written += writeSync(fd, chunk);
  } catch (err) {
    assert.equal((err as NodeJS.ErrnoException).code, "ENOSPC");
  } finally {
    closeSync(fd);
  }
  // Then the last few bytes, so not even a page is left.
  const small = openSync(`${file}.tail`, "w");
  try {
    for (;;) written += writeSync(small, Buffer.alloc(512));
  } catch {
  } finally {
    closeSync(small);
  }
  return written;
}

it("the SQLite file's disk full: 503 MP_ERR_JOB_STORE_UNAVAILABLE while full, nothing accepted lost, works again once space is freed", async (t) => {
  mkdirSync(mnt);
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt], { stdio: "pipe" });
    mounted = true;
  } catch (err) {
    t.skip(`cannot mount a tmpfs here (needs root): ${(err as Error).message.split("\n")[0]}`);
    return;
  }
  const log = join(dir, "executions.log");
  const config = writeConfig(join(dir, "modelport.yaml"), {
    executionsLog: log,
    waitMs: 50,
    jobs: [
      `sqlitePath: ${join(mnt, "jobs.db")}`,
      `blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "concurrency: 2",
      "leaseMs: 1000",
      "backoffBaseMs: 100",
      "maxAttempts: 10",
    ],
  });
  server = await startChild(["-c", config]);
  assert.equal((await waitReady(server.url)).status, 200, server.output().slice(-2000));

  // Jobs in flight when the disk fills.
  const subs: Submission[] = [];
  for (let i = 0; i < 40; i++) subs.push(await submit(server.url, i));
  assert.deepEqual(
    subs.filter((s) => s.status !== 202),
    [],
    "accepted while there is space",
  );
  const filler = join(mnt, "filler");
  const filled = fill(filler);
  const ranAtFull = executions(log).size;

  // Submissions while full: refused quickly with 503 (a few may still fit in pages SQLite holds).
  const whileFull: Submission[] = [];
  for (let i = 1000; i < 1200 && !whileFull.some((s) => s.status !== 202); i++)
    whileFull.push(await submit(server.url, i));
  const refused = whileFull.filter((s) => s.status !== 202);
  assert.ok(
    refused.length >= 1,
    `a submission was refused on a full disk: ${JSON.stringify(whileFull.slice(-3))}`,
  );
  for (const r of refused) {
    assert.equal(r.status, 503, JSON.stringify(r));
    assert.equal(r.code, "MP_ERR_JOB_STORE_UNAVAILABLE");
  }
  for (let i = 0; i < 10; i++) {
    const r = await submit(server.url, 2000 + i);
    whileFull.push(r);
    assert.equal(r.status, 503, `still refused while full: ${JSON.stringify(r)}`);
  }
  assert.equal((await fetch(`${server.url}/livez`)).status, 200, "the server answers");
  // Stay full past a lease: the jobs that were running fail to record results and renew leases,
  // and no job can be claimed (a claim is a write).
  await sleep(1500);
  const ranWhileFull = executions(log).size - ranAtFull;

  // Space is back: submissions are accepted again and every accepted job succeeds.
  rmSync(filler);
  rmSync(`${filler}.tail`);
  const afterFree: Submission[] = [];
  await until(async () => {
    const r = await submit(server!.url, 3000 + afterFree.length);
    afterFree.push(r);
    return r.status === 202;
  }, "accepted again after freeing space");
  for (let i = 0; i < 10; i++) afterFree.push(await submit(server.url, 4000 + i));
  assert.deepEqual(
    afterFree.slice(-10).filter((s) => s.status !== 202),
    [],
    "accepted once space is freed",
  );
  const accepted = [...subs, ...whileFull, ...afterFree].filter((s) => s.status === 202);
  await assertNothingLost(server.url, accepted, 60_000);
  assert.equal(server.proc.exitCode, null, "the server stayed up");
  t.diagnostic(
    `filler took ${Math.round(filled / 1024)} KiB; ${whileFull.length} submissions while full, ` +
      `${whileFull.filter((s) => s.status === 202).length} accepted, ${refused.length + 10} refused with 503; ` +
      `${ranAtFull} of the first 40 had started when the disk filled, ${ranWhileFull} started while full; ` +
      `${accepted.length} accepted in all, all succeeded`,
  );
});
