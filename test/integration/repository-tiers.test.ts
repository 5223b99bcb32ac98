// A model repository across tiers: two runners serve repositories (runner A holds versions 1
// and 2 of `scale`, runner B only version 1), and an API tier configured with no models at all
// serves what they report. Versioned calls go only to runners holding that version; management
// calls on the API tier reach every runner and say what each did; the API tier's index merges
// theirs; a model added to the runners' repositories is served by the API tier after a poll;
// a GGUF language model is reachable by name@version.
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { metricValue } from "../helpers/metrics.js";
import { testModels } from "../helpers/models.js";
import { tempRepository, writeModelSettings, writeScaleVersion } from "../helpers/repository.js";
import { freePort, type InProcessServer, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

async function post(url: string, body: unknown = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** The answer to x = 1 (the version's factor) and the version that computed it, or the status and code. */
async function factor(base: string, path = "/v1/models/scale/predict"): Promise<string> {
  const r = await post(`${base}${path}`, { rows: [[1]] });
  if (r.status !== 200) return `${r.status} ${r.body?.error?.code ?? r.body?.code}`;
  return `${r.body.outputs.y[0][0]} from ${r.body.model_version}`;
}

function configFile(dir: string, lines: string[]): string {
  const file = join(dir, `${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, [...lines, "jobs:", `  sqlitePath: ${file}.jobs.db`].join("\n"));
  return file;
}

/** Calls to one version of a model on one server, from its metrics. */
async function versionCalls(base: string, version: string): Promise<number> {
  return (await metricValue(base, "modelport_version_calls_total", { model: "scale", version })) ?? 0;
}

describe("a model repository across tiers", () => {
  let work: string;
  let repoA: string;
  let repoB: string;
  let a: InProcessServer;
  let b: InProcessServer;
  let api: InProcessServer;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), "modelport-tiers-"));
    repoA = tempRepository();
    repoB = tempRepository();
    for (const repo of [repoA, repoB]) {
      writeModelSettings(repo, "scale", "versionPolicy: all\nlimits: { maxBatchRows: 7 }\n");
      writeScaleVersion(repo, "scale", "1", { k: 2 });
    }
    writeScaleVersion(repoA, "scale", "2", { k: 3 });
    // A GGUF language model in runner A's repository only.
    mkdirSync(join(repoA, "llm", "7"), { recursive: true });
    copyFileSync(join(await testModels(), "tiny-llama.gguf"), join(repoA, "llm", "7", "model.gguf"));
    const runner = (repo: string) =>
      startInProcess({ file: configFile(work, ["server: {role: runner}", `repository: {dir: ${repo}}`]) });
    [a, b] = await Promise.all([runner(repoA), runner(repoB)]);
    api = await startInProcess({
      file: configFile(work, [
        "server:",
        "  role: api",
        "  runnerPollMs: 200",
        `  runners: [${a.url}, ${b.url}]`,
      ]),
    });
  });
  after(async () => {
    await api?.close();
    await a?.close();
    await b?.close();
  });

  it("serves the models its runners report, with no model in its own config, and is ready", async () => {
    const ready = await fetch(`${api.url}/readyz`);
    assert.equal(ready.status, 200, await ready.clone().text());
    const listed = (await (await fetch(`${api.url}/v1/models`)).json()) as any;
    assert.deepEqual(listed.data.map((m: any) => m.id).sort(), ["llm", "scale"]);
    const scale = listed.models.find((m: any) => m.name === "scale");
    assert.deepEqual(
      scale.inputs.map((i: any) => i.name),
      ["x"],
    );
    // Unversioned: each runner answers with its current version (A: 2, B: 1).
    const answers = new Set<string>();
    for (let i = 0; i < 12; i++) answers.add(await factor(api.url));
    assert.deepEqual([...answers].sort(), ["2 from 1", "3 from 2"]);
  });

  it("checks requests against the runners' own limits for a model they report", async () => {
    const described = (await (await fetch(`${api.url}/v1/models/scale`)).json()) as any;
    assert.equal(described.limits.maxBatchRows, 7);
    const rows = await post(`${api.url}/v1/models/scale/predict`, {
      rows: Array.from({ length: 8 }, () => [1]),
    });
    assert.equal(rows.status, 413, JSON.stringify(rows.body));
    assert.equal(rows.body.error.code, "MP_ERR_INPUT_TOO_MANY_ROWS");
  });

  it("sends a call pinned to a version only to runners holding it, on every route that pins", async () => {
    const before2 = await versionCalls(a.url, "2");
    for (let i = 0; i < 10; i++)
      assert.equal(await factor(api.url, "/v1/models/scale/versions/2/predict"), "3 from 2");
    assert.equal(await factor(api.url, "/v1/models/scale/predict?version=2"), "3 from 2");
    assert.equal(await factor(api.url, "/v1/models/scale@2/predict"), "3 from 2");
    const oip = await post(`${api.url}/v2/models/scale/versions/2/infer`, {
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }],
    });
    assert.equal(oip.status, 200, JSON.stringify(oip.body));
    assert.equal(oip.body.model_version, "2");
    assert.equal(await versionCalls(a.url, "2"), before2 + 13);
    // Runner B never saw a call for a version it does not hold.
    const errors = await metricValue(api.url, "modelport_runner_forwards_total", {
      runner: b.url,
      outcome: "error",
    });
    assert.equal(errors ?? 0, 0);
    // Both hold version 1: calls pinned to it spread over both.
    const b1 = await versionCalls(b.url, "1");
    for (let i = 0; i < 10; i++)
      assert.equal(await factor(api.url, "/v1/models/scale/versions/1/predict"), "2 from 1");
    assert.ok((await versionCalls(b.url, "1")) > b1, "runner B took some calls pinned to version 1");
    // No runner holds version 9: 404, not a retry loop or a 503.
    assert.equal(
      await factor(api.url, "/v1/models/scale/versions/9/predict"),
      "404 MP_ERR_MODEL_VERSION_NOT_FOUND",
    );
  });

  it("merges the runners' indexes: a version listed on one runner only says where it is missing", async () => {
    const index = await post(`${api.url}/v2/repository/index`);
    assert.equal(index.status, 200);
    const v1 = index.body.find((e: any) => e.name === "scale" && e.version === "1");
    const v2 = index.body.find((e: any) => e.name === "scale" && e.version === "2");
    assert.equal(v1.state, "READY");
    assert.equal(v1.reason, "");
    assert.equal(v2.state, "READY");
    assert.equal(v2.reason, `${b.url}: not listed`);
    // The index however its path is spelled: the route reached decides, not the URL.
    const spelled = await post(`${api.url}/v2/repository/%69ndex`);
    assert.equal(spelled.status, 200);
    assert.deepEqual(spelled.body, index.body);
  });

  it("sends management calls to every runner: promote and rollback apply on both, a refusal on one is reported", async () => {
    const promoted = await post(`${api.url}/v1/models/scale/promote`, { version: "1" });
    assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
    assert.deepEqual(
      promoted.body.runners.map((r: any) => [r.runner, r.status]),
      [
        [a.url, 200],
        [b.url, 200],
      ],
    );
    // Routing already follows the change: every unversioned call is version 1's now.
    for (let i = 0; i < 8; i++) assert.equal(await factor(api.url), "2 from 1");

    // Version 2 is not on runner B: its refusal is the answer, with what each runner did.
    const refused = await post(`${api.url}/v1/models/scale/promote`, { version: "2" });
    assert.equal(refused.status, 404, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, "MP_ERR_MODEL_VERSION_NOT_FOUND");
    assert.deepEqual(
      refused.body.runners.map((r: any) => [r.runner, r.status]),
      [
        [a.url, 200],
        [b.url, 404],
      ],
    );
    const back = await post(`${api.url}/v1/models/scale/rollback`);
    // Runner A rolls back to 1; runner B has nothing earlier than 1.
    assert.equal(back.status, 404, JSON.stringify(back.body));
    assert.equal(await factor(a.url), "2 from 1");
  });

  it("unloads and loads on every runner: the API tier stays ready while the model is unloaded on purpose", async () => {
    const unloaded = await post(`${api.url}/v2/repository/models/scale/unload`);
    assert.equal(unloaded.status, 200, JSON.stringify(unloaded.body));
    // As one process answers it: the model is not ready (unloaded), not a runner that is missing.
    assert.equal(await factor(api.url), "503 MP_ERR_MODEL_NOT_READY");
    const refused = await post(`${api.url}/v1/models/scale/predict`, { rows: [[1]] });
    assert.equal(refused.body.error.details.state, "unloaded", JSON.stringify(refused.body));
    const ready = (await (await fetch(`${api.url}/readyz`)).json()) as any;
    assert.equal(ready.ready, true, JSON.stringify(ready));
    assert.equal(ready.models.scale.state, "unloaded");
    const loaded = await post(`${api.url}/v2/repository/models/scale/load`);
    assert.equal(loaded.status, 200, JSON.stringify(loaded.body));
    // A load applies the policy again: A serves its newest version, B its only one.
    assert.equal(await factor(a.url), "3 from 2");
    assert.equal(await factor(b.url), "2 from 1");
    assert.match(await factor(api.url), /^(3 from 2|2 from 1)$/);
  });

  it("a management call a runner cannot be reached for is 503 MP_ERR_RUNNER_UNAVAILABLE, naming it and where it applied", async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const half = await startInProcess({
      file: configFile(work, ["server:", "  role: api", `  runners: [${a.url}, ${nowhere}]`]),
    });
    try {
      const res = await fetch(`${half.url}/v1/models/scale/weights`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ weights: null }),
      });
      const body = (await res.json()) as { error: { code: string; message: string; retryable: boolean } };
      assert.deepEqual(
        [res.status, body.error.code, body.error.retryable],
        [503, "MP_ERR_RUNNER_UNAVAILABLE", true],
      );
      assert.ok(Number(res.headers.get("retry-after")) >= 1);
      assert.ok(body.error.message.includes(nowhere), body.error.message);
      assert.ok(body.error.message.includes(`applied on ${a.url}`), body.error.message);
    } finally {
      await half.close();
    }
  });

  it("refuses a management body nested past limits.maxJsonDepth, or setting __proto__, with a 400 of its own", async () => {
    // The API tier passes a body on re-serialized: this deep one overflowed JSON.stringify (500).
    const deep = `{"version":${"[".repeat(5000)}${"]".repeat(5000)}}`;
    // As on every JSON route: too deep is invalid; a __proto__ key is refused as malformed JSON.
    for (const [text, code] of [
      [deep, "MP_ERR_REQUEST_INVALID"],
      ['{"__proto__":{"version":"1"}}', "MP_ERR_REQUEST_MALFORMED_JSON"],
    ]) {
      const res = await fetch(`${api.url}/v2/repository/models/scale/load`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: text,
      });
      const body = (await res.json()) as { code?: string; runners?: unknown };
      assert.deepEqual([res.status, body.code, body.runners], [400, code, undefined], text);
    }
  });

  it("serves a model added to the runners' repositories once a management load brought it in", async () => {
    for (const repo of [repoA, repoB]) writeScaleVersion(repo, "double", "1", { k: 2 });
    assert.equal(await factor(api.url, "/v1/models/double/predict"), "404 MP_ERR_MODEL_NOT_FOUND");
    const loaded = await post(`${api.url}/v2/repository/models/double/load`);
    assert.equal(loaded.status, 200, JSON.stringify(loaded.body));
    await until(
      "the API tier serves double",
      async () => (await factor(api.url, "/v1/models/double/predict")) === "2 from 1",
    );
  });

  it("reaches a GGUF language model pinned by name@version, and refuses a version no runner holds", async () => {
    const chat = (model: string) =>
      post(`${api.url}/v1/chat/completions`, {
        model,
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 3,
      });
    const ok = await chat("llm@7");
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(typeof ok.body.choices[0].message.content, "string");
    const missing = await chat("llm@8");
    assert.equal(missing.status, 404, JSON.stringify(missing.body));
    assert.equal(missing.body.error.code, "MP_ERR_MODEL_VERSION_NOT_FOUND");
  });
});
