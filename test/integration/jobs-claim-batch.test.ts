// Jobs claimed together reach the model together: a worker of a tensor model claims up to
// jobs.claimBatch jobs in one store call and sends their inputs to the batcher at once, so the
// model computes them as one batch, not as one batch per job. Counted through /metrics
// (modelport_batch_rows), with a gated model holding the runner busy meanwhile: no timing.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createGate, GATE_HANDLER, type Gate } from "../helpers/gate.js";
import { metricValue } from "../helpers/metrics.js";
import { postJson } from "../helpers/server.js";
import { type JobsServer, startJobsServer, until } from "./jobs-harness.js";

describe("jobs claimed in a batch", () => {
  let srv: JobsServer;
  let gate: Gate;

  before(async () => {
    gate = createGate();
    srv = await startJobsServer({
      // One loop claiming up to 8; one batch on the runner at a time, so the jobs queue behind it.
      jobs: ["  concurrency: 1", "  claimBatch: 8"],
      models: [
        `  - {name: g, backend: custom, path: "${GATE_HANDLER}", options: {dir: "${gate.dir}", batchable: true}, batching: {maxInFlight: 1, maxDelayMs: 0}}`,
      ],
    });
  });

  after(async () => {
    gate.openAll();
    await srv?.close();
  });

  it("eight jobs claimed at once go to the model as one batch of eight rows", async () => {
    // A synchronous request holds the runner (its gate is shut).
    const held = postJson(`${srv.url}/v1/models/g/predict`, { rows: [[100]] });
    await gate.started(100);
    const sub = await postJson(`${srv.url}/v1/models/g/jobs`, {
      jobs: Array.from({ length: 8 }, (_, i) => ({ rows: [[i + 1]] })),
    });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    // All eight wait in the batcher together: one claim of eight, sent at once.
    assert.ok(
      await until(
        async () => (await metricValue(srv.url, "modelport_queue_depth_rows", { model: "g" })) === 8,
      ),
      "the eight jobs' rows wait in the model's queue together",
    );
    gate.openAll();
    assert.equal((await held).status, 200);
    for (const [i, job] of (sub.body.jobs as { id: string }[]).entries()) {
      const done = (await (await fetch(`${srv.url}/v1/jobs/${job.id}?wait=30`)).json()) as any;
      assert.equal(done.status, "succeeded", JSON.stringify(done));
      const result = (await (await fetch(`${srv.url}/v1/jobs/${job.id}/result`)).json()) as any;
      assert.deepEqual(result.outputs.y, [[2 * (i + 1)]]);
    }
    // Two batches in all: the held request's row, then the eight jobs' rows together.
    assert.equal(await metricValue(srv.url, "modelport_batch_rows_count", { model: "g" }), 2);
    assert.equal(await metricValue(srv.url, "modelport_batch_rows_sum", { model: "g" }), 9);
  });
});
