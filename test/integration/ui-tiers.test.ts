// The dashboard (/ui, docs/Dashboard.md) served by an API tier: `modelport serve --role api` and
// one `--role runner` process, each a real child process, sharing jobs on the environment's Redis
// (under a key prefix of their own, deleted afterwards) and keyed with the same API key. The API
// tier's config names no model: everything the page shows of the models comes from the runner.
// In Debian's chromium: the key, the runner's models ready with the runner's version, "try it"
// on each ONNX model forwarded to the runner (the answer must be the runner's own), the
// request counter and rate chart after traffic, rows held in the runner's batch queue on the
// queue-depth chart and in the model table, the batch-size chart and cost saying they are
// measured on the runners, and a job submitted through the API tier listed with its result.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { defaultText, predictBody, type TensorSpec } from "../../ui/src/forms.js";
import { chartPeak, launchChromium, openDashboard, shownNumber, WAIT } from "../helpers/browser.js";
import { createGate } from "../helpers/gate.js";
import { metricValue } from "../helpers/metrics.js";
import { testModels } from "../helpers/models.js";
import { deletePrefix, redisUrl, uniquePrefix } from "../helpers/redis.js";
import { type ChildServer, postJson, startChild, waitReady } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const KEY = "dashboard-tiers-key-0123";
const auth = { authorization: `Bearer ${KEY}` };
/** Reads every series of /metrics (the dashboard's client key reads only its own: docs/Multi-tenant.md). */
const ADMIN = "dashboard-tiers-admin-key-0123";
const ONNX = ["churn-tree", "segment-mlp"];
const prefix = uniquePrefix("ui-tiers");
const gate = createGate();
const children: ChildServer[] = [];
let redis: string;
let browser: Browser;
let runner: ChildServer;
let api: ChildServer;
let page: Page;
let errors: string[];

/** The y the gate model answers for x: 2x (test/helpers/gate-handler.ts). */
const gateCall = (x: number) => postJson(`${api.url}/v1/models/gate/predict`, { rows: [[x]] }, auth);

