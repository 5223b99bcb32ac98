// The split deployment for real: one `--role api` process and two `--role runner` processes,
// meeting through Redis. 500 jobs go in through the API while synchronous predicts keep flowing;
// one runner is SIGKILLed part-way. Every job must still succeed (on the survivor once the
// victim is gone), sync requests keep succeeding (at most a retryable 503 while the death is
// detected), and the victim, restarted at its address, rejoins the rotation. That runs twice: on
// loopback ports with the environment's Redis, and with each runner in its own network namespace
// (own address, both on port 8080, reaching a private Redis and the API tier only over a veth
// link, as separate machines would). Where namespaces cannot be made (root and iproute2 needed)
// the second is skipped with the reason, which `npm test` lists at the end.
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { createNamespaces, type Namespace, removeNamespaces } from "../helpers/netns.js";
import { deletePrefix, redisUrl, uniquePrefix } from "../helpers/redis.js";
import { type ChildServer, freePort, postJson, REPO_ROOT, startChild, waitReady } from "../helpers/server.js";

const HANDLER = join(REPO_ROOT, "dist", "examples", "handlers", "latency-handler.js");
const JOBS = 500;

const children: ChildServer[] = [];
let dir: string;
/** The environment's Redis, for the loopback runs. */
let sharedRedis: string;
const prefix = uniquePrefix("scale-out");

/** Runner "machines": network namespaces with a private Redis reachable from them, or why not. */
let spaces: Namespace[] | undefined;
let noSpaces = "";
let privateRedis: ChildProcess | undefined;
let privateRedisPort: number;
const REDIS_PASSWORD = `mp-test-${process.pid}`;

interface Deployment {
  config: string;
  /** Each handler call appends "INPUT PID". */
  executions: string;
  /** Where processes of this deployment find Redis (from namespace `ns` when given). */
  redisUrl(ns?: Namespace): string;
}

/** A config for one deployment, with its own executions log. */
function deployment(name: string, redisUrlFor: (ns?: Namespace) => string): Deployment {
  const executions = join(dir, `${name}.executions.log`);
  writeFileSync(executions, "");
  const config = join(dir, `${name}.yaml`);
  writeFileSync(
    config,
    `server:
  drainTimeoutMs: 2000
  runnerPollMs: 300
jobs:
  store: redis
  redisPrefix: "${prefix}${name}:"
  concurrency: 4
  leaseMs: 1500
  backoffBaseMs: 100
models:
  - name: latency
    backend: custom
    path: ${HANDLER}
    options:
      waitMs: 50
      executionsLog: ${executions}
`,
  );
  return { config, executions, redisUrl: redisUrlFor };
}

let loopback: Deployment;

/** Starts `modelport serve -c config ARGS`, in namespace `ns` (port 8080 at its address) when given. */
async function start(d: Deployment, args: string[], port = 0, ns?: Namespace): Promise<ChildServer> {
  const where = ns ? ["--host", ns.address] : [];
  const child = await startChild(
    ["-c", d.config, ...where, ...args],
    { REDIS_URL: d.redisUrl(ns) },
    ns ? 8080 : port,
    ns?.exec,
  );
  children.push(child);
  const ready = await waitReady(child.url);
  assert.equal(ready.status, 200, `${JSON.stringify(ready.body)}\n${child.output().slice(-2000)}`);
  return child;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-scale-"));
  sharedRedis = await redisUrl();
  loopback = deployment("loopback", () => sharedRedis);
  const made = createNamespaces(2);
  if ("reason" in made) {
    noSpaces = made.reason;
    return;
  }
  spaces = made.spaces;
  // The environment's Redis listens where the namespaces cannot reach (this machine's loopback):
  // the "machines" get a Redis of their own on the veth links, with a password as a shared one has.
  if (spawnSync("redis-server", ["--version"]).error) {
    noSpaces = "the namespace run needs redis-server (a Redis reachable over the veth links)";
    return;
  }
  privateRedisPort = await freePort();
  const bind = ["127.0.0.1", ...spaces.map((ns) => ns.hostAddress)];
  privateRedis = spawn(
    "redis-server",
    [
      "--port",
      String(privateRedisPort),
      "--bind",
      ...bind,
      "--requirepass",
      REDIS_PASSWORD,
      "--save",
      "",
      "--appendonly",
      "no",
    ],
    { stdio: "ignore" },
  );
  for (let i = 0; i < 100 && !(await reachable(privateRedisPort)); i++)
    await new Promise((r) => setTimeout(r, 50));
});

after(async () => {
  for (const c of children) await c.stop("SIGKILL");
  privateRedis?.kill("SIGKILL");
  if (spaces) removeNamespaces(spaces);
  if (sharedRedis) await deletePrefix(sharedRedis, prefix);
});

