// A model repository served by a real listening server: versions side by side, the management
// routes (OIP repository extension, promote, rollback) and the CLI on them, golden-gated swaps
// under load with no failed request, refused candidates, poll mode, and who may manage.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { metricValue } from "../helpers/metrics.js";
import { testModels } from "../helpers/models.js";
import {
  removeVersion,
  tempRepository,
  writeModelSettings,
  writeScaleVersion,
} from "../helpers/repository.js";
import { CLI, type InProcessServer, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const run = promisify(execFile);

async function post(url: string, body: unknown = {}, key?: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** y for x = 1 from the model (its factor K), or the error code. */
async function factor(base: string, path = "/v1/models/scale/predict"): Promise<number | string> {
  const r = await post(`${base}${path}`, { rows: [[1]] });
  if (r.status !== 200) return `${r.status} ${r.body?.error?.code}`;
  return r.body.outputs.y[0][0];
}

describe("model repository: versions side by side and the management API", () => {
  let dir: string;
  let s: InProcessServer;

  before(async () => {
    dir = tempRepository();
    writeModelSettings(dir, "scale", "versionPolicy: { latest: 2 }\n");
    writeScaleVersion(dir, "scale", "1", { k: 2 });
    writeScaleVersion(dir, "scale", "2", { k: 3 });
    // Not a model: skipped with a warning, the rest still served.
    writeScaleVersion(dir, "bad name!", "1", { k: 1 });
    s = await startInProcess({ flags: { repository: dir } });
  });
  after(() => s.close());

  it("serves the newest version unversioned and every loaded version by path, query and name@version", async () => {
    assert.equal(await factor(s.url), 3);
    assert.equal(await factor(s.url, "/v1/models/scale/versions/1/predict"), 2);
    assert.equal(await factor(s.url, "/v1/models/scale/predict?version=1"), 2);
    assert.equal(await factor(s.url, "/v1/models/scale@1/predict"), 2);
    const oip = await post(`${s.url}/v2/models/scale/versions/1/infer`, {
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [5] }],
    });
    assert.equal(oip.status, 200);
    assert.deepEqual([oip.body.model_version, oip.body.outputs[0].data], ["1", [10]]);
    assert.equal(
      await factor(s.url, "/v1/models/scale/versions/7/predict"),
      "404 MP_ERR_MODEL_VERSION_NOT_FOUND",
    );
    const meta = (await (await fetch(`${s.url}/v2/models/scale`)).json()) as { versions: string[] };
    assert.deepEqual(meta.versions.sort(), ["1", "2"]);
    const described = (await (await fetch(`${s.url}/v1/models/scale`)).json()) as any;
    assert.equal(described.version, "2");
    assert.deepEqual(described.version_status.map((v: any) => [v.version, v.role, v.ready]).sort(), [
      ["1", "loaded", true],
      ["2", "current", true],
    ]);
    assert.ok(s.logs.some((l) => String(l.msg).includes("bad name!") && String(l.msg).includes("skipped")));
  });

  it("lists models and versions in the OIP repository index, and only ready ones on request", async () => {
    const index = await post(`${s.url}/v2/repository/index`);
    assert.equal(index.status, 200);
    assert.deepEqual(index.body.map((e: any) => `${e.name}/${e.version}:${e.state}`).sort(), [
      "scale/1:READY",
      "scale/2:READY",
    ]);
    const ready = await post(`${s.url}/v2/repository/index`, { ready: true });
    assert.equal(ready.body.length, 2);
    const bad = await post(`${s.url}/v2/repository/index`, { ready: "yes" });
    assert.equal(bad.status, 400);
    // As some clients send it: a JSON content type and no body at all.
    const empty = await fetch(`${s.url}/v2/repository/index`, {
      method: "POST",
      headers: { "content-type": "application/json" },
    });
    assert.equal(empty.status, 200);
    const notJson = await fetch(`${s.url}/v2/repository/index`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{nope",
    });
    assert.equal(notJson.status, 400);
  });

  it("a candidate that fails its golden check never serves: the current version keeps serving and says why", async () => {
    writeScaleVersion(dir, "scale", "3", { k: 4, goldenK: 99 });
    const load = await post(`${s.url}/v2/repository/models/scale/load`);
    assert.equal(load.status, 409);
    assert.match(load.body.error, /version 3 was not loaded/);
    assert.equal(await factor(s.url), 3, "version 2 still serves");
    const ready = await fetch(`${s.url}/readyz`);
    assert.equal(ready.status, 200);
    const body = (await ready.json()) as any;
    assert.equal(body.models.scale.refused[0].version, "3");
    assert.equal(body.models.scale.refused[0].code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
    const index = await post(`${s.url}/v2/repository/index`);
    const v3 = index.body.find((e: any) => e.version === "3");
    assert.equal(v3.state, "UNAVAILABLE");
    assert.match(v3.reason, /refused/);
    // Fixed on disk: the next load takes it.
    writeScaleVersion(dir, "scale", "3", { k: 4 });
    assert.equal((await post(`${s.url}/v2/repository/models/scale/load`)).status, 200);
    assert.equal(await factor(s.url), 4);
    // latest: 2 keeps versions 2 and 3; version 1 drained and unloaded.
    await until(
      "version 1 to unload",
      () =>
        s.server.catalogue.versions("scale").join() === "2,3" ||
        s.server.catalogue.versions("scale").join() === "3,2",
    );
    assert.equal(
      await factor(s.url, "/v1/models/scale/versions/1/predict"),
      "404 MP_ERR_MODEL_VERSION_NOT_FOUND",
    );
  });

  it("promote and rollback swap versions; rollback holds the newer one back until promoted", async () => {
    const back = await post(`${s.url}/v1/models/scale/rollback`);
    assert.equal(back.status, 200);
    assert.deepEqual([back.body.from, back.body.to], ["3", "2"]);
    assert.equal(await factor(s.url), 3);
    const promoted = await post(`${s.url}/v1/models/scale/promote`, { version: "3" });
    assert.equal(promoted.status, 200);
    assert.equal(promoted.body.version, "3");
    assert.equal(await factor(s.url), 4);
    const missing = await post(`${s.url}/v1/models/scale/promote`, { version: "42" });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, "MP_ERR_MODEL_VERSION_NOT_FOUND");
    const noBody = await post(`${s.url}/v1/models/scale/promote`, {});
    assert.equal(noBody.status, 400);
    // A version that is an object String() cannot convert (its audit line once threw): a coded 400.
    const object = await post(`${s.url}/v1/models/scale/promote`, { version: { toString: 1, valueOf: 2 } });
    assert.deepEqual([object.status, object.body.error?.code], [400, "MP_ERR_REQUEST_INVALID"]);
    // Past the management routes' own 64 KiB body limit: a 413 that names that limit.
    const big = await post(`${s.url}/v1/models/scale/promote`, { version: "1".repeat(70_000) });
    assert.equal(big.status, 413);
    assert.match(big.body.error.message, /larger than 65536 bytes; a management request's body/);
    // A name the router refuses (over 100 characters) is answered in the repository extension's
    // OIP shape, as its other errors are.
    const long = await post(`${s.url}/v2/repository/models/${"x".repeat(101)}/load`);
    assert.deepEqual(
      [long.status, long.body.code, typeof long.body.error],
      [400, "MP_ERR_REQUEST_INVALID", "string"],
    );
  });

  it("unload stops serving without making the server unready; load brings the model back", async () => {
    assert.equal((await post(`${s.url}/v2/repository/models/scale/unload`)).status, 200);
    assert.equal(await factor(s.url), "503 MP_ERR_MODEL_NOT_READY");
    assert.equal((await fetch(`${s.url}/readyz`)).status, 200);
    const index = await post(`${s.url}/v2/repository/index`);
    assert.deepEqual(index.body, [
      { name: "scale", state: "UNAVAILABLE", reason: "unloaded through the management API" },
    ]);
    assert.equal((await post(`${s.url}/v2/repository/models/scale/load`)).status, 200);
    assert.equal(await factor(s.url), 4);
    assert.equal((await post(`${s.url}/v2/repository/models/nope/load`)).status, 404);
    const params = await post(`${s.url}/v2/repository/models/scale/load`, {
      parameters: { config: "{}" },
    });
    assert.equal(params.status, 400);
  });

  it("the CLI lists, promotes and rolls back", async () => {
    const list = await run(process.execPath, [CLI, "models", "list", "--url", s.url]);
    assert.match(list.stdout, /^NAME\s+VERSION\s+STATE/m);
    assert.match(list.stdout, /scale\s+3\s+READY/);
    const promote = await run(process.execPath, [CLI, "models", "promote", "scale", "2", "--url", s.url]);
    assert.match(promote.stdout, /version 2 promoted/);
    assert.equal(await factor(s.url), 3);
    await assert.rejects(
      run(process.execPath, [CLI, "models", "promote", "scale", "9", "--url", s.url]),
      (err: any) => {
        assert.equal(err.code, 1);
        assert.match(err.stderr, /promote failed \(404\)/);
        return true;
      },
    );
  });
});

describe("model repository: a swap under load loses no request", () => {
  it("every request at concurrency 32 during load → check → swap → drain answers 200, from the old version or the new", async () => {
    const dir = tempRepository();
    writeScaleVersion(dir, "scale", "1", { k: 2, delayMs: 5 });
    const s = await startInProcess({ flags: { repository: dir } });
    try {
      let stop = false;
      const seen: (number | string)[] = [];
      const clients = Array.from({ length: 32 }, async () => {
        while (!stop) seen.push(await factor(s.url));
      });
      await until("requests to flow", () => seen.length > 20);
      writeScaleVersion(dir, "scale", "2", { k: 3, delayMs: 5 });
      assert.equal((await post(`${s.url}/v2/repository/models/scale/load`)).status, 200);
      const at = seen.length;
      await until("requests after the swap", () => seen.length > at + 20);
      stop = true;
      await Promise.all(clients);
      const failures = seen.filter((v) => typeof v === "string");
      assert.deepEqual(failures, [], "no request failed");
      assert.ok(seen.includes(2) && seen.includes(3), "both versions answered");
      // Once the load returned, unversioned requests go to version 2 only (the 32 in flight aside).
      assert.ok(seen.slice(at + 32).every((v) => v === 3));
      await until("version 1 to drain and unload", () =>
        s.logs.some((l) => String(l.msg).includes("version 1 unloaded")),
      );
      assert.deepEqual(s.server.catalogue.versions("scale"), ["2"]);
    } finally {
      await s.close();
    }
  });
});

describe("model repository: poll mode", () => {
  it("picks up new, changed and removed versions", async () => {
    const dir = tempRepository();
    writeScaleVersion(dir, "scale", "1", { k: 2 });
    const s = await startInProcess({ flags: { repository: dir, repositoryPollMs: 100 } });
    try {
      assert.equal(await factor(s.url), 2);
      writeScaleVersion(dir, "scale", "2", { k: 3 });
      await until("version 2 to serve", async () => (await factor(s.url)) === 3);
      // Changed in place (same version): a fresh copy is checked and swapped in.
      writeScaleVersion(dir, "scale", "2", { k: 5 });
      await until("the changed version 2 to serve", async () => (await factor(s.url)) === 5);
      // A new model folder appears, then the newest version goes: version 1 serves again.
      writeScaleVersion(dir, "other", "1", { k: 7 });
      await until("the new model", async () => (await factor(s.url, "/v1/models/other/predict")) === 7);
      // Unloaded by an operator, it stays unloaded through polls until loaded again.
      assert.equal((await post(`${s.url}/v2/repository/models/other/unload`)).status, 200);
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(await factor(s.url, "/v1/models/other/predict"), "503 MP_ERR_MODEL_NOT_READY");
      assert.equal((await post(`${s.url}/v2/repository/models/other/load`)).status, 200);
      assert.equal(await factor(s.url, "/v1/models/other/predict"), 7);
      removeVersion(dir, "scale", "2");
      await until("version 1 to serve again", async () => (await factor(s.url)) === 2);
      removeVersion(dir, "other", "1");
      await until("the removed model to unload", async () =>
        String(await factor(s.url, "/v1/models/other/predict")).startsWith("503"),
      );
    } finally {
      await s.close();
    }
  });
});

describe("model repository: canary weights and shadow traffic", () => {
  let dir: string;
  let s: InProcessServer;
  const admin = "admin-key-1234567890";
  const manage = (path: string, body: unknown) => post(`${s.url}${path}`, body, admin);
  const metric = (name: string, labels: Record<string, string>) =>
    metricValue(s.url, name, labels, { authorization: `Bearer ${admin}` });

  before(async () => {
    dir = tempRepository();
    writeModelSettings(dir, "scale", "versionPolicy: all\n");
    writeScaleVersion(dir, "scale", "1", { k: 2 });
    writeScaleVersion(dir, "scale", "2", { k: 3 });
    writeScaleVersion(dir, "scale", "3", { k: 3 });
    s = await startInProcess({ flags: { repository: dir, adminKeys: [admin] } });
    await manage("/v1/models/scale/promote", { version: "2" });
  });
  after(() => s.close());

  it("weights split unversioned calls between versions, counted per version; null ends the split", async () => {
    const set = await manage("/v1/models/scale/weights", { weights: { "1": 1, "2": 1 } });
    assert.equal(set.status, 200);
    assert.deepEqual(set.body.traffic.weights, { "1": 1, "2": 1 });
    const answers = [];
    for (let i = 0; i < 200; i++) answers.push(await factor(s.url));
    const ones = answers.filter((a) => a === 2).length;
    const twos = answers.filter((a) => a === 3).length;
    assert.equal(ones + twos, 200, "every call answered by version 1 or 2");
    // 200 fair coin flips: each side 100 ± 7 (one sigma); 40..160 is over eight sigmas.
    assert.ok(ones >= 40 && twos >= 40, `split ${ones}/${twos}`);
    const v1 = await metric("modelport_version_calls_total", { model: "scale", version: "1", outcome: "ok" });
    assert.ok(v1 !== undefined && v1 >= ones, `version 1 counted ${v1}, answered ${ones}`);
    // Each answer names the version that computed it, split or not.
    for (let i = 0; i < 20; i++) {
      const r = await post(`${s.url}/v1/models/scale/predict`, { rows: [[1]] });
      assert.equal(r.body.model_version, { 2: "1", 3: "2" }[r.body.outputs.y[0][0] as number]);
    }
    // Pinned calls ignore the split.
    for (let i = 0; i < 5; i++) assert.equal(await factor(s.url, "/v1/models/scale/versions/2/predict"), 3);
    // A job records the version that computed it: here version 1, while version 2 is current.
    await manage("/v1/models/scale/weights", { weights: { "1": 1 } });
    const submitted = await post(`${s.url}/v1/models/scale/jobs`, { rows: [[1]] });
    assert.equal(submitted.status, 202);
    const job = (await (await fetch(`${s.url}/v1/jobs/${submitted.body.id}?wait=30`)).json()) as any;
    assert.equal(job.status, "succeeded");
    const result = (await (await fetch(`${s.url}/v1/jobs/${submitted.body.id}/result`)).json()) as any;
    assert.deepEqual([result.model_version, result.outputs.y[0][0]], ["1", 2]);
    assert.equal((await manage("/v1/models/scale/weights", { weights: { "9": 1 } })).status, 404);
    assert.equal((await manage("/v1/models/scale/weights", { weights: { "1": -1 } })).status, 400);
    assert.equal((await manage("/v1/models/scale/weights", { weights: { "1": 0 } })).status, 400);
    assert.equal((await manage("/v1/models/scale/weights", {})).status, 400);
    // Weights whose sum overflows would send every call to the current version.
    const overflow = await manage("/v1/models/scale/weights", { weights: { "1": 1e308, "2": 1e308 } });
    assert.deepEqual([overflow.status, overflow.body.error.code], [400, "MP_ERR_REQUEST_INVALID"]);
    const cleared = await manage("/v1/models/scale/weights", { weights: null });
    assert.equal(cleared.body.traffic, undefined);
    for (let i = 0; i < 10; i++) assert.equal(await factor(s.url), 3);
  });

  it("a promote ends a split", async () => {
    await manage("/v1/models/scale/weights", { weights: { "1": 1, "2": 1 } });
    const promoted = await manage("/v1/models/scale/promote", { version: "2" });
    assert.equal(promoted.body.traffic, undefined);
  });

  it("a shadow version gets a copy of live calls; answers are compared, not returned", async () => {
    const set = await manage("/v1/models/scale/shadow", { version: "1" });
    assert.equal(set.status, 200);
    for (let i = 0; i < 20; i++) assert.equal(await factor(s.url), 3, "the live answer is version 2's");
    // Pinned calls are not mirrored.
    await factor(s.url, "/v1/models/scale/versions/2/predict");
    await until("20 comparisons", async () => {
      const d = (await (await fetch(`${s.url}/v1/models/scale`)).json()) as any;
      return d.traffic?.shadow?.compared === 20;
    });
    const d = (await (await fetch(`${s.url}/v1/models/scale`)).json()) as any;
    assert.deepEqual(
      [
        d.traffic.shadow.version,
        d.traffic.shadow.disagreed,
        d.traffic.shadow.disagreementRate,
        d.traffic.shadow.maxAbsDiff,
      ],
      ["1", 20, 1, 1],
    );
    assert.equal(
      await metric("modelport_shadow_comparisons_total", {
        model: "scale",
        version: "1",
        result: "disagree",
      }),
      20,
    );
    assert.equal(await metric("modelport_shadow_max_abs_diff", { model: "scale", version: "1" }), 1);
    assert.ok(s.logs.some((l) => String(l.msg).includes("shadow version 1 disagrees")));

    // A version with the same answers agrees.
    await manage("/v1/models/scale/shadow", { version: "3", sample: 1 });
    for (let i = 0; i < 10; i++) await factor(s.url);
    await until("10 comparisons", async () => {
      const x = (await (await fetch(`${s.url}/v1/models/scale`)).json()) as any;
      return x.traffic?.shadow?.compared === 10;
    });
    const agree = (await (await fetch(`${s.url}/v1/models/scale`)).json()) as any;
    assert.deepEqual([agree.traffic.shadow.disagreed, agree.traffic.shadow.maxAbsDiff], [0, 0]);
    assert.equal((await manage("/v1/models/scale/shadow", { version: "3", sample: 2 })).status, 400);
    assert.equal((await manage("/v1/models/scale/shadow", { version: "8" })).status, 404);
    const stopped = await manage("/v1/models/scale/shadow", { version: null });
    assert.equal(stopped.body.traffic, undefined);
  });

  it("the CLI sets weights and a shadow", async () => {
    const env = { ...process.env, MODELPORT_ADMIN_KEY: admin };
    const w = await run(process.execPath, [CLI, "models", "weights", "scale", "2=3", "3=1", "--url", s.url], {
      env,
    });
    assert.match(w.stdout, /"weights":\{"2":3,"3":1\}/);
    const c = await run(process.execPath, [CLI, "models", "weights", "scale", "--clear", "--url", s.url], {
      env,
    });
    assert.match(c.stdout, /all traffic to the current version/);
    const sh = await run(
      process.execPath,
      [CLI, "models", "shadow", "scale", "1", "--sample", "0.5", "--url", s.url],
      { env },
    );
    assert.match(sh.stdout, /"sample":0.5/);
    await run(process.execPath, [CLI, "models", "shadow", "scale", "--stop", "--url", s.url], { env });
  });
});

describe("model repository: real ONNX and GGUF models", () => {
  it("a corrupted weight file and a file that differs from its manifest never serve; the current version does", async () => {
    const models = await testModels();
    const dir = tempRepository();
    const onnx = (v: string) => {
      mkdirSync(join(dir, "churn", v), { recursive: true });
      cpSync(join(models, "churn-tree.onnx"), join(dir, "churn", v, "model.onnx"));
      cpSync(join(models, "churn-tree.golden.json"), join(dir, "churn", v, "model.golden.json"));
    };
    onnx("1");
    const s = await startInProcess({ flags: { repository: dir } });
    try {
      const predict = () => post(`${s.url}/v1/models/churn/predict`, { rows: [[27, 51.25, 1, 1, 0, 37]] });
      assert.equal((await predict()).status, 200);
      // Version 2: the weights cut in half.
      onnx("2");
      const file = join(dir, "churn", "2", "model.onnx");
      writeFileSync(file, readFileSync(file).subarray(0, 200));
      const corrupted = await post(`${s.url}/v2/repository/models/churn/load`);
      assert.equal(corrupted.status, 409);
      assert.match(corrupted.body.error, /version 2 was not loaded/);
      // Version 3: intact bytes, but the manifest expects other ones.
      onnx("3");
      writeFileSync(
        join(dir, "churn", "3", "model.manifest.json"),
        JSON.stringify({ sha256: "0".repeat(64) }),
      );
      const mismatch = await post(`${s.url}/v2/repository/models/churn/load`);
      assert.equal(mismatch.status, 409);
      assert.match(mismatch.body.error, /sha256/);
      const described = (await (await fetch(`${s.url}/v1/models/churn`)).json()) as any;
      assert.equal(described.version, "1");
      assert.deepEqual(
        described.refused_versions.map((r: any) => [r.version, r.code]),
        [
          ["2", "MP_ERR_MODEL_LOAD_FAILED"],
          ["3", "MP_ERR_MODEL_CHECKSUM_MISMATCH"],
        ],
      );
      assert.equal((await predict()).status, 200, "version 1 still serves");
    } finally {
      await s.close();
    }
  });

  it("lazy ONNX and GGUF models load on their first call, within its deadline", async () => {
    const models = await testModels();
    const dir = tempRepository();
    for (const [name, file] of [
      ["churn", "churn-tree"],
      ["llama", "tiny-llama"],
    ] as const) {
      const ext = name === "llama" ? "gguf" : "onnx";
      mkdirSync(join(dir, name, "1"), { recursive: true });
      cpSync(join(models, `${file}.${ext}`), join(dir, name, "1", `model.${ext}`));
      cpSync(join(models, `${file}.golden.json`), join(dir, name, "1", "model.golden.json"));
      writeFileSync(
        join(dir, name, "model.yaml"),
        name === "llama" ? "load: lazy\nthreads: 1\n" : "load: lazy\n",
      );
    }
    const s = await startInProcess({ flags: { repository: dir }, cores: 2 });
    try {
      assert.deepEqual(s.server.catalogue.versions("churn"), []);
      assert.deepEqual(s.server.catalogue.versions("llama"), []);
      const deadline = { "x-request-timeout-ms": "60000" };
      const churn = await fetch(`${s.url}/v1/models/churn/predict`, {
        method: "POST",
        headers: { "content-type": "application/json", ...deadline },
        body: JSON.stringify({ rows: [[27, 51.25, 1, 1, 0, 37]] }),
      });
      assert.equal(churn.status, 200);
      assert.ok(Number(churn.headers.get("x-modelport-cold-start-ms")) > 0);
      const llama = await fetch(`${s.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...deadline },
        body: JSON.stringify({ model: "llama", prompt: "the", max_tokens: 3 }),
      });
      assert.equal(llama.status, 200, await llama.clone().text());
      assert.ok(Number(llama.headers.get("x-modelport-cold-start-ms")) > 0);
      assert.equal(((await llama.json()) as any).usage.completion_tokens > 0, true);
    } finally {
      await s.close();
    }
  });
});

describe("model repository: language models by name@version", () => {
  it("an embeddings folder serves as a version, and OpenAI routes pick a version with name@version", async () => {
    const models = await testModels();
    const dir = tempRepository();
    writeModelSettings(dir, "embed", "versionPolicy: all\n");
    for (const v of ["1", "2"]) {
      cpSync(join(models, "tiny-embed"), join(dir, "embed", v), { recursive: true });
      cpSync(join(models, "tiny-embed.golden.json"), join(dir, "embed", v, "golden.json"));
    }
    const s = await startInProcess({ flags: { repository: dir } });
    try {
      for (const model of ["embed", "embed@1", "embed@2"]) {
        const r = await post(`${s.url}/v1/embeddings`, { model, input: "hello" });
        assert.equal(r.status, 200, `${model}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.data[0].embedding.length, 32);
      }
      const missing = await post(`${s.url}/v1/embeddings`, { model: "embed@3", input: "hello" });
      assert.equal(missing.status, 404);
      const described = (await (await fetch(`${s.url}/v1/models/embed`)).json()) as any;
      assert.equal(described.version, "2");
      assert.equal(described.version_status.length, 2);
    } finally {
      await s.close();
    }
  });
});

