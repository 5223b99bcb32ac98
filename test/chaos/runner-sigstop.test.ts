// Chaos: a runner frozen with SIGSTOP while it holds jobs. Split tiers (one `--role api`, two
// `--role runner`) meet through a redis-server of the test's own. Jobs go in through the API; once
// both runners are working, runner 1 is stopped mid-job. Its leases lapse (jobs.leaseMs) and runner
// 2 reclaims and finishes its jobs; every accepted job ends succeeded with its own result. Resumed
// with SIGCONT, runner 1 finishes the attempts it was holding, and those late results are refused:
// every job keeps exactly the one final result it had.
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

const JOBS = 120;
const dir = mkdtempSync(join(tmpdir(), "modelport-chaos-sigstop-"));
let redis: ChildProcess | undefined;
const children: ChildServer[] = [];

after(async () => {
  for (const c of children) {
    c.proc.kill("SIGCONT");
    await c.stop("SIGKILL");
  }
  if (redis) await stopProcess(redis, "SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

async function start(config: string, args: string[]): Promise<ChildServer> {
  const child = await startChild(["-c", config, ...args]);
  children.push(child);
  const ready = await waitReady(child.url, 30_000);
  assert.equal(ready.status, 200, `${JSON.stringify(ready.body)}\n${child.output().slice(-2000)}`);
  return child;
}

const resultPid = async (base: string, id: string): Promise<number> => {
  const body = (await (await fetch(`${base}/v1/jobs/${id}/result`)).json()) as {
    outputs: { pid: number[][] };
  };
  return body.outputs.pid[0]![0]!;
};

it("a runner SIGSTOPped holding jobs: they are reclaimed after the lease and run elsewhere; its late results are refused", async (t) => {
  if (!haveRedisServer()) {
    t.skip("redis-server is not installed (apt-get install redis-server)");
    return;
  }
  const port = await freePort();
  redis = await startRedis(port, dir);
  const log = join(dir, "executions.log");
  const config = writeConfig(join(dir, "modelport.yaml"), {
    executionsLog: log,
    waitMs: 100,
    server: ["runnerPollMs: 300", "drainTimeoutMs: 1000"],
    jobs: [
      "store: redis",
      `redisUrl: redis://127.0.0.1:${port}`,
      `redisPrefix: "chaos-stop-${process.pid}:"`,
      "concurrency: 4",
      "leaseMs: 1000",
      "backoffBaseMs: 100",
      `blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
    ],
  });
  const r1 = await start(config, ["--role", "runner", "--instance-id", "runner-1"]);
  const r2 = await start(config, ["--role", "runner", "--instance-id", "runner-2"]);
  const api = await start(config, ["--role", "api", "--runner", r1.url, "--runner", r2.url]);
  const pid1 = r1.proc.pid!;
  const pid2 = r2.proc.pid!;

  const subs: Submission[] = [];
  for (let i = 0; i < JOBS; i += 20)
    subs.push(...(await Promise.all(Array.from({ length: 20 }, (_, k) => submit(api.url, i + k)))));
  assert.deepEqual(
    subs.filter((s) => s.status !== 202),
    [],
    "every submission accepted",
  );

  // Freeze runner 1 just after it starts a job, so it is holding work. Should it have finished
  // everything it started in the meantime (a busy machine), let it go on and try again.
  const ranOn = (pid: number) => [...executions(log).values()].filter((pids) => pids.includes(pid)).length;
  await until(() => ranOn(pid1) >= 5 && ranOn(pid2) >= 5, "both runners working");
  const statusOf = async (input: number) => {
    const s = subs.find((x) => x.input === input)!;
    return ((await (await fetch(`${api.url}/v1/jobs/${s.id}`)).json()) as { status: string }).status;
  };
  let held: number[] = [];
  for (let tries = 0; held.length === 0; tries++) {
    assert.ok(tries < 20, "runner 1 was caught holding a job");
    const seen = ranOn(pid1);
    await until(() => ranOn(pid1) > seen, "runner 1 starts another job");
    r1.proc.kill("SIGSTOP");
    const lastOnR1 = [...executions(log).entries()].filter(([, pids]) => pids.at(-1) === pid1);
    held = [];
    for (const [input] of lastOnR1) if ((await statusOf(input)) === "running") held.push(input);
    if (held.length === 0) r1.proc.kill("SIGCONT");
  }

  await assertNothingLost(api.url, subs, 60_000);

  // The jobs runner 1 was running when it froze ran again on runner 2, whose result stands.
  const runs = executions(log);
  const pidsBefore = new Map<string, number>();
  for (const s of subs) pidsBefore.set(s.id!, await resultPid(api.url, s.id!));
  for (const input of held) {
    const s = subs.find((x) => x.input === input)!;
    const pids = runs.get(input)!;
    assert.deepEqual([pids[0], pids.at(-1)], [pid1, pid2], `job ${input} ran on runner 1, then on runner 2`);
    assert.equal(pidsBefore.get(s.id!), pid2, `job ${input}'s result came from runner 2`);
  }
  // Nothing else ran twice: only what the frozen runner held is repeated.
  const rerun = subs.filter((s) => (runs.get(s.input) ?? []).length > 1).map((s) => s.input);
  assert.deepEqual(rerun.sort(), [...held].sort(), "only the held jobs ran twice");

  // Resumed, runner 1 completes what it held; the store refuses those results.
  r1.proc.kill("SIGCONT");
  await sleep(1500);
  for (const s of subs)
    assert.equal(await resultPid(api.url, s.id!), pidsBefore.get(s.id!), `job ${s.input}`);
  await assertNothingLost(api.url, subs, 10_000);
  assert.equal(r1.proc.exitCode, null, "runner 1 survived the freeze");
  t.diagnostic(
    `${JOBS} jobs; runner 1 frozen holding ${held.length} running job(s), all re-run on runner 2 after the lease lapsed`,
  );
});