async function reachable(port: number): Promise<boolean> {
  const { connect } = await import("node:net");
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1", () => {
      s.destroy();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });
}

async function jobStatus(api: string, id: string): Promise<{ status: string; attempts: number }> {
  const res = await fetch(`${api}/v1/jobs/${id}`);
  return (await res.json()) as { status: string; attempts: number };
}

/** The 500-job scenario with a runner SIGKILLed part-way, runners in `ns` when given. */
async function killScenario(t: TestContext, d: Deployment, ns?: Namespace[]): Promise<void> {
  const first = children.length;
  try {
    await runKillScenario(t, d, ns);
  } finally {
    // Its processes go with it, so a later scenario has the machine (and port 8080) to itself.
    for (const c of children.splice(first)) await c.stop("SIGKILL");
  }
}

async function runKillScenario(t: TestContext, d: Deployment, ns?: Namespace[]): Promise<void> {
  t.diagnostic(
    ns
      ? `runners in network namespaces at ${ns.map((n) => `${n.address}:8080`).join(" and ")}`
      : "runners on loopback ports",
  );
  const port1 = await freePort();
  const r1 = await start(d, ["--role", "runner", "--instance-id", "runner-1"], port1, ns?.[0]);
  const r2 = await start(d, ["--role", "runner", "--instance-id", "runner-2"], 0, ns?.[1]);
  if (ns)
    assert.deepEqual(
      [r1.url, r2.url],
      ns.map((n) => `http://${n.address}:8080`),
    );
  const api = await start(d, [
    "--role",
    "api",
    "--runner",
    r1.url,
    "--runner",
    r2.url,
    "--instance-id",
    "api",
  ]);
  const pid1 = r1.proc.pid!;
  const pid2 = r2.proc.pid!;

  // Steady synchronous traffic through the API for the whole test.
  const syncStatuses: { status: number; code?: string; retryable?: boolean; pid?: number }[] = [];
  let syncRunning = true;
  const sync = (async () => {
    for (let i = 0; syncRunning; i++) {
      const r = await postJson(`${api.url}/v1/models/latency/predict`, { rows: [[100_000 + i]] });
      syncStatuses.push({
        status: r.status,
        code: r.body?.error?.code,
        retryable: r.body?.error?.retryable,
        pid: r.body?.outputs?.pid?.[0]?.[0],
      });
    }
  })();

  // 500 jobs, submitted 50 at a time; input i identifies job i.
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: 50 }, (_, k) =>
        postJson(`${api.url}/v1/models/latency/jobs`, { rows: [[i + k]] }),
      ),
    );
    for (const r of batch) {
      assert.equal(r.status, 202, JSON.stringify(r.body));
      ids.push(r.body.id);
    }
  }

  // Kill runner 1 once a fifth of the jobs have run, at a moment it holds one. With 50 ms per
  // job it nearly always does, but a busy machine can find it between jobs: so it is frozen
  // (SIGSTOP) first, and killed only while a job it started still reads "running"; else it
  // goes on and the check is made again.
  const executed = () => readFileSync(d.executions, "utf8").split("\n").filter(Boolean);
  const jobRuns = () => executed().filter((l) => Number(l.split(" ")[0]) < 100_000).length;
  const holdsJob = async () => {
    const started = executed()
      .map((l) => l.split(" ").map(Number) as [number, number])
      .filter(([input, pid]) => input < 100_000 && pid === pid1)
      .slice(-8);
    for (const [input] of started)
      if ((await jobStatus(api.url, ids[input]!)).status === "running") return true;
    return false;
  };
  const until = Date.now() + 60_000;
  while (jobRuns() < JOBS / 5 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  for (;;) {
    r1.proc.kill("SIGSTOP");
    if (await holdsJob()) break;
    r1.proc.kill("SIGCONT");
    assert.ok(Date.now() < until, "runner 1 never held a job");
    await new Promise((r) => setTimeout(r, 5));
  }
  r1.proc.kill("SIGKILL");
  const killedAt = Date.now();

  // Every job ends succeeded.
  const final = new Map<string, { status: string; attempts: number }>();
  const deadline = Date.now() + 90_000;
  while (final.size < ids.length && Date.now() < deadline) {
    for (const id of ids) {
      if (final.has(id)) continue;
      const s = await jobStatus(api.url, id);
      if (["succeeded", "failed", "canceled"].includes(s.status)) final.set(id, s);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(final.size, JOBS, `${JOBS - final.size} jobs did not finish`);
  const notSucceeded = [...final.entries()].filter(([, s]) => s.status !== "succeeded");
  assert.deepEqual(notSucceeded, [], "every accepted job succeeds");

  // Each job's one result is its own input doubled, computed by one of the runners.
  const results = await Promise.all(
    ids.map(async (id, i) => {
      const res = await fetch(`${api.url}/v1/jobs/${id}/result`);
      const body = (await res.json()) as { outputs: { y: number[][]; pid: number[][] } };
      assert.equal(body.outputs.y[0]![0], 2 * i);
      return body.outputs.pid[0]![0]!;
    }),
  );
  assert.ok(results.every((pid) => pid === pid1 || pid === pid2));
  assert.ok(results.includes(pid1) && results.includes(pid2), "both runners worked before the kill");

  // Executions: every job ran; the ones that ran twice were running on runner 1 when it died
  // (1 to jobs.concurrency of them: it held work), and their second run, after the lease lapsed,
  // was on the survivor, whose result is the one stored. A busy machine can also stall the
  // survivor past a lease it holds: a job it ran twice for that reason is accepted only where it
  // logged the lost lease of that very job.
  const runs = new Map<number, number[]>();
  for (const line of executed()) {
    const [input, pid] = line.split(" ").map(Number) as [number, number];
    if (input >= 100_000) continue; // sync traffic
    runs.set(input, [...(runs.get(input) ?? []), pid]);
  }
  for (let i = 0; i < JOBS; i++) assert.ok(runs.has(i), `job ${i} never ran`);
  const twice = [...runs.entries()].filter(([, pids]) => pids.length > 1);
  const killed = twice.filter(([, pids]) => pids[0] === pid1);
  const stalled = twice.filter(([, pids]) => pids[0] !== pid1);
  assert.ok(killed.length >= 1 && killed.length <= 4, `re-run jobs: ${JSON.stringify(twice)}`);
  for (const [input, pids] of killed) {
    assert.equal(pids.at(-1), pid2, `job ${input} re-ran on the survivor`);
    assert.equal(results[input], pid2);
  }
  const lostLeases = new Set(
    r2
      .output()
      .split("\n")
      .filter((l) => l.includes("lost the lease"))
      .map((l) => (JSON.parse(l) as { jobId: string }).jobId),
  );
  for (const [input, pids] of stalled) {
    assert.ok(
      pids.every((pid) => pid === pid2) && lostLeases.has(ids[input]!),
      `job ${input} ran twice: ${pids}`,
    );
  }
  if (stalled.length)
    t.diagnostic(`the survivor lost ${stalled.length} lease(s) to a stall and re-ran those jobs`);

  // Sync traffic: successes throughout; a failure, if any, is a retryable 503 while the death
  // was being detected (the request in flight on the victim is retried on the survivor).
  const afterKill = syncStatuses.length;
  await new Promise((r) => setTimeout(r, 1000));
  const bad = syncStatuses.filter((s) => s.status !== 200);
  for (const b of bad) {
    assert.equal(b.status, 503, JSON.stringify(b));
    assert.equal(b.retryable, true);
  }
  assert.ok(bad.length <= 2, `sync failures: ${JSON.stringify(bad)}`);
  assert.ok(
    syncStatuses.slice(afterKill).every((s) => s.status === 200 && s.pid === pid2),
    "after the kill only the survivor answers",
  );
  assert.ok(Date.now() - killedAt < 90_000);

  // Restarted on its port, runner 1 rejoins: the API routes to it again.
  const again = await start(d, ["--role", "runner", "--instance-id", "runner-1b"], port1, ns?.[0]);
  const rejoined = Date.now() + 10_000;
  let seen = false;
  while (!seen && Date.now() < rejoined) {
    const before = syncStatuses.length;
    await new Promise((r) => setTimeout(r, 300));
    seen = syncStatuses.slice(before).some((s) => s.pid === again.proc.pid);
  }
  syncRunning = false;
  await sync;
  assert.ok(seen, "the restarted runner gets requests again");
  const status = (await (await fetch(`${api.url}/v1/models/latency`)).json()) as {
    status: { runner: { runners: { url: string; healthy: boolean; instance?: string }[] } };
  };
  assert.deepEqual(status.status.runner.runners.map((r) => [r.healthy, r.instance]).sort(), [
    [true, "runner-1b"],
    [true, "runner-2"],
  ]);
}

describe("API tier and two runners through Redis", () => {
  // Each runner in its own network namespace (its own address, as on separate machines) where
  // root and iproute2 allow; else on loopback ports, with the reason in the output.
  it("500 jobs and steady sync traffic survive a runner's SIGKILL; the runner rejoins when restarted", async (t) => {
    if (!spaces || noSpaces) {
      t.diagnostic(`no network namespaces: ${noSpaces}`);
      await killScenario(t, loopback);
      return;
    }
    const fenced = deployment(
      "netns",
      (n) => `redis://:${REDIS_PASSWORD}@${n?.hostAddress ?? "127.0.0.1"}:${privateRedisPort}`,
    );
    await killScenario(t, fenced, spaces);
  });

  it("a runner that stops answering (SIGSTOP) leaves the rotation within seconds and rejoins when it resumes", async () => {
    const frozen = await start(loopback, ["--role", "runner", "--instance-id", "runner-frozen"]);
    const steady = await start(loopback, ["--role", "runner", "--instance-id", "runner-steady"]);
    const api = await start(loopback, ["--role", "api", "--runner", frozen.url, "--runner", steady.url]);
    const send = (i: number) =>
      postJson(
        `${api.url}/v1/models/latency/predict`,
        { rows: [[200_000 + i]] },
        { "x-request-timeout-ms": "2000" },
      );
    const runners = async () =>
      (
        (await (await fetch(`${api.url}/v1/models/latency`)).json()) as {
          status: { runner: { runners: { instance?: string; healthy: boolean; reason?: string }[] } };
        }
      ).status.runner.runners;

    frozen.proc.kill("SIGSTOP");
    try {
      // Sequential traffic while the API tier finds out: a request caught on the frozen runner
      // waits out its deadline (504, retryable); none may fail otherwise.
      const t0 = Date.now();
      let i = 0;
      let out: { instance?: string; healthy: boolean; reason?: string } | undefined;
      while (Date.now() - t0 < 10_000) {
        const r = await send(i++);
        if (r.status !== 200) {
          assert.equal(r.status, 504, JSON.stringify(r.body));
          assert.equal(r.body.error.retryable, true);
        }
        out = (await runners()).find((x) => x.instance === "runner-frozen");
        if (out && !out.healthy) break;
      }
      const detectedMs = Date.now() - t0;
      assert.ok(out && !out.healthy, "the frozen runner left the rotation");
      assert.match(out.reason ?? "", /no answer within/);
      assert.ok(detectedMs < 5000, `took ${detectedMs} ms`);
      // From now on every request is answered, by the other runner.
      for (let k = 0; k < 10; k++) {
        const r = await send(i++);
        assert.equal(r.status, 200);
        assert.equal(r.body.outputs.pid[0][0], steady.proc.pid);
      }
    } finally {
      frozen.proc.kill("SIGCONT");
    }
    const back = Date.now() + 10_000;
    while (Date.now() < back && !(await runners()).every((r) => r.healthy)) {
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(
      (await runners()).every((r) => r.healthy),
      "the resumed runner is back in the rotation",
    );
  });

  it("an API process with no runner answering is not ready, and says which runner and why", async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const api = await startChild(["-c", loopback.config, "--role", "api", "--runner", nowhere]);
    children.push(api);
    const ready = await waitReady(api.url, 3000);
    assert.equal(ready.status, 503);
    const reason = JSON.stringify(ready.body);
    assert.ok(reason.includes(nowhere) && /ECONNREFUSED/.test(reason), reason);
    const r = await postJson(`${api.url}/v1/models/latency/predict`, { rows: [[1]] });
    assert.equal(r.status, 503);
    assert.equal(r.body.error.code, "MP_ERR_RUNNER_UNAVAILABLE");
    assert.equal(r.body.error.retryable, true);
    assert.ok(Number(r.headers.get("retry-after")) >= 1);
  });

  it("the request id travels from the API to the runner and back, and both log it", async () => {
    const runner = await start(loopback, ["--role", "runner", "--instance-id", "runner-x"]);
    const api = await start(loopback, ["--role", "api", "--runner", runner.url, "--instance-id", "api-x"]);
    const id = `trace-${Date.now()}`;
    const r = await postJson(`${api.url}/v1/models/latency/predict`, { rows: [[7]] }, { "x-request-id": id });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("x-request-id"), id);
    assert.equal(r.headers.get("x-modelport-instance"), "api-x");
    await new Promise((res) => setTimeout(res, 200));
    const line = (out: string) =>
      out
        .split("\n")
        .filter((l) => l.includes(`"reqId":"${id}"`))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    const apiLines = line(api.output());
    const runnerLines = line(runner.output());
    assert.ok(
      apiLines.some(
        (l) => l.role === "api" && l.instance === "api-x" && l.url === "/v1/models/latency/predict",
      ),
    );
    assert.ok(
      runnerLines.some(
        (l) => l.role === "runner" && l.instance === "runner-x" && l.url === "/v2/models/latency/infer",
      ),
    );
    // Metrics carry role and instance.
    const metrics = await (await fetch(`${api.url}/metrics`)).text();
    assert.match(metrics, /modelport_runner_up\{runner="[^"]+",role="api",instance_id="api-x"\} 1/);
    const runnerMetrics = await (await fetch(`${runner.url}/metrics`)).text();
    assert.match(runnerMetrics, /role="runner",instance_id="runner-x"/);
  });
});
