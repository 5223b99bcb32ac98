// Nothing accepted is lost: 1,000 jobs submitted at concurrency 16 to a real server process,
// SIGKILL part-way, start it again: every job that got a 202 ends succeeded with the right
// result, exactly once in the store.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { postJson, startChild, waitReady } from "../helpers/server.js";

const TOTAL = 1000;
const CONCURRENCY = 16;
const row = (i: number) => [i % 73, 20 + (i % 100), i % 10, [1, 12, 24][i % 3]!, i % 2, i % 100];

describe("jobs survive a crash", () => {
  it("SIGKILL part-way through 1,000 jobs: every accepted job succeeds once, with the right result", async () => {
    const models = await testModels();
    const dir = mkdtempSync(join(tmpdir(), "modelport-crash-"));
    const file = join(dir, "crash.yaml");
    writeFileSync(
      file,
      [
        "jobs:",
        `  sqlitePath: ${join(dir, "jobs.db")}`,
        "  leaseMs: 2000",
        "  concurrency: 4",
        "models:",
        `  - {name: tree, path: ${join(models, "churn-tree.onnx")}}`,
      ].join("\n"),
    );
    let server = await startChild(["-c", file]);
    assert.equal((await waitReady(server.url)).status, 200);

    const accepted = new Map<string, number>();
    let next = 0;
    let killed = false;
    // The client pattern: an Idempotency-Key per job, retried on network errors until answered.
    const submitOne = async (i: number) => {
      for (;;) {
        const res = await postJson(
          `${server.url}/v1/models/tree/jobs`,
          { rows: [row(i)] },
          { "idempotency-key": `job-${i}` },
        ).catch(() => undefined);
        if (res) {
          if (res.status === 202 || res.status === 200) accepted.set(res.body.id, i);
          else assert.fail(`job ${i}: ${res.status} ${JSON.stringify(res.body)}`);
          return;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const submitter = async () => {
      while (next < TOTAL) {
        const i = next++;
        if (i === 400) {
          killed = true;
          await server.stop("SIGKILL");
        }
        await submitOne(i);
      }
    };
    const workers = Array.from({ length: CONCURRENCY }, submitter);
    // Restart as soon as the kill happened; submitters keep going against the new process.
    while (!killed) await new Promise((r) => setTimeout(r, 5));
    const restarted = await startChild(["-c", file]);
    assert.equal((await waitReady(restarted.url)).status, 200);
    server = restarted;
    await Promise.all(workers);
    assert.ok(accepted.size >= TOTAL * 0.9, `accepted ${accepted.size}`);

    // Expected outputs from synchronous predicts of the same rows.
    const inputs = [...new Set(accepted.values())];
    const expected = new Map<number, unknown>();
    for (let k = 0; k < inputs.length; k += 500) {
      const chunk = inputs.slice(k, k + 500);
      const sync = await postJson(`${server.url}/v1/models/tree/predict`, { rows: chunk.map(row) });
      chunk.forEach((i, j) => {
        expected.set(i, [sync.body.outputs.label[j], sync.body.outputs.probabilities[j]]);
      });
    }

    const deadline = Date.now() + 60_000;
    for (const [id, i] of accepted) {
      let job: any;
      do {
        job = (await (await fetch(`${server.url}/v1/jobs/${id}?wait=10`)).json()) as any;
      } while (job.status !== "succeeded" && job.status !== "failed" && Date.now() < deadline);
      assert.equal(job.status, "succeeded", `${id}: ${JSON.stringify(job)}`);
      const result = (await (await fetch(`${server.url}/v1/jobs/${id}/result`)).json()) as any;
      assert.deepEqual([result.outputs.label[0], result.outputs.probabilities[0]], expected.get(i), id);
    }

    // Exactly once in the store: walk every page and count ids.
    const seen = new Map<string, number>();
    let cursor: string | undefined;
    do {
      const page = (await (
        await fetch(
          `${server.url}/v1/jobs?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
        )
      ).json()) as any;
      for (const j of page.jobs) seen.set(j.id, (seen.get(j.id) ?? 0) + 1);
      cursor = page.next_cursor;
    } while (cursor);
    for (const id of accepted.keys()) assert.equal(seen.get(id), 1, id);
    assert.equal(await server.stop("SIGTERM"), 0);
  });

  it("SIGTERM: running jobs finish, queued ones wait in the store, the next process runs them", async () => {
    const models = await testModels();
    const dir = mkdtempSync(join(tmpdir(), "modelport-deploy-"));
    const file = join(dir, "deploy.yaml");
    writeFileSync(
      file,
      [
        "server: {drainTimeoutMs: 5000}",
        "jobs:",
        `  sqlitePath: ${join(dir, "jobs.db")}`,
        "  concurrency: 1",
        "models:",
        `  - {name: slow, path: ${join(models, "slow.onnx")}}`,
      ].join("\n"),
    );
    const first = await startChild(["-c", file]);
    assert.equal((await waitReady(first.url)).status, 200);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await postJson(`${first.url}/v1/models/slow/jobs`, { rows: [[i, 1, 2, 3, 4, 5, 6, 7]] });
      assert.equal(res.status, 202);
      ids.push(res.body.id);
    }
    await new Promise((r) => setTimeout(r, 80)); // the first job is running
    assert.equal(await first.stop("SIGTERM"), 0, first.output().slice(-1500));
    const second = await startChild(["-c", file]);
    assert.equal((await waitReady(second.url)).status, 200);
    for (const id of ids) {
      const job = (await (await fetch(`${second.url}/v1/jobs/${id}?wait=20`)).json()) as any;
      assert.equal(job.status, "succeeded", JSON.stringify(job));
      assert.equal(job.attempts, 1, "a drained or never-started job does not lose an attempt");
    }
    assert.equal(await second.stop("SIGTERM"), 0);
  });
});
