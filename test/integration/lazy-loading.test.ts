// Models that load on first use, unload when idle, and make room for each other within a budget
// of loaded models, through a real listening server: cold starts are waited for within the
// request's deadline and said so (header, metric); a load that cannot fit gets 503 + Retry-After.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { COLD_START_HEADER } from "../../src/protocol/headers.js";
import { metricValue } from "../helpers/metrics.js";
import { tempRepository, writeScaleVersion } from "../helpers/repository.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

async function predict(base: string, model: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/v1/models/${model}/predict`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ rows: [[1]] }),
  });
  const body = (await res.json()) as any;
  return {
    status: res.status,
    body,
    cold: res.headers.get(COLD_START_HEADER),
    retryAfter: res.headers.get("retry-after"),
  };
}

async function state(base: string, model: string): Promise<{ state: string; reason?: string }> {
  const d = (await (await fetch(`${base}/v1/models/${model}`)).json()) as any;
  return d.status;
}

describe("lazy loading, idle unloading and eviction", () => {
  let s: InProcessServer;

  before(async () => {
    const dir = tempRepository();
    writeScaleVersion(dir, "a", "1", { k: 2, delayMs: 300 });
    writeScaleVersion(dir, "b", "1", { k: 3 });
    writeScaleVersion(dir, "c", "1", { k: 4 });
    const file = join(dir, "modelport.yaml");
    writeFileSync(
      file,
      [
        "server: { maxLoadedModels: 1 }",
        "models:",
        "  - { name: a, path: a/1/model.mjs, load: lazy }",
        "  - { name: b, path: b/1/model.mjs, load: lazy, idleUnloadMs: 1000 }",
        "  - { name: c, path: c/1/model.mjs, load: lazy }",
      ].join("\n"),
    );
    s = await startInProcess({ file });
  });
  after(() => s.close());

  it("nothing loads at start-up, and the server is ready", async () => {
    const ready = await fetch(`${s.url}/readyz`);
    assert.equal(ready.status, 200);
    const body = (await ready.json()) as any;
    assert.deepEqual([body.models.a.state, body.models.a.loadable], ["unloaded", true]);
    const a = await state(s.url, "a");
    assert.equal(a.state, "unloaded");
    assert.match(a.reason ?? "", /lazy: loads on first use/);
    // Unknown names load nothing, however close to a lazy model's name.
    for (const name of ["ax", "a@", "a@2"]) {
      const r = await predict(s.url, encodeURIComponent(name));
      assert.equal(r.status, 404, name);
    }
    assert.equal((await state(s.url, "a")).state, "unloaded");
  });

  it("the first call loads the model and says it was a cold start; the next one does not", async () => {
    const first = await predict(s.url, "a");
    assert.equal(first.status, 200);
    assert.equal(first.body.outputs.y[0][0], 2);
    assert.ok(Number(first.cold) >= 0, "cold-start header on the first call");
    const second = await predict(s.url, "a");
    assert.equal(second.cold, null);
    assert.equal(await metricValue(s.url, "modelport_cold_starts_total", { model: "a" }), 1);
  });

  it("a model that does not fit the budget evicts the least recently used idle one", async () => {
    const b = await predict(s.url, "b");
    assert.equal(b.status, 200);
    assert.equal(b.body.outputs.y[0][0], 3);
    assert.equal((await state(s.url, "a")).state, "unloaded");
    assert.match((await state(s.url, "a")).reason ?? "", /evicted to make room for 'b'/);
    assert.equal(
      await metricValue(s.url, "modelport_model_unloads_total", { model: "a", reason: "evicted" }),
      1,
    );
  });

  it("idleUnloadMs unloads a model that had no call for that long", async () => {
    await until("b to unload when idle", async () => (await state(s.url, "b")).state === "unloaded");
    assert.match((await state(s.url, "b")).reason ?? "", /after 1000 ms without a call/);
    assert.equal(
      await metricValue(s.url, "modelport_model_unloads_total", { model: "b", reason: "idle" }),
      1,
    );
    assert.equal(
      (await fetch(`${s.url}/readyz`)).status,
      200,
      "unloaded models do not make the server unready",
    );
  });

  it("a load that cannot fit while every loaded model is busy gets 503 with Retry-After", async () => {
    // a loads (the budget is free again), then holds a 300 ms call while c asks for room.
    assert.equal((await predict(s.url, "a")).status, 200);
    const busy = predict(s.url, "a");
    await until("a's call to be in flight", async () => {
      const d = (await (await fetch(`${s.url}/v1/models/a`)).json()) as any;
      return d.version_status?.[0]?.inFlight === 1;
    });
    const refused = await predict(s.url, "c");
    assert.equal(refused.status, 503);
    assert.equal(refused.body.error.code, "MP_ERR_MODEL_CAPACITY");
    assert.equal(refused.retryAfter, "1");
    assert.equal((await busy).status, 200);
    // Once a is idle, c fits by evicting it.
    const c = await predict(s.url, "c");
    assert.equal(c.status, 200);
    assert.equal(c.body.outputs.y[0][0], 4);
  });

  it("a cold start past the request's deadline answers 504; the load goes on for the next call", async () => {
    const late = await predict(s.url, "a", { "x-request-timeout-ms": "1" });
    assert.equal(late.status, 504);
    assert.equal(late.body.error.code, "MP_ERR_DEADLINE_EXCEEDED");
    await until("a to finish loading", async () => (await state(s.url, "a")).state === "ready");
    const next = await predict(s.url, "a");
    assert.equal(next.status, 200);
    assert.equal(next.cold, null);
  });

  it("a model unloaded through the management API does not load on demand", async () => {
    const r = await fetch(`${s.url}/v2/repository/models/c/unload`, { method: "POST" });
    assert.equal(r.status, 200);
    await until("c unloaded", async () => (await state(s.url, "c")).state === "unloaded");
    const call = await predict(s.url, "c");
    assert.equal(call.status, 503);
    assert.equal(call.body.error.code, "MP_ERR_MODEL_NOT_READY");
  });
});

describe("lazy loading in a repository", () => {
  it("model.yaml load: lazy waits for the first call; the repository index shows it unloaded", async () => {
    const dir = tempRepository();
    writeScaleVersion(dir, "scale", "1", { k: 2 });
    writeFileSync(join(dir, "scale", "model.yaml"), "load: lazy\n");
    const s = await startInProcess({ flags: { repository: dir } });
    try {
      assert.equal((await state(s.url, "scale")).state, "unloaded");
      const first = await predict(s.url, "scale");
      assert.equal(first.status, 200);
      assert.ok(first.cold !== null);
      assert.deepEqual(s.server.catalogue.versions("scale"), ["1"]);
    } finally {
      await s.close();
    }
  });
});

describe("a lazy model that fails its checks on its first load", () => {
  it("is reported as failed, and not loaded again on each call", async () => {
    const dir = tempRepository();
    writeScaleVersion(dir, "bad", "1", { k: 2, goldenK: 99 });
    const file = join(dir, "modelport.yaml");
    writeFileSync(file, "models:\n  - { name: bad, path: bad/1/model.mjs, load: lazy }\n");
    const s = await startInProcess({ file });
    try {
      assert.equal((await fetch(`${s.url}/readyz`)).status, 200);
      const first = await predict(s.url, "bad");
      assert.equal(first.status, 503);
      assert.ok(first.cold !== null, "the first call waited for the load");
      const second = await predict(s.url, "bad");
      assert.equal(second.status, 503);
      assert.equal(second.cold, null, "no second load");
      const ready = await fetch(`${s.url}/readyz`);
      assert.equal(ready.status, 503);
      const body = (await ready.json()) as any;
      assert.equal(body.models.bad.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
      assert.equal(await metricValue(s.url, "modelport_cold_starts_total", { model: "bad" }), 1);
    } finally {
      await s.close();
    }
  });
});
