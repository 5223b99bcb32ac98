// The child-process placement, through a real `modelport serve --placement process`: a runner
// SIGKILLed under load costs only retryable 503s and comes back golden-checked with a new pid
// while the server stays up; it answers exactly as the worker placement does; a runner above
// its memory ceiling is recycled with no failed request, and an always-exceeded ceiling does
// not loop; a recycle whose golden check fails leaves the model not ready, saying why; and the
// runner does not outlive its server.
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { GoldenFile } from "../../src/golden.js";
import { testModels } from "../helpers/models.js";
import { postJson, startReadyChild, stopStartedChildren } from "../helpers/server.js";

let models: string;

before(async () => {
  models = await testModels();
});

after(stopStartedChildren);

const start = startReadyChild;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function golden(name: string): GoldenFile {
  return JSON.parse(readFileSync(join(models, `${name}.golden.json`), "utf8")) as GoldenFile;
}

/** Row `i` of a golden tensor (flat, row-major). */
function row(data: unknown[], shape: number[], i: number): number[] {
  const width = shape.slice(1).reduce((a, b) => a * b, 1);
  return data.slice(i * width, (i + 1) * width) as number[];
}

function assertClose(actual: number[], expected: number[], tol: number, what: string): void {
  assert.equal(actual.length, expected.length, what);
  for (let k = 0; k < expected.length; k++) {
    const e = expected[k]!;
    assert.ok(
      Math.abs(actual[k]! - e) <= tol * Math.max(1, Math.abs(e)),
      `${what}[${k}]: ${actual[k]} vs ${e}`,
    );
  }
}