describe("model repository: who may manage", () => {
  const client = "client-key-123456";
  const admin = "admin-key-1234567890";

  it("admin keys manage; client keys and anonymous callers do not", async () => {
    const dir = tempRepository();
    writeScaleVersion(dir, "scale", "1", { k: 2 });
    const s = await startInProcess({ flags: { repository: dir, apiKeys: [client], adminKeys: [admin] } });
    try {
      assert.equal((await post(`${s.url}/v2/repository/index`)).status, 401);
      const asClient = await post(`${s.url}/v2/repository/index`, {}, client);
      assert.equal(asClient.status, 403);
      assert.match(asClient.body.error, /admin key/);
      assert.equal((await post(`${s.url}/v1/models/scale/rollback`, {}, client)).status, 403);
      assert.equal((await post(`${s.url}/v2/repository/index`, {}, admin)).status, 200);
      // An admin key is an API key too.
      assert.equal((await post(`${s.url}/v1/models/scale/predict`, { rows: [[1]] }, admin)).status, 200);
    } finally {
      await s.close();
    }
  });

  it("a server with API keys but no admin key refuses management to every key", async () => {
    const dir = tempRepository();
    writeScaleVersion(dir, "scale", "1", { k: 2 });
    const s = await startInProcess({ flags: { repository: dir, apiKeys: [client] } });
    try {
      const r = await post(`${s.url}/v2/repository/models/scale/unload`, {}, client);
      assert.equal(r.status, 403);
      assert.match(r.body.error, /server\.adminKeys/);
      assert.equal(await factor(s.url).catch(() => "x"), "401 MP_ERR_AUTH_REQUIRED");
    } finally {
      await s.close();
    }
  });
});