before(async () => {
  redis = await redisUrl();
  browser = await launchChromium();
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-ui-tiers-"));
  const shared = [
    "server:",
    `  apiKeys: [${KEY}]`,
    `  adminKeys: [${ADMIN}]`,
    "  runnerPollMs: 300",
    "jobs:",
    "  store: redis",
    `  redisUrl: ${redis}`,
    `  redisPrefix: "${prefix}"`,
    `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
  ];
  const runnerConfig = join(dir, "runner.yaml");
  writeFileSync(
    runnerConfig,
    [
      ...shared.slice(0, 1),
      // segment-mlp's 2 threads (shown in the tier's table) go over the 2-core thread budget.
      "  allowOversubscription: true",
      ...shared.slice(1),
      "models:",
      `  - {name: churn-tree, version: "7", path: ${join(models, "churn-tree.onnx")}}`,
      // A batching setting of the runner's own, which the API tier's table must show.
      `  - {name: segment-mlp, path: ${join(models, "segment-mlp.onnx")}, threads: 2, batching: {maxDelayMs: 7}}`,
      // One call at a time: while the gate holds one, the next ones wait in the runner's batch queue.
      gate.modelYaml("gate").replace(/}$/, ", batching: {maxInFlight: 1}, limits: {timeoutMs: 600000}}"),
    ].join("\n"),
  );
  const apiConfig = join(dir, "api.yaml");
  writeFileSync(apiConfig, shared.join("\n"));
  runner = await startChild(["-c", runnerConfig, "--role", "runner"]);
  children.push(runner);
  assert.equal((await waitReady(runner.url, 90_000)).status, 200, runner.output().slice(-2000));
  api = await startChild(["-c", apiConfig, "--role", "api", "--runner", runner.url]);
  children.push(api);
  assert.equal((await waitReady(api.url, 90_000)).status, 200, api.output().slice(-2000));
});

after(async () => {
  gate.openAll();
  await browser?.close();
  for (const c of children) await c.stop("SIGKILL");
  if (redis) await deletePrefix(redis, prefix);
});

describe("dashboard on an API tier, with a runner and jobs on Redis", () => {
  it("asks for the key, then lists the runner's models as ready, at the runner's versions", async () => {
    ({ page, errors } = await openDashboard(browser, api.url));
    await page.locator("[data-test=key-input]").fill(KEY);
    await page.locator("[data-test=key-submit]").click();
    const onRunner = (await (await fetch(`${runner.url}/v1/models`, { headers: auth })).json()) as {
      models: { name: string; version: string }[];
    };
    assert.deepEqual(onRunner.models.map((m) => m.name).sort(), ["churn-tree", "gate", "segment-mlp"]);
    for (const { name, version } of onRunner.models) {
      const row = page.locator(`[data-test=models] tr[data-model="${name}"]`);
      await row.locator(".state.ready").waitFor();
      // The version column (the fourth) shows the runner's: the API tier's config has no models.
      assert.equal(await row.locator("td").nth(3).textContent(), version, name);
    }
    assert.equal(onRunner.models.find((m) => m.name === "churn-tree")?.version, "7");
    // The load time, memory, threads and batching columns show the runner's, not the API tier's
    // defaults (it loaded nothing).
    const cells = page.locator('[data-test=models] tr[data-model="segment-mlp"] td');
    await until(
      "the runner's batching delay and threads in the table",
      async () =>
        / 7 ms\b/.test((await cells.nth(8).textContent()) ?? "") &&
        (await cells.nth(7).textContent()) === "2",
      WAIT,
    );
    for (const column of [5, 6])
      assert.notEqual(await cells.nth(column).textContent(), "–", `column ${column}`);
    assert.deepEqual(errors, []);
  });

  it("try it: each ONNX model answers through the API tier with the runner's own answer", async () => {
    const list = (await (await fetch(`${api.url}/v1/models`, { headers: auth })).json()) as {
      models: { name: string; inputs: TensorSpec[] }[];
    };
    const forwarded = async () =>
      (await metricValue(
        api.url,
        "modelport_runner_forwards_total",
        { runner: runner.url, outcome: "ok" },
        { authorization: `Bearer ${ADMIN}` },
      )) ?? 0;
    for (const name of ONNX) {
      const before = await forwarded();
      const form = page.locator(`[data-test="try-${name}"]`);
      await form.locator("[data-test=run]").click();
      const answer = form.locator("[data-test=answer]");
      await answer.waitFor();
      const text = (await answer.textContent()) ?? "";
      assert.match(text, /^200 in \d+ ms\n/, `${name}: ${text}`);
      assert.equal(await answer.getAttribute("class"), "answer", `${name}: ${text}`);
      // The runner, asked directly with the form's default body, gives the same outputs.
      const inputs = list.models.find((m) => m.name === name)!.inputs;
      const texts = Object.fromEntries(inputs.map((s) => [s.name, defaultText(s, true)]));
      const direct = await postJson(
        `${runner.url}/v1/models/${name}/predict`,
        predictBody(inputs, texts),
        auth,
      );
      assert.equal(direct.status, 200, JSON.stringify(direct.body));
      assert.deepEqual(JSON.parse(text.slice(text.indexOf("\n") + 1)), direct.body.outputs, name);
      assert.ok((await forwarded()) > before, `${name}: the API tier forwarded the call to the runner`);
    }
  });

  it("live: the request counter and rate chart move after traffic; batch size and cost say the runners measure them", async () => {
    await until(
      "a first metrics point",
      async () => /\d/.test((await page.locator("[data-test=requests-total]").textContent()) ?? ""),
      WAIT,
    );
    const before = await shownNumber(page, "[data-test=requests-total]");
    for (let i = 0; i < 20; i++) {
      const r = await postJson(
        `${api.url}/v1/models/churn-tree/predict`,
        { rows: [[3, 95, 4, 1, 0, 20]] },
        auth,
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    await until(
      "the counter to count the 20 requests",
      async () => (await shownNumber(page, "[data-test=requests-total]")) >= before + 20,
      WAIT,
    );
    await until("a request rate above zero", async () => (await chartPeak(page, "chart-rps")) > 0, WAIT);
    assert.match(
      (await page.locator("[data-test=chart-latency] path.series.a").getAttribute("d")) ?? "",
      /^M/,
    );
    // An API tier does not batch: the chart says where the figure is, and draws no empty chart.
    const batch = page.locator("[data-test=chart-batch]");
    assert.match((await batch.locator("[data-test=chart-batch-elsewhere]").textContent()) ?? "", /runners/);
    assert.equal(await batch.locator("svg").count(), 0);
    assert.match((await page.locator("[data-test=cost-elsewhere]").textContent()) ?? "", /runners/);
  });

  it("queue depth: rows waiting in the runner's batch queue show on the chart and in the model table", async () => {
    const queue = page.locator("[data-test=chart-queue]");
    assert.match((await queue.locator("[data-test=chart-queue-note]").textContent()) ?? "", /runners/);
    const held = gateCall(1);
    await gate.started(1);
    // The gate runs one call at a time: these two wait in the runner's queue while it holds x = 1.
    const waiting = [gateCall(2), gateCall(3)];
    await until(
      "2 rows on the queue-depth chart",
      async () => (await chartPeak(page, "chart-queue")) >= 2,
      WAIT,
    );
    // The tier exports the runners' queue under its own name, and no modelport_queue_depth_rows of
    // its own: a sum over every pod's /metrics counts the runner's queue once.
    const metrics = await (await fetch(`${api.url}/metrics`, { headers: auth })).text();
    assert.match(metrics, /^modelport_runner_queue_depth_rows\{[^}]*model="gate"[^}]*\} 2$/m);
    assert.doesNotMatch(metrics, /^modelport_queue_depth_rows\{/m);
    const row = page.locator('[data-test=models] tr[data-model="gate"]');
    await until(
      "the model table to show 2 rows queued",
      async () => /queued 2\b/.test((await row.textContent()) ?? ""),
      WAIT,
    );
    gate.openAll();
    const answers = await Promise.all([held, ...waiting]);
    assert.deepEqual(
      answers.map((a) => [a.status, a.body.outputs?.y]),
      [
        [200, [[2]]],
        [200, [[4]]],
        [200, [[6]]],
      ],
    );
    // Drained: the chart's latest point is 0 again.
    await until(
      "the queue back at 0",
      async () => (await queue.locator("[data-test=chart-queue-a]").textContent()) === "0",
      WAIT,
    );
  });

  it("jobs: a job submitted through the API tier runs on the runner; the page lists it and shows its result", async () => {
    const job = await postJson(
      `${api.url}/v1/models/churn-tree/jobs`,
      { rows: [[3, 95, 4, 1, 0, 20]] },
      auth,
    );
    assert.equal(job.status, 202, JSON.stringify(job.body));
    const jobs = page.locator("[data-test=jobs]");
    await jobs.locator("[data-test=jobs-model]").selectOption("churn-tree");
    const row = jobs.locator(`[data-test=jobs-list] tr[data-job="${job.body.id}"]`);
    await row.locator(".status.succeeded").waitFor();
    await row.click();
    const detail = jobs.locator(`[data-test=job-detail][data-job="${job.body.id}"]`);
    await detail.locator("[data-test=detail-status].succeeded").waitFor();
    await detail.locator("[data-test=job-result]").click();
    const result = JSON.parse((await detail.locator("[data-test=job-result-body]").textContent()) ?? "{}");
    const direct = await postJson(
      `${runner.url}/v1/models/churn-tree/predict`,
      { rows: [[3, 95, 4, 1, 0, 20]] },
      auth,
    );
    assert.equal(direct.status, 200, JSON.stringify(direct.body));
    assert.deepEqual(result.outputs, direct.body.outputs);
    assert.deepEqual(errors, []);
  });
});
