// Jobs pinned to a version: `name@version/jobs` and `Prefer: respond-async` on a versioned
// predict run exactly that version, in one process and across split tiers (the API tier submits
// through the shared store, the runner executes); an unknown version is refused at submission
// with the code a synchronous predict gets; a version gone by the time the job runs fails the
// job with a code. The repository's versions answer y = K·x, so each answer says which version
// computed it.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { deletePrefix, redisUrl, uniquePrefix } from "../helpers/redis.js";
import { tempRepository, writeModelSettings, writeScaleVersion } from "../helpers/repository.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/** The job once final, long-polling for at most `ms`; it is returned as it is then, final or not. */
async function settled(base: string, id: string, ms = 60_000): Promise<any> {
  const end = Date.now() + ms;
  for (;;) {
    const job = (await (await fetch(`${base}/v1/jobs/${id}?wait=5`)).json()) as any;
    if (["succeeded", "failed", "canceled"].includes(job.status) || Date.now() > end) return job;
  }
}

/** Submits through `path` with x = `x` and resolves to "y from version" of the finished job. */
async function jobAnswer(
  base: string,
  path: string,
  x: number,
  headers: Record<string, string> = {},
): Promise<string> {
  const submitted = await post(`${base}${path}`, { rows: [[x]] }, headers);
  assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
  const job = await settled(base, submitted.body.id);
  assert.equal(job.status, "succeeded", `job ${job.id}: ${JSON.stringify(job)}`);
  const result = (await (await fetch(`${base}/v1/jobs/${job.id}/result`)).json()) as any;
  return `${result.outputs.y[0][0]} from ${result.model_version}`;
}

