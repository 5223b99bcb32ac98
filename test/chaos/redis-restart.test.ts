// Chaos: the Redis job store restarts while jobs are being submitted and run. A redis-server of
// the test's own (AOF on, so a graceful restart keeps the data) serves a `modelport serve` child;
// submissions go on before, during and after the restart. Every submission answered 202 must end
// succeeded with its own result; submissions made while Redis is down get a retryable 503
// MP_ERR_JOB_STORE_UNAVAILABLE (never a 500 or a hang), and the server recovers without a restart.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { type ChildServer, freePort, startChild, waitReady } from "../helpers/server.js";
import {
  assertNothingLost,
  executions,
  haveRedisServer,
  type Submission,
  sleep,
  startRedis,
  stopProcess,
  submit,
  until,
  writeConfig,
} from "./chaos.js";

const dir = mkdtempSync(join(tmpdir(), "modelport-chaos-redis-"));
let redis: ChildProcess | undefined;
let server: ChildServer | undefined;

after(async () => {
  await server?.stop("SIGKILL");
  if (redis) await stopProcess(redis, "SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

it("Redis restarted mid-load: every accepted job succeeds, refusals meanwhile are 503 MP_ERR_JOB_STORE_UNAVAILABLE", async (t) => {
  if (!haveRedisServer()) {
    t.skip("redis-server is not installed (apt-get install redis-server)");
    return;
  }
  const port = await freePort();
  redis = await startRedis(port, dir);
  const log = join(dir, "executions.log");
  const config = writeConfig(join(dir, "modelport.yaml"), {
    executionsLog: log,
    jobs: [
      "store: redis",
      `redisUrl: redis://127.0.0.1:${port}`,
      `redisPrefix: "chaos-${process.pid}:"`,
      "concurrency: 4",
      "leaseMs: 2000",
      "backoffBaseMs: 100",
      "backoffMaxMs: 1000",
      "maxAttempts: 10",
      `blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
    ],
  });
  server = await startChild(["-c", config]);
  assert.equal((await waitReady(server.url)).status, 200, server.output().slice(-2000));

  // Submissions run in the background, 4 at a time, the whole time.
  const subs: Submission[] = [];
  let next = 0;
  let submitting = true;
  const submitter = async () => {
    while (submitting) {
      subs.push(await submit(server!.url, next++));
      await sleep(20); // a steady stream, not a flood: the point is the restart, not overload
    }
  };
  const load = Promise.all([submitter(), submitter(), submitter(), submitter()]);

  let beforeRestart = 0;
  try {
    await until(() => executions(log).size >= 40, "40 jobs ran before the restart");
    beforeRestart = subs.length;
    await stopProcess(redis); // SIGTERM: Redis's SHUTDOWN, AOF flushed
    await sleep(1500); // down long enough for submissions and completions to fail
    redis = await startRedis(port, dir);
    const restartedAt = subs.length;
    await until(
      () => subs.slice(restartedAt).filter((s) => s.status === 202).length >= 40,
      `accepting again; since the restart: ${JSON.stringify(subs.slice(restartedAt).slice(-5))}`,
    );
  } finally {
    submitting = false;
    await load;
  }

  const accepted = subs.filter((s) => s.status === 202);
  const refused = subs.filter((s) => s.status !== 202);
  t.diagnostic(
    `${subs.length} submissions (${beforeRestart} before the restart), ${accepted.length} accepted, ` +
      `${refused.length} refused: ${JSON.stringify([...new Set(refused.map((s) => `${s.status} ${s.code}`))])}`,
  );
  for (const r of refused) {
    assert.equal(r.status, 503, `a refusal during the outage: ${JSON.stringify(r)}`);
    assert.equal(r.code, "MP_ERR_JOB_STORE_UNAVAILABLE");
  }
  assert.ok(refused.length >= 1, "the outage was seen by submissions");

  await assertNothingLost(server.url, accepted);
  const runs = executions(log);
  const twice = accepted.filter((s) => (runs.get(s.input)?.length ?? 0) > 1);
  t.diagnostic(`jobs run more than once (at least once is the guarantee): ${twice.length}`);
  for (const s of accepted) assert.ok(runs.has(s.input), `job ${s.input} ran`);
  assert.equal(server.proc.exitCode, null, "the server stayed up");
});
