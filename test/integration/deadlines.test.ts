// Deadlines all the way down, through a real `modelport serve` with custom TypeScript handlers:
// a request's deadline bounds the runner call too (504 at the deadline, not when a 10 s
// handler finishes, for the request on the runner and for the one queued behind it), and a
// runner stuck in `while (true)` is stopped after limits.hardTimeoutMs, the model reports not
// ready with the reason meanwhile, a fresh runner passes its golden check, the request that
// waited behind the stuck one is answered by it, and the process stays up. Both placements:
// a worker thread (terminated) and a child process (killed).
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type ChildServer, postJson, startChild, waitReady } from "../helpers/server.js";

/**
 * x [-1, 1] → y = 2x. x = 7 sleeps `sleepMs` first (a slow call that yields); x = -1 spins
 * forever (a runner stuck in JavaScript). load() waits `loadDelayMs`, so a restart takes long
 * enough to be seen.
 */
const HANDLER = `
let sleepMs = 0;
export async function load(ctx) {
  sleepMs = Number(ctx.options.sleepMs ?? 0);
  await new Promise((r) => setTimeout(r, Number(ctx.options.loadDelayMs ?? 0)));
  return {
    inputs: [{ name: "x", datatype: "FP32", shape: [-1, 1] }],
    outputs: [{ name: "y", datatype: "FP32", shape: [-1, 1] }],
    batchable: false,
  };
}
export async function predict(batch) {
  const x = batch.x.data;
  if (x[0] === 7) await new Promise((r) => setTimeout(r, sleepMs));
  if (x[0] === -1) for (;;) {}
  return { y: { datatype: "FP32", shape: [x.length, 1], data: x.map((v) => v * 2) } };
}
`;

const GOLDEN = JSON.stringify({
  inputs: { x: { datatype: "FP32", shape: [2, 1], data: [1, 2] } },
  outputs: { y: { datatype: "FP32", shape: [2, 1], data: [2, 4] } },
});

let server: ChildServer;

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelport-deadlines-"));
  for (const name of ["sleepy", "spin", "spin-proc"]) {
    writeFileSync(join(dir, `${name}.ts`), HANDLER);
    writeFileSync(join(dir, `${name}.golden.json`), GOLDEN);
  }
  const config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "models:",
      "  - name: sleepy",
      "    backend: custom",
      "    path: sleepy.ts",
      "    options: { sleepMs: 10000 }",
      "    batching: { maxInFlight: 1 }",
      "  - name: spin",
      "    backend: custom",
      "    path: spin.ts",
      "    options: { loadDelayMs: 1000 }",
      // One batch on the runner at a time: the second request waits in the queue, not on the runner.
      "    batching: { maxInFlight: 1 }",
      "    limits: { timeoutMs: 1000, hardTimeoutMs: 2500 }",
      "  - name: spin-proc",
      "    backend: custom",
      "    path: spin-proc.ts",
      "    placement: process",
      "    options: { loadDelayMs: 1000 }",
      "    batching: { maxInFlight: 1 }",
      "    limits: { timeoutMs: 1000, hardTimeoutMs: 2500 }",
      "",
    ].join("\n"),
  );
  server = await startChild(["-c", config]);
  // Three handler runners, each importing TypeScript through tsx: slow on a busy machine.
  const ready = await waitReady(server.url, 90_000);
  assert.equal(
    ready.status,
    200,
    `not ready: ${JSON.stringify(ready.body)}\n${server.output().slice(-2000)}`,
  );
});

after(() => server?.stop("SIGKILL"));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Answer {
  status: number;
  body: any;
  ms: number;
}

/** POSTs x to `model` and times the answer; a request left hanging fails after 30 s. */
async function predict(model: string, x: number, headers: Record<string, string> = {}): Promise<Answer> {
  const t0 = performance.now();
  const res = await fetch(`${server.url}/v1/models/${model}/predict`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ inputs: { x: [[x]] } }),
    signal: AbortSignal.timeout(30_000),
  });
  const body = await res.json();
  return { status: res.status, body, ms: performance.now() - t0 };
}

