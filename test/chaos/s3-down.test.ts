// Chaos: the S3 server that holds job results goes down while jobs are finishing. Every result
// goes to the blob store (jobs.inlineResultMaxBytes: 1); an s3rver of the test's own is stopped
// mid-load and started again on the same port with the same data. A result upload that fails is a
// retryable attempt failure: the job is retried with backoff and succeeds once S3 is back. Every
// 202-accepted job ends succeeded with its own result, read through the presigned URL.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { BUCKET, CREDENTIALS } from "../helpers/s3.js";
import { type ChildServer, freePort, startChild, waitReady } from "../helpers/server.js";
import {
  assertNothingLost,
  executions,
  type Submission,
  sleep,
  submit,
  until,
  writeConfig,
} from "./chaos.js";

interface S3rverInstance {
  run(): Promise<unknown>;
  close(): Promise<void>;
  httpServer?: Server;
}
type S3rverCtor = new (options: {
  address: string;
  port: number;
  silent: boolean;
  directory: string;
  configureBuckets: { name: string }[];
}) => S3rverInstance;
const S3rver = createRequire(import.meta.url)("s3rver") as S3rverCtor;

const dir = mkdtempSync(join(tmpdir(), "modelport-chaos-s3-"));
let s3: S3rverInstance | undefined;
let server: ChildServer | undefined;

/** s3rver on `port`, its data in one folder that outlives a restart. */
async function startS3At(port: number): Promise<S3rverInstance> {
  const instance = new S3rver({
    address: "127.0.0.1",
    port,
    silent: true,
    directory: join(dir, "s3"),
    configureBuckets: [{ name: BUCKET }],
  });
  await instance.run();
  return instance;
}

/** Down at once: close() alone waits for the clients' keep-alive connections. */
async function stopS3(instance: S3rverInstance): Promise<void> {
  const closed = instance.close();
  instance.httpServer?.closeAllConnections();
  await closed;
}

after(async () => {
  await server?.stop("SIGKILL");
  if (s3) await stopS3(s3).catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

it("S3 down during result upload: uploads fail as retryable attempts, and every accepted job succeeds once S3 is back", async (t) => {
  const port = await freePort();
  s3 = await startS3At(port);
  const log = join(dir, "executions.log");
  const config = writeConfig(join(dir, "modelport.yaml"), {
    executionsLog: log,
    jobs: [
      `sqlitePath: ${join(dir, "jobs.db")}`,
      "concurrency: 4",
      "maxAttempts: 10",
      "backoffBaseMs: 200",
      "backoffMaxMs: 1000",
      "inlineResultMaxBytes: 1",
      `blobs: {backend: s3, bucket: ${BUCKET}, endpoint: "http://127.0.0.1:${port}", forcePathStyle: true}`,
    ],
  });
  server = await startChild(["-c", config], {
    AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
    AWS_REGION: "us-east-1",
  });
  assert.equal((await waitReady(server.url)).status, 200, server.output().slice(-2000));

  const subs: Submission[] = [];
  let next = 0;
  let submitting = true;
  const submitter = async () => {
    while (submitting) {
      subs.push(await submit(server!.url, next++));
      await sleep(20);
    }
  };
  const load = Promise.all([submitter(), submitter()]);
  let errorsWhileDown: string[] = [];
  try {
    await until(() => executions(log).size >= 30, "30 jobs ran with S3 up");
    await stopS3(s3);
    s3 = undefined;
    const downAt = executions(log).size;
    // Down until jobs have run (and failed to upload) meanwhile, at least 1.5 s.
    await sleep(1500);
    await until(() => executions(log).size >= downAt + 8, "jobs ran while S3 was down");
    const list = (await (await fetch(`${server.url}/v1/jobs?limit=100`)).json()) as {
      jobs: { last_error?: { code: string; message: string } | null }[];
    };
    errorsWhileDown = [...new Set(list.jobs.flatMap((j) => (j.last_error ? [j.last_error.code] : [])))];
    s3 = await startS3At(port);
    const upAt = subs.length;
    await until(() => subs.length >= upAt + 20, "20 more submissions with S3 back");
  } finally {
    submitting = false;
    await load;
  }

  const accepted = subs.filter((s) => s.status === 202);
  assert.deepEqual(
    subs.filter((s) => s.status !== 202),
    [],
    "submissions do not depend on S3",
  );
  await assertNothingLost(server.url, accepted, 60_000);
  const runs = executions(log);
  const retried = accepted.filter((s) => (runs.get(s.input)?.length ?? 0) > 1).length;
  assert.ok(retried >= 1, "jobs whose upload failed ran again");
  t.diagnostic(
    `${accepted.length} jobs accepted, all succeeded; ${retried} ran more than once (upload failed while S3 was down); ` +
      `last_error codes during the outage: ${JSON.stringify(errorsWhileDown)}`,
  );
  assert.equal(server.proc.exitCode, null, "the server stayed up");
});
