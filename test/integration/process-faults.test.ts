// Process faults in a real `modelport serve`: an unhandled rejection or uncaught exception in
// the serving process (injected here by a preloaded module, on SIGUSR2, from a timer outside
// any request) is logged, the in-flight request still gets its answer, and the process exits 1
// within server.drainTimeoutMs plus the close margin. With --processes 2 a SIGKILLed serving
// process is replaced, even when every one dies at once, and the server keeps answering.
import assert from "node:assert/strict";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pathToFileURL } from "node:url";
import { testModels } from "../helpers/models.js";
import { type ChildServer, freePort, postJson, REPO_ROOT, startChild, waitReady } from "../helpers/server.js";

const HANDLER = join(REPO_ROOT, "dist", "examples", "handlers", "latency-handler.js");
let dir: string;
let preload: string;
const children: ChildServer[] = [];

before(() => {
  dir = mkdtempSync(join(tmpdir(), "modelport-faults-"));
  preload = join(dir, "inject-fault.mjs");
  writeFileSync(
    preload,
    `import { isMainThread } from "node:worker_threads";
if (isMainThread) {
  process.on("SIGUSR2", () => {
    setTimeout(() => {
      if (process.env.FAULT_KIND === "throw") throw new Error("injected fault (throw)");
      Promise.reject(new Error("injected fault (reject)"));
    }, 10);
  });
}
`,
  );
});
after(async () => {
  for (const c of children) await c.stop("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

/** A config serving the latency handler, which logs each call's input as it starts. */
function config(name: string, waitMs: number): { file: string; executions: string } {
  const file = join(dir, `${name}.yaml`);
  const executions = join(dir, `${name}.executions`);
  writeFileSync(
    file,
    JSON.stringify({
      jobs: {
        sqlitePath: join(dir, `${name}.db`),
        blobs: { backend: "fs", dir: join(dir, `${name}-blobs`) },
      },
      models: [
        { name: "wait", backend: "custom", path: HANDLER, options: { waitMs, executionsLog: executions } },
      ],
    }),
  );
  return { file, executions };
}

async function until(check: () => boolean, ms = 60_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  return check();
}

async function exitCode(child: ChildServer, ms: number): Promise<number | null | "running"> {
  if (child.proc.exitCode !== null) return child.proc.exitCode;
  const timer = new Promise<"running">((r) => setTimeout(() => r("running"), ms).unref());
  const exited = once(child.proc, "exit").then(([code]) => code as number | null);
  return Promise.race([exited, timer]);
}

describe("last-resort handlers", () => {
  it("an unhandled rejection is logged, the in-flight request answered, then exit 1", async () => {
    const { file, executions } = config("reject", 1500);
    const child = await startChild(["-c", file, "--drain-timeout-ms", "10000"], {
      NODE_OPTIONS: `--import ${pathToFileURL(preload).href}`,
      FAULT_KIND: "reject",
    });
    children.push(child);
    assert.equal((await waitReady(child.url)).status, 200, child.output());
    const inFlight = postJson(`${child.url}/v1/models/wait/predict`, { inputs: { x: [[21]] } });
    assert.ok(await until(() => existsSync(executions) && readFileSync(executions, "utf8").includes("21")));
    child.proc.kill("SIGUSR2");
    const answered = await inFlight;
    assert.equal(answered.status, 200, JSON.stringify(answered.body));
    assert.deepEqual(answered.body.outputs.y, [[42]]);
    // Bound: drainTimeoutMs (10 s) + the 5 s close margin; generous on a busy machine.
    assert.equal(await exitCode(child, 60_000), 1);
    const out = child.output();
    assert.match(out, /"kind":"unhandledRejection"/);
    assert.match(out, /injected fault \(reject\)/);
  });

  it("an uncaught exception exits 1 after the drain bound even when a request never finishes", async () => {
    // The request would take 10 minutes; the drain waits 1 s.
    const { file, executions } = config("throw", 600_000);
    const child = await startChild(["-c", file, "--drain-timeout-ms", "1000"], {
      NODE_OPTIONS: `--import ${pathToFileURL(preload).href}`,
      FAULT_KIND: "throw",
    });
    children.push(child);
    assert.equal((await waitReady(child.url)).status, 200, child.output());
    const inFlight = postJson(`${child.url}/v1/models/wait/predict`, { inputs: { x: [[7]] } }).catch(
      (err: Error) => err,
    );
    assert.ok(await until(() => existsSync(executions) && readFileSync(executions, "utf8").includes("7")));
    child.proc.kill("SIGUSR2");
    assert.equal(await exitCode(child, 120_000), 1);
    const out = child.output();
    assert.match(out, /"kind":"uncaughtException"/);
    assert.match(out, /injected fault \(throw\)/);
    assert.match(out, /drain timeout reached/);
    await inFlight;
  });
});

describe("a fault in a handler's runner", () => {
  it("an unhandled rejection from a handler's timer restarts only its runner; the server keeps answering", async () => {
    const handler = join(dir, "faulty-handler.mjs");
    writeFileSync(
      handler,
      `export function load() {
  return {
    inputs: [{ name: "x", datatype: "FP32", shape: [-1, 1] }],
    outputs: [{ name: "y", datatype: "FP32", shape: [-1, 1] }],
    batchable: false,
  };
}
export async function predict(batch) {
  const x = batch.x.data;
  // Outside the request path: the answer is already sent when the timer rejects.
  if (x[0] === 13) setTimeout(() => Promise.reject(new Error("handler timer fault")), 10);
  return { y: { datatype: "FP32", shape: [x.length, 1], data: x.map((v) => v * 2) } };
}
`,
    );
    const child = await startChild([handler]);
    children.push(child);
    assert.equal((await waitReady(child.url)).status, 200, child.output());
    const url = `${child.url}/v1/models/faulty-handler/predict`;
    assert.equal((await postJson(url, { inputs: { x: [[13]] } })).status, 200);
    assert.ok(await until(() => child.output().includes("handler timer fault")), child.output());
    // The runner comes back; the process never went away.
    let answered = false;
    for (let i = 0; i < 400 && !answered; i++) {
      const res = await postJson(url, { inputs: { x: [[4]] } });
      answered = res.status === 200 && res.body.outputs.y[0][0] === 8;
      if (!answered) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(answered, child.output().slice(-2000));
    assert.equal(child.proc.exitCode, null);
    assert.doesNotMatch(child.output(), /"kind":"unhandledRejection"/);
  });
});

/** GET /livez on a fresh connection; resolves to the answering process's pid, or undefined. */
function livezPid(url: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = get(`${url}/livez`, { agent: false, timeout: 10_000 }, (res) => {
      res.resume();
      const instance = String(res.headers["x-modelport-instance"] ?? "");
      resolve(res.statusCode === 200 ? Number(instance.split(":").pop()) : undefined);
    });
    req.on("error", () => resolve(undefined));
    req.on("timeout", () => req.destroy());
  });
}

async function pidsAnswering(url: string, want: number, tries = 400): Promise<Set<number>> {
  const pids = new Set<number>();
  for (let i = 0; i < tries && pids.size < want; i++) {
    const pid = await livezPid(url);
    if (pid) pids.add(pid);
    else await new Promise((r) => setTimeout(r, 50));
  }
  return pids;
}

describe("--processes", () => {
  it("replaces a SIGKILLed serving process, and all of them when all die; keys stay off command lines", async () => {
    const model = join(await testModels(), "churn-tree.onnx");
    // A fixed port: with port 0, the processes started after all died would pick a new one.
    const key = "cluster-secret-key-2718";
    const child = await startChild([model, "--processes", "2", "--api-key", key], {}, await freePort());
    children.push(child);
    assert.equal((await waitReady(child.url)).status, 200, child.output());
    const first = await pidsAnswering(child.url, 2);
    assert.equal(first.size, 2, `two processes answer: ${[...first]}`);
    // The key reaches the serving processes through their environment, never their command line.
    for (const pid of [child.proc.pid!, ...first])
      assert.doesNotMatch(readFileSync(`/proc/${pid}/cmdline`, "utf8"), /cluster-secret/, `pid ${pid}`);
    const predict = `${child.url}/v1/models/churn-tree/predict`;
    const rows = { rows: [[1, 2, 3, 1, 0, 4]] };
    assert.equal((await postJson(predict, rows, { authorization: `Bearer ${key}` })).status, 200);
    assert.equal((await postJson(predict, rows)).status, 401);
    const [victim, survivor] = [...first] as [number, number];
    process.kill(victim, "SIGKILL");
    // The survivor keeps answering, and a replacement joins it.
    let replacement: number | undefined;
    for (let i = 0; i < 1200 && replacement === undefined; i++) {
      const pid = await livezPid(child.url);
      if (pid !== undefined && pid !== survivor && pid !== victim) replacement = pid;
      else await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(replacement, `no replacement for ${victim}:\n${child.output().slice(-2000)}`);
    assert.match(child.output(), /a serving process died; starting another/);

    // Every serving process dies at once: the primary stays and starts new ones.
    const before = await pidsAnswering(child.url, 2);
    for (const pid of before) process.kill(pid, "SIGKILL");
    const after = await pidsAnswering(child.url, 1, 1200);
    assert.equal(after.size, 1, `the server answers again:\n${child.output().slice(-2000)}`);
    for (const pid of after) assert.ok(!before.has(pid));
    assert.equal(child.proc.exitCode, null, "the primary is still running");
    assert.equal((await postJson(predict, rows, { authorization: `Bearer ${key}` })).status, 200);
    assert.equal(await child.stop("SIGTERM"), 0);
  });
});