async function modelStatus(url: string, model: string): Promise<any> {
  const res = await fetch(`${url}/v1/models/${model}`);
  return ((await res.json()) as any).status;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `check` every 20 ms until it is true; fails after `timeoutMs`. */
async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

interface Outcome {
  status: number;
  code?: string;
  retryable?: boolean;
  retryAfter: string | null;
}

/**
 * `clients` loops, each sending one golden row of slow.onnx at a time and checking a 200's
 * answer against the golden output, until `stop()`. A request that hangs fails the test.
 */
function slowLoad(url: string, clients: number) {
  const g = golden("slow");
  const x = g.inputs.x!;
  const y = g.outputs.y!;
  const tol = (g.tolerance as Record<string, number>).y!;
  const outcomes: Outcome[] = [];
  let stopped = false;
  const loops = Array.from({ length: clients }, async (_, c) => {
    for (let n = 0; !stopped; n++) {
      const i = (c + n) % x.shape[0]!;
      const res = await fetch(`${url}/v1/models/slow/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ rows: [row(x.data, x.shape, i)] }),
        signal: AbortSignal.timeout(10_000),
      });
      const body = (await res.json()) as any;
      outcomes.push({
        status: res.status,
        code: body.error?.code,
        retryable: body.error?.retryable,
        retryAfter: res.headers.get("retry-after"),
      });
      if (res.status === 200) {
        assertClose(body.outputs.y[0], row(y.data, y.shape, i), tol, `row ${i}`);
      } else await sleep(25); // a client backing off, not a tight loop of 503s
    }
  });
  return {
    outcomes,
    successes: () => outcomes.filter((o) => o.status === 200).length,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

describe("placement process: a supervised child process", () => {
  it("a runner SIGKILLed under load: only retryable 503s, /readyz says restarting, then ready with a new pid and right answers; the server stays up", async () => {
    const server = await start([join(models, "slow.onnx"), "--placement", "process"]);
    const before = await modelStatus(server.url, "slow");
    assert.equal(before.runner.placement, "process");
    const pid1 = before.runner.pid as number;
    assert.ok(Number.isInteger(pid1) && pid1 !== server.proc.pid, `runner pid ${pid1}`);
    assert.ok(alive(pid1));

    // Probes run beside the load for the whole test.
    let probing = true;
    const livez: number[] = [];
    const readyz: { status: number; body: any }[] = [];
    const probes = (async () => {
      while (probing) {
        livez.push((await fetch(`${server.url}/livez`)).status);
        const r = await fetch(`${server.url}/readyz`);
        readyz.push({ status: r.status, body: await r.json() });
        await sleep(20);
      }
    })();

    const load = slowLoad(server.url, 6);
    await until(() => load.successes() >= 6, "the first answers");
    process.kill(pid1, "SIGKILL");
    await until(() => readyz.some((r) => r.status === 503), "/readyz to report the crash");
    const crashedAt = readyz.length;
    await until(() => readyz.slice(crashedAt).some((r) => r.status === 200), "/readyz to be ready again");
    const recoveredAt = load.outcomes.length;
    await until(
      () => load.outcomes.slice(recoveredAt).filter((o) => o.status === 200).length >= 6,
      "answers after recovery",
    );
    await load.stop();
    probing = false;
    await probes;

    // Every request either succeeded with the golden answer (checked in the loop) or got a
    // retryable 503 with Retry-After: never another 5xx, never a hang.
    const failures = load.outcomes.filter((o) => o.status !== 200);
    assert.ok(failures.length > 0, "the kill cost some requests");
    for (const f of failures) {
      assert.equal(f.status, 503, JSON.stringify(f));
      assert.ok(f.code === "MP_ERR_RUNNER_CRASHED" || f.code === "MP_ERR_MODEL_NOT_READY", JSON.stringify(f));
      assert.equal(f.retryable, true);
      assert.ok(f.retryAfter !== null && Number(f.retryAfter) >= 1, JSON.stringify(f));
    }
    assert.ok(
      failures.some((f) => f.code === "MP_ERR_RUNNER_CRASHED"),
      "requests in flight at the kill were answered MP_ERR_RUNNER_CRASHED",
    );

    // Not ready while restarting, with the reason; ready again after the golden check.
    const notReady = readyz.filter((r) => r.status === 503).map((r) => r.body.models.slow);
    assert.ok(notReady.length > 0);
    for (const m of notReady) {
      assert.ok(m.state === "restarting" || m.state === "loading", JSON.stringify(m));
      assert.equal(m.ready, false);
    }
    assert.ok(
      notReady.some((m) => m.state === "restarting" && /SIGKILL/.test(m.reason)),
      JSON.stringify(notReady[0]),
    );
    assert.equal(readyz.at(-1)!.status, 200);
    assert.ok(livez.length > 0 && livez.every((s) => s === 200), "/livez answered 200 throughout");
    assert.equal(server.proc.exitCode, null, "the server process is still running");

    const afterStatus = await modelStatus(server.url, "slow");
    assert.equal(afterStatus.restarts, 1);
    assert.equal(afterStatus.golden, "passed");
    const pid2 = afterStatus.runner.pid as number;
    assert.ok(Number.isInteger(pid2) && pid2 !== pid1, `new runner pid ${pid2} (was ${pid1})`);
    assert.ok(alive(pid2));
    assert.ok(!alive(pid1));

    // The whole golden example, as one request, after recovery.
    const g = golden("slow");
    const res = await postJson(`${server.url}/v1/models/slow/predict`, {
      inputs: { x: { data: g.inputs.x!.data, shape: g.inputs.x!.shape } },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertClose(res.body.outputs.y.flat(), g.outputs.y!.data as number[], 1e-4, "golden y");
  });

  it("answers exactly as the worker placement does (churn-tree golden inputs, INT64 and FP32 outputs)", async () => {
    const model = join(models, "churn-tree.onnx");
    const [worker, proc] = await Promise.all([
      start([model, "--placement", "worker"]),
      start([model, "--placement", "process"]),
    ]);
    const g = golden("churn-tree");
    const f = g.inputs.features!;
    const request = { inputs: { features: { data: f.data, shape: f.shape } } };
    const [a, b] = await Promise.all([
      postJson(`${worker.url}/v1/models/churn-tree/predict`, request),
      postJson(`${proc.url}/v1/models/churn-tree/predict`, request),
    ]);
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(b.status, 200, JSON.stringify(b.body));
    assert.deepEqual(b.body.outputs, a.body.outputs);
    assert.deepEqual(b.body.outputs.label, g.outputs.label!.data);
    assertClose(b.body.outputs.probabilities.flat(), g.outputs.probabilities!.data as number[], 1e-5, "p");
    // Row by row as well: batches of one through the IPC channel.
    for (let i = 0; i < f.shape[0]!; i++) {
      const r = await postJson(`${proc.url}/v1/models/churn-tree/predict`, {
        rows: [row(f.data, f.shape, i)],
      });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.outputs.label, [g.outputs.label!.data[i]]);
    }

    const ws = await modelStatus(worker.url, "churn-tree");
    assert.deepEqual(ws.runner, { placement: "worker" });
    const ps = await modelStatus(proc.url, "churn-tree");
    assert.equal(ps.runner.placement, "process");
    assert.equal(ps.restarts, 0);
    assert.equal(ps.recycles, 0);

    // The runner does not outlive its server, even one killed without a chance to clean up.
    const runnerPid = ps.runner.pid as number;
    assert.ok(alive(runnerPid));
    await proc.stop("SIGKILL");
    await until(() => !alive(runnerPid), `runner ${runnerPid} to exit with its server`, 5000);
  });

  it("a runner above --max-rss-mb is recycled after draining: no failed request, still ready, and no recycle loop", async () => {
    // 1 MiB is below any process's footprint: the ceiling is exceeded from the first answer on.
    const server = await start([join(models, "slow.onnx"), "--placement", "process", "--max-rss-mb", "1"]);
    const pid1 = (await modelStatus(server.url, "slow")).runner.pid as number;

    let probing = true;
    const readyz: number[] = [];
    const probes = (async () => {
      while (probing) {
        readyz.push((await fetch(`${server.url}/readyz`)).status);
        await sleep(20);
      }
    })();
    const load = slowLoad(server.url, 6);
    await until(async () => (await modelStatus(server.url, "slow")).recycles >= 1, "a recycle");
    const recycled = await modelStatus(server.url, "slow");
    assert.equal(recycled.state, "ready");
    // Keep serving: the ceiling is still exceeded with every answer, yet recycles stay at one
    // (at most one per 30 s) instead of looping.
    const mark = load.successes();
    await until(() => load.successes() >= mark + 30, "30 answers after the recycle");
    await load.stop();
    probing = false;
    await probes;

    const failed = load.outcomes.filter((o) => o.status !== 200);
    assert.deepEqual(failed, [], "no request failed during the recycle");
    assert.ok(readyz.length > 0 && readyz.every((s) => s === 200), "ready throughout the recycle");
    const s = await modelStatus(server.url, "slow");
    assert.equal(s.recycles, 1, "one recycle, not a loop");
    assert.equal(s.restarts, 0);
    assert.equal(s.golden, "passed");
    assert.notEqual(s.runner.pid, pid1, "a fresh runner process");
    assert.ok(!alive(pid1), "the old runner exited");
    const out = server.output();
    assert.match(out, /recycling the runner \(runner process RSS [\d.]+ MiB is above maxRssMb 1\)/);
    assert.match(out, /runner recycled in \d+ ms/);
    assert.match(out, /above maxRssMb 1; it will be recycled at most once per 30 s/);
  });

  it("a recycle whose golden check fails makes the model not ready with the reason; later requests get its code, not retryable", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelport-recycle-"));
    for (const ext of [".onnx", ".manifest.json", ".golden.json"])
      copyFileSync(join(models, `churn-tree${ext}`), join(dir, `churn-tree${ext}`));
    const server = await start([join(dir, "churn-tree.onnx"), "--placement", "process", "--max-rss-mb", "1"]);
    // The runner's next golden check (the one after its recycle) will see different expectations.
    const g = golden("churn-tree");
    const probs = g.outputs.probabilities!.data as number[];
    g.outputs.probabilities!.data = probs.map((p) => 1 - p);
    writeFileSync(join(dir, "churn-tree.golden.json"), JSON.stringify(g));

    const f = g.inputs.features!;
    const answers: { status: number; body: any; retryAfter: string | null }[] = [];
    const send = async () => {
      const res = await postJson(`${server.url}/v1/models/churn-tree/predict`, {
        rows: [row(f.data, f.shape, 0)],
      });
      answers.push({ status: res.status, body: res.body, retryAfter: res.headers.get("retry-after") });
    };
    await Promise.all([send(), send(), send()]); // the first answer's RSS report asks for the recycle
    await until(
      async () => (await modelStatus(server.url, "churn-tree")).state === "failed",
      "the failed recycle",
    );
    await send();

    const s = await modelStatus(server.url, "churn-tree");
    assert.equal(s.ready, false);
    assert.equal(s.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
    assert.match(s.reason, /^recycling the runner failed: golden check failed/);
    assert.equal(s.recycles, 1);
    const ready = await fetch(`${server.url}/readyz`);
    assert.equal(ready.status, 503);
    assert.match(JSON.stringify(await ready.json()), /recycling the runner failed/);
    // Answers before the recycle are right; a request that waited through it gets a retryable
    // 503 (the model was restarting), and every one after the failure the failure's own code,
    // not retryable and without Retry-After (only a fixed model cures it): none is lost or left hanging.
    for (const a of answers) {
      if (a.status === 200) continue;
      assert.equal(a.status, 503, JSON.stringify(a.body));
      if (a.body.error.code === "MP_ERR_MODEL_NOT_READY") {
        assert.equal(a.body.error.retryable, true);
        assert.ok(a.retryAfter !== null);
      } else {
        assert.equal(a.body.error.code, "MP_ERR_MODEL_GOLDEN_MISMATCH", JSON.stringify(a.body));
        assert.equal(a.body.error.retryable, false);
        assert.equal(a.retryAfter, null);
      }
    }
    assert.equal(answers.at(-1)!.body.error.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
    assert.equal(answers.at(-1)!.status, 503);
  });
});
