// Jobs on the Redis store: two servers sharing one Redis see the same jobs, and a job submitted
// to one can be run by the other (the runner tier of a scaled-out deployment).
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { deletePrefix, type Relay, redisRelay, redisUrl, uniquePrefix } from "../helpers/redis.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

const prefix = uniquePrefix("jobs-redis");
let url: string;
let a: InProcessServer;
let b: InProcessServer;

before(async () => {
  url = await redisUrl();
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-jobs-redis-"));
  const yaml = (name: string, concurrency: number) => {
    const file = join(dir, name);
    writeFileSync(
      file,
      [
        "jobs:",
        "  store: redis",
        `  redisUrl: "${url}"`,
        `  redisPrefix: "${prefix}"`,
        `  concurrency: ${concurrency}`,
        `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
        "models:",
        `  - {name: tree, path: ${join(models, "churn-tree.onnx")}}`,
      ].join("\n"),
    );
    return file;
  };
  a = await startInProcess({ file: yaml("a.yaml", 1) });
  b = await startInProcess({ file: yaml("b.yaml", 1) });
});

after(async () => {
  await a.close();
  await b.close();
  await deletePrefix(url, prefix);
});

describe("jobs on Redis", () => {
  it("a job submitted to one server is visible from the other, runs once and succeeds", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await postJson(`${a.url}/v1/models/tree/jobs`, { rows: [[i, 50, 1, 12, 1, 10]] });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      ids.push(res.body.id);
    }
    for (const id of ids) {
      const job = (await (await fetch(`${b.url}/v1/jobs/${id}?wait=10`)).json()) as any;
      assert.equal(job.status, "succeeded", JSON.stringify(job));
      assert.equal(job.attempts, 1);
    }
    const list = (await (await fetch(`${b.url}/v1/jobs?model=tree&limit=100`)).json()) as any;
    assert.equal(list.jobs.length, ids.length);
    const sync = await postJson(`${a.url}/v1/models/tree/predict`, { rows: [[0, 50, 1, 12, 1, 10]] });
    const result = (await (await fetch(`${b.url}/v1/jobs/${ids[0]}/result`)).json()) as any;
    assert.deepEqual(result.outputs, sync.body.outputs);
  });

  it("/readyz reports the store's reachability; an unreachable Redis shows there but does not fail readiness", async () => {
    const ok = (await (await fetch(`${a.url}/readyz`)).json()) as { ready: boolean; jobs: unknown };
    assert.deepEqual(ok.jobs, { store: "redis", reachable: true, blobs: { backend: "fs", reachable: true } });
    const models = await testModels();
    const dir = mkdtempSync(join(tmpdir(), "modelport-jobs-redis-down-"));
    const file = join(dir, "down.yaml");
    // A port where Redis is not yet: a relay to the real one that starts refusing connections.
    const relay: Relay = await redisRelay(url);
    const downPrefix = uniquePrefix("jobs-redis-down");
    writeFileSync(
      file,
      `jobs: {store: redis, redisUrl: "${relay.url}", redisPrefix: "${downPrefix}"}\nmodels:\n  - {name: tree, path: ${join(models, "churn-tree.onnx")}}\n`,
    );
    const down = await startInProcess({ file });
    try {
      const res = await fetch(`${down.url}/readyz`);
      const body = (await res.json()) as {
        ready: boolean;
        jobs: { store: string; reachable: boolean; reason?: string };
      };
      assert.equal(res.status, 200, "synchronous predicts do not need the store");
      assert.equal(body.jobs.reachable, false);
      assert.match(body.jobs.reason ?? "", /127\.0\.0\.1:\d+|ECONNREFUSED|reach/);
      assert.match(await (await fetch(`${down.url}/metrics`)).text(), /modelport_job_store_up 0/);
      // Redis comes up later: the store is opened again on its next use, no restart needed.
      await relay.open();
      let reachable = false;
      for (let i = 0; i < 100 && !reachable; i++) {
        await new Promise((r) => setTimeout(r, 100));
        reachable = ((await (await fetch(`${down.url}/readyz`)).json()) as { jobs: { reachable: boolean } })
          .jobs.reachable;
      }
      assert.ok(reachable, "the store reconnected once Redis answered");
      const job = await postJson(`${down.url}/v1/models/tree/jobs`, { rows: [[0, 50, 1, 12, 1, 10]] });
      assert.equal(job.status, 202);
    } finally {
      await down.close();
      await relay.close();
      await deletePrefix(url, downPrefix);
    }
  });
});
