// A real `modelport serve` process: SIGTERM lets in-flight requests finish and exits 0, and a
// model computing never stalls /livez (the model owns a worker thread): probes are answered while
// one long inference is still running, a state read from the server, not a latency bar.
// The drain is held open by a gated request (test/helpers/gate.ts), so "during the drain" is a
// state the test controls: readiness and late requests are checked while it certainly lasts.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createGate, type Gate } from "../helpers/gate.js";
import { testModels } from "../helpers/models.js";
import { postJson, startReadyChild, stopStartedChildren } from "../helpers/server.js";

let models: string;

before(async () => {
  models = await testModels();
});

after(stopStartedChildren);

const start = startReadyChild;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** A served process with the slow model and a gated one, and a gated request in flight. */
async function startHeld(): Promise<{
  child: Awaited<ReturnType<typeof start>>;
  gate: Gate;
  held: ReturnType<typeof postJson>;
}> {
  const gate = createGate();
  const file = join(mkdtempSync(join(tmpdir(), "modelport-lifecycle-")), "modelport.yaml");
  writeFileSync(
    file,
    [
      // No request may time out while a gate holds it, however busy the machine.
      "limits: {timeoutMs: 600000}",
      "models:",
      `  - {name: slow, path: ${join(models, "slow.onnx")}}`,
      gate.modelYaml("gate"),
    ].join("\n"),
  );
  // A drain limit far beyond the test's span: the gate, not a timer, ends the drain.
  const child = await start(["-c", file, "--drain-timeout-ms", "120000"]);
  const held = postJson(`${child.url}/v1/models/gate/predict`, { rows: [[7]] });
  await gate.started(7);
  return { child, gate, held };
}

/** Polls /readyz until it is not 200; a refused connection fails (the drain is held open). */
async function readinessAfterSignal(url: string): Promise<Response> {
  for (let i = 0; ; i++) {
    const res = await fetch(`${url}/readyz`);
    if (res.status !== 200) return res;
    assert.ok(i < 3000, "readiness never turned false after SIGTERM");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("lifecycle of a served process", () => {
  it("50 requests in flight then SIGTERM: readiness turns 503, all 50 succeed and the process exits 0", async () => {
    const { child, gate, held } = await startHeld();
    const requests = Array.from({ length: 50 }, (_, i) =>
      postJson(`${child.url}/v1/models/gate/predict`, { rows: [[100 + i]] }),
    );
    // The signal comes once all of them (and the held one) are inside the server: none can
    // finish while the gate is shut, so each is either queued or on the runner.
    const depth = async () => ((await (await fetch(`${child.url}/v1/models/gate`)).json()) as any).batching;
    for (let i = 0; ; i++) {
      const d = await depth();
      if (d.queuedRows + d.inFlight === 51) break;
      assert.ok(i < 3000, `not all requests reached the server: ${JSON.stringify(d)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    const exit = child.stop("SIGTERM");
    const ready = await readinessAfterSignal(child.url);
    assert.equal(ready.status, 503);
    assert.match(JSON.stringify(await ready.json()), /shutting down/);
    // Still draining: nothing can have finished.
    assert.equal(child.proc.exitCode, null);
    gate.openAll();
    const results = await Promise.all(requests);
    assert.deepEqual(
      results.map((r) => r.status),
      new Array(50).fill(200),
    );
    assert.deepEqual(
      results.map((r) => r.body.outputs.y[0][0]),
      Array.from({ length: 50 }, (_, i) => 2 * (100 + i)),
    );
    const last = await held;
    assert.equal(last.status, 200, JSON.stringify(last.body));
    assert.deepEqual(last.body.outputs.y, [[14]]);
    assert.equal(await exit, 0, child.output().slice(-2000));
    assert.match(child.output(), /stopped cleanly/);
  });

  it("requests arriving during the drain get 503 MP_ERR_SERVER_SHUTTING_DOWN", async () => {
    const { child, gate, held } = await startHeld();
    const exit = child.stop("SIGTERM");
    // Once readiness says so, the drain has begun; the held request keeps it going.
    assert.equal((await readinessAfterSignal(child.url)).status, 503);
    const late = await postJson(`${child.url}/v1/models/slow/predict`, {
      rows: [[0, 1, 2, 3, 4, 5, 6, 7]],
    });
    assert.equal(late.status, 503);
    assert.equal(late.body.error.code, "MP_ERR_SERVER_SHUTTING_DOWN");
    assert.equal(late.body.error.retryable, true);
    gate.open(7);
    assert.equal((await held).status, 200);
    assert.equal(await exit, 0);
  });

  it("while the model computes, /livez keeps answering (the model owns a worker thread)", async (t) => {
    const child = await start([join(models, "slow.onnx")]);
    // One batch of 64 rows: one inference of about 3 s on a quiet machine, longer on a busy one.
    const rows = Array.from({ length: 64 }, (_, i) => [i, 1, 2, 3, 4, 5, 6, 7]);
    const long = postJson(`${child.url}/v1/models/slow/predict`, { rows });
    long.catch(() => {}); // awaited below; a failure before that must not surface as unhandled
    const batching = async () =>
      ((await (await fetch(`${child.url}/v1/models/slow`)).json()) as any).batching;
    const finished = async () =>
      Number(
        /^modelport_batch_rows_count\{model="slow"\} (\d+)/m.exec(
          await (await fetch(`${child.url}/metrics`)).text(),
        )?.[1] ?? 0,
      );
    for (let i = 0; (await batching()).inFlight < 1; i++) {
      assert.ok(i < 3000, "the inference never started");
      await new Promise((r) => setTimeout(r, 10));
    }
    // Batches finished so far: the golden check at load went through the batcher too.
    const before = await finished();
    // Probes answered while that inference still computes (no batch has finished): a blocked
    // event loop would answer none of them before the inference ended.
    const samples: number[] = [];
    let during = 0;
    while (during < 20) {
      const t0 = performance.now();
      const res = await fetch(`${child.url}/livez`);
      await res.arrayBuffer();
      samples.push(performance.now() - t0);
      assert.equal(res.status, 200);
      if ((await finished()) > before) break;
      during++;
      await new Promise((r) => setTimeout(r, 10));
    }
    samples.sort((a, b) => a - b);
    t.diagnostic(
      `${during} probes answered during one inference; /livez p50 ${percentile(samples, 50).toFixed(2)} ms, p99 ${percentile(samples, 99).toFixed(2)} ms`,
    );
    assert.equal(during, 20, `only ${during} /livez answers came while the model computed`);
    // And the inference was real: it ends, with one answer per row.
    const answer = await long;
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.outputs.y.length, 64);
    assert.equal(await finished(), before + 1);
  });
});