function configFile(dir: string, lines: string[]): string {
  const file = join(dir, `${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, lines.join("\n"));
  return file;
}

describe("jobs pinned to a version", () => {
  let work: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), "modelport-job-versions-"));
  });

  describe("in one process", () => {
    let s: InProcessServer;

    before(async () => {
      const repo = tempRepository();
      writeModelSettings(repo, "scale", "versionPolicy: { latest: 2 }\n");
      writeScaleVersion(repo, "scale", "1", { k: 2 });
      writeScaleVersion(repo, "scale", "2", { k: 3 });
      s = await startInProcess({
        file: configFile(work, [`repository: {dir: ${repo}}`, "jobs:", `  sqlitePath: ${work}/one.db`]),
      });
    });
    after(() => s?.close());

    it("name@version runs that version, and an unpinned job the current one", async () => {
      assert.equal(await jobAnswer(s.url, "/v1/models/scale@1/jobs", 5), "10 from 1");
      assert.equal(await jobAnswer(s.url, "/v1/models/scale@2/jobs", 5), "15 from 2");
      assert.equal(await jobAnswer(s.url, "/v1/models/scale/jobs", 5), "15 from 2");
    });

    it("Prefer: respond-async on a versioned predict runs the version the path or query names", async () => {
      const prefer = { prefer: "respond-async" };
      assert.equal(await jobAnswer(s.url, "/v1/models/scale/versions/1/predict", 4, prefer), "8 from 1");
      assert.equal(await jobAnswer(s.url, "/v1/models/scale/predict?version=1", 4, prefer), "8 from 1");
      assert.equal(await jobAnswer(s.url, "/v1/models/scale@1/predict", 4, prefer), "8 from 1");
    });

    it("the job shows the version it is pinned to, under its model's name, and lists by that name", async () => {
      const submitted = await post(`${s.url}/v1/models/scale@1/jobs`, { rows: [[1]] });
      assert.equal(submitted.status, 202);
      assert.equal(submitted.body.model, "scale");
      assert.equal(submitted.body.version, "1");
      const job = await settled(s.url, submitted.body.id);
      assert.equal(job.version, "1");
      const unpinned = await post(`${s.url}/v1/models/scale/jobs`, { rows: [[1]] });
      assert.equal(unpinned.body.version, undefined);
      const listed = (await (await fetch(`${s.url}/v1/jobs?model=scale&limit=1000`)).json()) as any;
      assert.ok(listed.jobs.some((j: any) => j.id === submitted.body.id && j.version === "1"));
    });

    it("an unknown version is refused at submission with the code a synchronous predict gets; nothing is queued", async () => {
      const sync = await post(`${s.url}/v1/models/scale/versions/7/predict`, { rows: [[1]] });
      assert.equal(sync.status, 404);
      assert.equal(sync.body.error.code, "MP_ERR_MODEL_VERSION_NOT_FOUND");
      const before = (await (await fetch(`${s.url}/v1/jobs?limit=1000`)).json()) as any;
      for (const [path, headers] of [
        ["/v1/models/scale@7/jobs", {}],
        ["/v1/models/scale/versions/7/predict", { prefer: "respond-async" }],
        ["/v1/models/scale/predict?version=7", { prefer: "respond-async" }],
      ] as const) {
        const r = await post(`${s.url}${path}`, { rows: [[1]] }, headers);
        assert.equal(r.status, 404, path);
        assert.equal(r.body.error.code, "MP_ERR_MODEL_VERSION_NOT_FOUND", path);
      }
      const afterwards = (await (await fetch(`${s.url}/v1/jobs?limit=1000`)).json()) as any;
      assert.equal(afterwards.jobs.length, before.jobs.length);
    });

    it("one Idempotency-Key for two versions is a conflict, not the other version's job", async () => {
      const key = { "idempotency-key": `pin-${Date.now()}` };
      const first = await post(`${s.url}/v1/models/scale@1/jobs`, { rows: [[1]] }, key);
      assert.equal(first.status, 202);
      const again = await post(`${s.url}/v1/models/scale@1/jobs`, { rows: [[1]] }, key);
      assert.equal(again.status, 200);
      assert.equal(again.body.id, first.body.id);
      const other = await post(`${s.url}/v1/models/scale@2/jobs`, { rows: [[1]] }, key);
      assert.equal(other.status, 409);
      assert.equal(other.body.error.code, "MP_ERR_JOB_IDEMPOTENCY_CONFLICT");
    });
  });

  it("a version unloaded while its job waits fails the job with MP_ERR_MODEL_VERSION_NOT_FOUND", async () => {
    const repo = tempRepository();
    const gate = mkdtempSync(join(tmpdir(), "modelport-job-gate-"));
    writeModelSettings(repo, "scale", "versionPolicy: { latest: 2 }\n");
    writeScaleVersion(repo, "scale", "1", { k: 2 });
    // Version 2 holds x = 9 until the gate opens: the one worker is busy while version 1 goes.
    writeScaleVersion(repo, "scale", "2", { k: 3, gate: { dir: gate, x: 9 } });
    const s = await startInProcess({
      file: configFile(work, [
        `repository: {dir: ${repo}}`,
        "jobs:",
        `  sqlitePath: ${work}/gone.db`,
        "  concurrency: 1",
        "  maxAttempts: 2",
        "  backoffBaseMs: 50",
      ]),
    });
    try {
      const holding = await post(`${s.url}/v1/models/scale@2/jobs`, { rows: [[9]] });
      assert.equal(holding.status, 202);
      await until("the first job holding the only worker", () => existsSync(join(gate, "started")));
      const waiting = await post(`${s.url}/v1/models/scale@1/jobs`, { rows: [[1]] });
      assert.equal(waiting.status, 202);
      // Version 3 arrives; with latest: 2, version 1 is unloaded.
      writeScaleVersion(repo, "scale", "3", { k: 4 });
      const load = await post(`${s.url}/v2/repository/models/scale/load`, {});
      assert.equal(load.status, 200, JSON.stringify(load.body));
      const described = (await (await fetch(`${s.url}/v1/models/scale`)).json()) as any;
      assert.deepEqual([...described.versions].sort(), ["2", "3"]);
      assert.equal(
        ((await (await fetch(`${s.url}/v1/jobs/${waiting.body.id}`)).json()) as any).status,
        "queued",
      );
      writeFileSync(join(gate, "open"), "");
      assert.equal((await settled(s.url, holding.body.id)).status, "succeeded");
      const gone = await settled(s.url, waiting.body.id);
      assert.equal(gone.status, "failed");
      assert.equal(gone.last_error.code, "MP_ERR_MODEL_VERSION_NOT_FOUND");
      assert.equal(gone.attempts, 2, "tried within its attempts (another worker may hold it), then failed");
      assert.equal(gone.version, "1");
    } finally {
      await s.close();
    }
  });

  describe("across split tiers: the API tier submits, the runner executes through the shared store", () => {
    let runner: InProcessServer;
    let api: InProcessServer;
    let redis: string;
    const prefix = uniquePrefix("job-versions");

    before(async () => {
      redis = await redisUrl();
      const repo = tempRepository();
      writeModelSettings(repo, "scale", "versionPolicy: all\n");
      writeScaleVersion(repo, "scale", "1", { k: 2 });
      writeScaleVersion(repo, "scale", "2", { k: 3 });
      const store = ["jobs:", "  store: redis", `  redisUrl: ${redis}`, `  redisPrefix: "${prefix}"`];
      runner = await startInProcess({
        file: configFile(work, ["server: {role: runner}", `repository: {dir: ${repo}}`, ...store]),
      });
      api = await startInProcess({
        file: configFile(work, [
          "server:",
          "  role: api",
          "  runnerPollMs: 200",
          `  runners: [${runner.url}]`,
          ...store,
        ]),
      });
      await until("the API tier serving both versions", async () => {
        const r = await post(`${api.url}/v1/models/scale/versions/1/predict`, { rows: [[1]] });
        return r.status === 200;
      });
    });
    after(async () => {
      await api?.close();
      await runner?.close();
      if (redis) await deletePrefix(redis, prefix);
    });

    it("each pinned job's answer is its version's", async () => {
      const prefer = { prefer: "respond-async" };
      assert.equal(await jobAnswer(api.url, "/v1/models/scale@1/jobs", 6), "12 from 1");
      assert.equal(await jobAnswer(api.url, "/v1/models/scale@2/jobs", 6), "18 from 2");
      assert.equal(await jobAnswer(api.url, "/v1/models/scale/versions/1/predict", 6, prefer), "12 from 1");
    });

    it("a version no runner holds is refused at the API tier as a synchronous predict is", async () => {
      const sync = await post(`${api.url}/v1/models/scale/versions/7/predict`, { rows: [[1]] });
      assert.equal(sync.body.error.code, "MP_ERR_MODEL_VERSION_NOT_FOUND");
      const job = await post(`${api.url}/v1/models/scale@7/jobs`, { rows: [[1]] });
      assert.equal(job.status, sync.status);
      assert.equal(job.body.error.code, "MP_ERR_MODEL_VERSION_NOT_FOUND");
    });
  });
});