async function modelStatus(model: string): Promise<any> {
  const res = await fetch(`${server.url}/v1/models/${model}`);
  return ((await res.json()) as any).status;
}

function assertUp(): void {
  assert.equal(server.proc.exitCode, null, `the server exited:\n${server.output().slice(-2000)}`);
  assert.equal(server.proc.signalCode, null, `the server was killed:\n${server.output().slice(-2000)}`);
}

describe("deadlines bound the runner call", () => {
  it("a 1 s deadline on a 10 s handler gets 504 long before the handler finishes, as does the request queued behind it", async () => {
    const [running, queued] = await Promise.all([
      predict("sleepy", 7, { "x-request-timeout-ms": "1000" }),
      sleep(100).then(() => predict("sleepy", 3, { "x-request-timeout-ms": "1000" })),
    ]);
    for (const [what, a] of [
      ["on the runner", running],
      ["queued behind it", queued],
    ] as const) {
      assert.equal(a.status, 504, `${what}: ${JSON.stringify(a.body)}`);
      assert.equal(a.body.error.code, "MP_ERR_DEADLINE_EXCEEDED", what);
      // The handler takes 10 s; the deadline is 1 s. Generous for a busy machine.
      assert.ok(a.ms < 5000, `${what}: answered after ${Math.round(a.ms)} ms`);
    }
    assertUp();
  });

  for (const model of ["spin", "spin-proc"]) {
    it(`${model}: a runner stuck in while (true) is recycled after the hard limit and serves again`, async () => {
      const before = await modelStatus(model);
      assert.equal(before.state, "ready");
      // Watch /readyz through the recycle.
      const reasons: string[] = [];
      let watching = true;
      const watcher = (async () => {
        while (watching) {
          const res = await fetch(`${server.url}/readyz`);
          const body = (await res.json()) as any;
          const m = body.models?.[model];
          if (res.status !== 200 && m && !m.ready) reasons.push(String(m.reason ?? ""));
          await sleep(50);
        }
      })();

      // The poison request: its 1 s deadline answers it even though the runner never will.
      const stuck = predict(model, -1);
      await sleep(200);
      // Queued behind the stuck call, with a deadline long enough to outlast the recycle.
      const behind = predict(model, 21, { "x-request-timeout-ms": "20000" });
      const poisoned = await stuck;
      assert.equal(poisoned.status, 504, JSON.stringify(poisoned.body));
      assert.equal(poisoned.body.error.code, "MP_ERR_DEADLINE_EXCEEDED");
      assert.ok(poisoned.ms < 5000, `answered after ${Math.round(poisoned.ms)} ms`);

      const waited = await behind;
      assert.equal(waited.status, 200, `the request behind the stuck one: ${JSON.stringify(waited.body)}`);
      assert.deepEqual(waited.body.outputs.y, [[42]]);

      // Ready again, golden-checked on a fresh runner, and serving.
      const deadline = Date.now() + 20_000;
      let status = await modelStatus(model);
      while (status.state !== "ready" && Date.now() < deadline) {
        await sleep(50);
        status = await modelStatus(model);
      }
      watching = false;
      await watcher;
      assert.equal(status.state, "ready");
      assert.equal(status.golden, "passed");
      assert.equal(status.recycles, before.recycles + 1);
      if (model === "spin-proc") assert.notEqual(status.runner.pid, before.runner.pid, "a new child process");
      assert.ok(
        reasons.some((r) => /hardTimeoutMs/.test(r)),
        `/readyz never said why the model was not ready during the recycle: ${JSON.stringify(reasons)}`,
      );
      const fresh = await postJson(`${server.url}/v1/models/${model}/predict`, { inputs: { x: [[5]] } });
      assert.equal(fresh.status, 200, JSON.stringify(fresh.body));
      assert.deepEqual(fresh.body.outputs.y, [[10]]);
      const ready = await fetch(`${server.url}/readyz`);
      assert.equal(ready.status, 200);
      assertUp();
    });
  }
});
