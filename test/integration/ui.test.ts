// The dashboard (/ui, docs/Dashboard.md) in a real browser (Debian's chromium driven by
// playwright-core) against real listening servers: the README's new-user path (open /ui, enter
// the key, run "try it" on every example tensor model of examples/modelport.yaml), the model
// list, live charts that move after traffic, a streamed chat reply from the tiny GGUF model and
// its cost (priced here) in the cost table as /metrics has it, and
// the jobs browser (list, filter, cancel, retry, result) on a keyless server; and the page for a key
// limited to one model, whose charts and cost come from its own series only. The screenshot in
// docs/ui.png is taken here (UPDATE_SCREENSHOT=1). Without /usr/bin/chromium this test fails, it does not skip.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { parse, stringify } from "yaml";
import { parsePrometheus } from "../../src/cli/cost.js";
import { createKey } from "../../src/tenants/key-file.js";
import { defaultText, predictBody, type TensorSpec } from "../../ui/src/forms.js";
import { costs, isDashboardRoute, parseMetrics, total } from "../../ui/src/metrics.js";
import {
  launchChromium,
  shownNumber as number,
  openDashboard,
  chartPeak as peak,
  WAIT,
} from "../helpers/browser.js";
import { createGate } from "../helpers/gate.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, REPO_ROOT, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const KEY = "dashboard-test-key-0123";
const auth = { authorization: `Bearer ${KEY}` };
/** A key of the key file that may use churn-tree only (docs/Multi-tenant.md, "Who can see what"). */
let scopedKey: string;

let browser: Browser;
let srv: InProcessServer;
let page: Page;
let exampleModels: { name: string; backend?: string }[] = [];

/** examples/modelport.yaml as is, its model paths pointed at the freshly built test models. */
function examplesConfig(models: string, dir: string): string {
  const config = parse(readFileSync(join(REPO_ROOT, "examples", "modelport.yaml"), "utf8")) as {
    models: { name: string; path: string; backend?: string; options?: Record<string, unknown> }[];
  };
  for (const m of config.models) {
    m.path = m.path.startsWith("models/")
      ? join(models, m.path.slice("models/".length))
      : join(REPO_ROOT, "examples", m.path);
    if (typeof m.options?.model === "string")
      m.options.model = join(models, String(m.options.model).replace(/^.*\//, ""));
  }
  // The language model is priced (machine time and tokens), so its cost shows in dollars.
  const llm = config.models.find((m) => m.name === "tiny-llama");
  if (llm)
    Object.assign(llm, {
      pricePerHour: 3600,
      pricePerMillionInputTokens: 1000,
      pricePerMillionOutputTokens: 2000,
    });
  exampleModels = config.models.map((m) => ({ name: m.name, ...(m.backend ? { backend: m.backend } : {}) }));
  scopedKey = createKey(join(dir, "keys.yaml"), "churn-team", { models: ["churn-tree"] }).key;
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    stringify({
      server: { apiKeys: [KEY], keys: join(dir, "keys.yaml") },
      jobs: { sqlitePath: join(dir, "jobs.db"), blobs: { backend: "fs", dir: join(dir, "blobs") } },
      limits: (config as { limits?: unknown }).limits,
      models: config.models,
    }),
  );
  return file;
}

const open = (url: string) => openDashboard(browser, url);

/** A shown number read back: a whole count exactly, a rounded figure to within its last digit. */
function sameNumber(
  where: string,
  shown: string,
  value: number | undefined,
  digits: number,
  out: string[],
): void {
  if (value === undefined || !Number.isFinite(value)) {
    if (shown.trim() !== "–") out.push(`${where}: shows ${JSON.stringify(shown)}, the server has no figure`);
    return;
  }
  const n = Number(shown.trim());
  const close =
    Number.isInteger(value) && digits === 0 ? n === value : Math.abs(n - value) <= 0.51 * 10 ** -digits;
  if (!close) out.push(`${where}: shows ${JSON.stringify(shown)}, the server says ${value}`);
}

/** "12.5 ms" / "1.5 s" back to milliseconds, "10 KiB" back to bytes. */
const UNIT: Record<string, number> = { ms: 1, s: 1000, B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };
function sameQuantity(where: string, shown: string, value: number | undefined, out: string[]): void {
  const m = /^(\S+) (ms|s|B|KiB|MiB|GiB)$/.exec(shown.trim());
  if (value === undefined) {
    if (shown.trim() !== "–") out.push(`${where}: shows ${JSON.stringify(shown)}, the server has no figure`);
    return;
  }
  if (!m) return void out.push(`${where}: shows ${JSON.stringify(shown)} for ${value}`);
  const scale = UNIT[m[2]!]!;
  const decimals = m[2] === "s" ? 2 : 1;
  sameNumber(where, String(Number(m[1]) * scale), value, 0, []);
  if (Math.abs(Number(m[1]) - value / scale) > 0.51 * 10 ** -decimals)
    out.push(`${where}: shows ${JSON.stringify(shown)}, the server says ${value}`);
}

/**
 * Every number the page shows outside the charts, read back and compared with what the server
 * answers the same key now: the request counter and the cost table with GET /metrics, the model
 * table (load time, memory, threads, batching) with GET /v1/models. Empty when all agree.
 */
async function disagreements(p: Page, headers: Record<string, string>): Promise<string[]> {
  const out: string[] = [];
  const samples = parseMetrics(await (await fetch(`${srv.url}/metrics`, { headers })).text());
  const counted = total(samples, "modelport_requests_total", (l) => !isDashboardRoute(l.route));
  sameNumber(
    "requests so far",
    (await p.locator("[data-test=requests-total]").textContent()) ?? "",
    counted,
    0,
    out,
  );

  const expected = new Map(costs(samples).map((c) => [c.model, c]));
  const rows = await p
    .locator("[data-test=cost] tbody tr")
    .evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? "")));
  if (rows.length !== expected.size)
    out.push(`cost table: ${rows.length} rows, /metrics has ${expected.size} models`);
  for (const [model = "", requests = "", compute = "", tokens = "", per1000 = "", dollars = ""] of rows) {
    const c = expected.get(model);
    if (!c) {
      out.push(`cost table: ${model} is not in /metrics`);
      continue;
    }
    const [inTokens = "", outTokens = ""] = tokens.split(" / ");
    sameNumber(`${model} requests`, requests, c.requests, 0, out);
    sameNumber(`${model} compute s`, compute, c.computeSeconds, 3, out);
    sameNumber(`${model} input tokens`, inTokens, c.inputTokens, 0, out);
    sameNumber(`${model} output tokens`, outTokens, c.outputTokens, 0, out);
    sameNumber(`${model} $ / 1,000 requests`, per1000, c.per1000, 8, out);
    sameNumber(`${model} $ total`, dollars, c.dollars, 8, out);
  }

  const list = (await (await fetch(`${srv.url}/v1/models`, { headers })).json()) as {
    data: { id: string }[];
    models: Record<string, any>[];
  };
  const native = new Map(list.models.map((m) => [m.name as string, m]));
  for (const { id } of list.data) {
    const d =
      native.get(id) ??
      ((await (await fetch(`${srv.url}/v1/models/${encodeURIComponent(id)}`, { headers })).json()) as Record<
        string,
        any
      >);
    const cells = await p
      .locator(`[data-test=models] tr[data-model="${id}"] td`)
      .evaluateAll((tds) => tds.map((td) => td.textContent ?? ""));
    const [, , , version = "", , load = "", memory = "", threads = "", batching = ""] = cells;
    if (version !== String(d.version ?? "–"))
      out.push(`${id} version: shows ${version}, the server says ${d.version}`);
    sameQuantity(`${id} load time`, load, d.load_ms, out);
    sameQuantity(`${id} memory`, memory, d.memory_bytes, out);
    sameNumber(`${id} threads`, threads, d.threads, 0, out);
    const figures = (batching.match(/\d+(\.\d+)?/g) ?? []).map(Number);
    const b = d.batching;
    const c = d.concurrency;
    const want = b
      ? b.enabled
        ? [b.maxBatchRows, b.maxDelayMs, b.queuedRows ?? 0]
        : [b.queuedRows ?? 0]
      : c
        ? [c.active ?? 0, c.limit, c.waiting ?? 0]
        : [];
    if (JSON.stringify(figures) !== JSON.stringify(want))
      out.push(`${id} batching: shows ${JSON.stringify(batching)}, the server says ${JSON.stringify(want)}`);
  }
  return out;
}

/** Waits until every number on the page agrees with the server (the page polls every 2 and 5 s). */
async function numbersAgree(p: Page, headers: Record<string, string>): Promise<void> {
  let last: string[] = [];
  await until(
    "every number on the dashboard to agree with /metrics and /v1/models",
    async () => {
      last = await disagreements(p, headers);
      return last.length === 0;
    },
    WAIT,
  ).catch((e) => {
    throw new Error(`${(e as Error).message}:\n${last.join("\n")}`);
  });
}

/** Requests to churn-tree until its cost counter reaches the next multiple of 10 at least `least` higher. */
async function predictUpToRound(headers: Record<string, string>, least: number): Promise<number> {
  const samples = parseMetrics(await (await fetch(`${srv.url}/metrics`, { headers })).text());
  const now = total(samples, "modelport_cost_requests_total", (l) => l.model === "churn-tree");
  const target = Math.ceil((now + least) / 10) * 10;
  for (let i = now; i < target; i++)
    assert.equal(
      (await postJson(`${srv.url}/v1/models/churn-tree/predict`, { rows: [[3, 95, 4, 1, 0, 20]] }, headers))
        .status,
      200,
    );
  return target;
}

/** The cost table's request count of churn-tree, as shown. */
const churnRequests = async (p: Page) =>
  (await p
    .locator('[data-test=cost] tbody tr:has(td:first-child:text-is("churn-tree")) td')
    .nth(1)
    .textContent()) ?? "";

before(async () => {
  browser = await launchChromium();
  const models = await testModels();
  srv = await startInProcess({ file: examplesConfig(models, mkdtempSync(join(tmpdir(), "modelport-ui-"))) });
});

after(async () => {
  await browser?.close();
  await srv?.close();
});

describe("dashboard at /ui", () => {
  let errors: string[];

  it("the page and its bundle load without a key, with a CSP and cache headers; the API still needs the key", async () => {
    const pageRes = await fetch(`${srv.url}/ui`);
    assert.equal(pageRes.status, 200);
    const csp = pageRes.headers.get("content-security-policy") ?? "";
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'/);
    assert.equal(pageRes.headers.get("cache-control"), "no-cache");
    const html = await pageRes.text();
    const js = /src="(ui\/app\.js\?v=[0-9a-f]+)"/.exec(html)?.[1];
    assert.ok(js, html);
    const bundle = await fetch(`${srv.url}/${js}`);
    assert.equal(bundle.status, 200);
    assert.match(bundle.headers.get("cache-control") ?? "", /immutable/);
    const bytes = (await bundle.arrayBuffer()).byteLength;
    assert.equal(bytes, statSync(join(REPO_ROOT, "dist", "ui", "app.js")).size);
    assert.ok(bytes < 100_000, `the bundle is ${bytes} bytes`);
    const etag = bundle.headers.get("etag")!;
    assert.equal((await fetch(`${srv.url}/${js}`, { headers: { "if-none-match": etag } })).status, 304);
    assert.equal((await fetch(`${srv.url}/v1/models`)).status, 401);
    assert.equal((await fetch(`${srv.url}/metrics`)).status, 401);
  });

  it("asks for the API key once, then lists every model with its state and golden result", async () => {
    ({ page, errors } = await open(srv.url));
    await page.locator("[data-test=key-input]").fill("not-the-key");
    await page.locator("[data-test=key-submit]").click();
    await page.locator("text=That key was refused").waitFor();
    await page.locator("[data-test=key-input]").fill(KEY);
    await page.locator("[data-test=key-submit]").click();
    for (const { name } of exampleModels) {
      const row = page.locator(`[data-test=models] tr[data-model="${name}"]`);
      await row.locator(".state.ready").waitFor();
      assert.match((await row.textContent()) ?? "", /passed/, name);
    }
    // The key stays in this tab: a reload does not ask again.
    await page.reload();
    await page.locator(`[data-test=models] tr[data-model="${exampleModels[0]!.name}"]`).waitFor();
    assert.equal(await page.locator("[data-test=key-form]").count(), 0);
    assert.deepEqual(errors, []);
  });

  it("try it: every example tensor model answers through its generated form", async () => {
    const list = (await (await fetch(`${srv.url}/v1/models`, { headers: auth })).json()) as {
      models: { name: string; inputs: TensorSpec[] }[];
    };
    const tensor = exampleModels.filter((m) => list.models.some((n) => n.name === m.name));
    assert.ok(tensor.length >= 3, JSON.stringify(tensor));
    for (const { name } of tensor) {
      const form = page.locator(`[data-test="try-${name}"]`);
      await form.locator("[data-test=run]").click();
      const answer = form.locator("[data-test=answer]");
      await answer.waitFor();
      const text = (await answer.textContent()) ?? "";
      assert.match(text, /^200 in \d+ ms\n/, `${name}: ${text}`);
      // The same answer as the API gives for the form's default body.
      const inputs = list.models.find((m) => m.name === name)!.inputs;
      const texts = Object.fromEntries(inputs.map((s) => [s.name, defaultText(s, true)]));
      const direct = await postJson(`${srv.url}/v1/models/${name}/predict`, predictBody(inputs, texts), auth);
      assert.equal(direct.status, 200, JSON.stringify(direct.body));
      assert.deepEqual(JSON.parse(text.slice(text.indexOf("\n") + 1)), direct.body.outputs, name);
    }
  });

  it("live: the request counter, the request-rate and batch-size charts move after traffic", async () => {
    await page.locator("[data-test=requests-total]").waitFor();
    await until(
      "a first metrics point",
      async () => /\d/.test((await page.locator("[data-test=requests-total]").textContent()) ?? ""),
      WAIT,
    );
    const before = await number(page, "[data-test=requests-total]");
    // At least 20 more requests, ending on a round count: a whole number must show all its digits.
    const target = await predictUpToRound(auth, 20);
    await until(
      "the counter to count the 20 requests",
      async () => (await number(page, "[data-test=requests-total]")) >= before + 20,
      WAIT,
    );
    await until(
      "churn-tree's round request count in the cost table",
      async () => (await churnRequests(page)) === String(target),
      WAIT,
    );
    // Some point of the rate chart (the last 3 minutes) is above zero.
    await until("a request rate above zero", async () => (await peak(page, "chart-rps")) > 0, WAIT);
    const latency = (await page.locator("[data-test=chart-latency] path.series.a").getAttribute("d")) ?? "";
    assert.match(latency, /^M/);
    // One process batches its own requests: the batch chart is drawn here (on an API tier it says
    // the runners measure it: ui-tiers.test.ts).
    await until("a mean batch size", async () => (await peak(page, "chart-batch")) >= 1, WAIT);
    assert.equal(await page.locator("[data-test=chart-batch-elsewhere]").count(), 0);
    assert.equal(await page.locator("[data-test=cost-elsewhere]").count(), 0);
  });

  it("chat: a streamed reply from the tiny GGUF model", async () => {
    const chat = page.locator("[data-test=chat]");
    await chat.locator("[data-test=chat-input]").fill("hello there");
    await chat.locator("[data-test=chat-send]").click();
    await until(
      "an assistant reply and the send button back",
      async () => {
        const reply = (await chat.locator(".msg.assistant").last().textContent()) ?? "";
        return reply.length > 0 && reply !== "…" && (await chat.locator("[data-test=chat-send]").isEnabled());
      },
      WAIT,
    );
    assert.equal(await chat.locator(".msg.user").last().textContent(), "hello there");
    assert.equal(await chat.locator(".error").count(), 0);
    await until(
      "generated tokens on the token-rate chart",
      async () => (await peak(page, "chart-tokens")) > 0,
      WAIT,
    );
    // The model's cost row shows /metrics' figures for it: dollars (to the 8 decimals shown) and tokens.
    const row = page.locator(`[data-test=cost] tr[data-model="tiny-llama"]`);
    let last = "";
    await until(
      "the chat's cost in the cost table, as /metrics has it",
      async () => {
        const samples = parsePrometheus(await (await fetch(`${srv.url}/metrics`, { headers: auth })).text());
        const value = (name: string, kind?: string) =>
          samples
            .filter(
              (s) => s.name === name && s.labels.model === "tiny-llama" && (!kind || s.labels.kind === kind),
            )
            .reduce((sum, s) => sum + s.value, 0);
        const dollars = value("modelport_cost_dollars_total");
        const tokens = `${value("modelport_cost_tokens_total", "input")} / ${value("modelport_cost_tokens_total", "output")}`;
        const shown = Number(await row.locator("[data-test=cost-dollars]").textContent());
        const shownTokens = (await row.locator("[data-test=cost-tokens]").textContent()) ?? "";
        last = JSON.stringify({ dollars, shown, tokens, shownTokens });
        return dollars > 0 && Math.abs(shown - dollars) <= 5e-9 && shownTokens === tokens;
      },
      WAIT,
    ).catch((err: Error) => assert.fail(`${err.message}: ${last}`));
  });

  it("jobs submitted through the API show in the list; the screenshot for docs/ui.png", async () => {
    const job = await postJson(
      `${srv.url}/v1/models/churn-tree/jobs`,
      { rows: [[3, 95, 4, 1, 0, 20]] },
      auth,
    );
    assert.equal(job.status, 202, JSON.stringify(job.body));
    await page.locator(`[data-test=jobs-list] tr[data-job="${job.body.id}"] .status.succeeded`).waitFor();
    await numbersAgree(page, auth);
    // docs/ui.png is rewritten only when asked (UPDATE_SCREENSHOT=1), so a test run leaves the tree clean.
    const shot = process.env.UPDATE_SCREENSHOT
      ? join(REPO_ROOT, "docs", "ui.png")
      : join(tmpdir(), `modelport-ui-${process.pid}.png`);
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok(statSync(shot).size > 10_000, "a screenshot with content");
    assert.deepEqual(errors, []);
  });
});

describe("dashboard for a key limited to one model", () => {
  it("shows its model only; its live charts and cost table come from its own series", async () => {
    const { page: p, errors } = await open(srv.url);
    await p.locator("[data-test=key-input]").fill(scopedKey);
    await p.locator("[data-test=key-submit]").click();
    await p.locator('[data-test=models] tr[data-model="churn-tree"] .state.ready').waitFor();
    assert.equal(await p.locator("[data-test=models] tr[data-model]").count(), 1);
    await until(
      "a first metrics point",
      async () => /\d/.test((await p.locator("[data-test=requests-total]").textContent()) ?? ""),
      WAIT,
    );
    const before = await number(p, "[data-test=requests-total]");
    const scoped = { authorization: `Bearer ${scopedKey}` };
    const target = await predictUpToRound(scoped, 10);
    await until(
      "the counter to count the 10 requests",
      async () => (await number(p, "[data-test=requests-total]")) >= before + 10,
      WAIT,
    );
    await until(
      "churn-tree's round request count in the cost table",
      async () => (await churnRequests(p)) === String(target),
      WAIT,
    );
    await until("a request rate above zero", async () => (await peak(p, "chart-rps")) > 0, WAIT);
    await until(
      "a latency line",
      async () =>
        /^M/.test((await p.locator("[data-test=chart-latency] path.series.a").getAttribute("d")) ?? ""),
      WAIT,
    );
    // Every example model had traffic (try it, above); this key's cost table holds its own only.
    await p.locator("[data-test=cost] tbody tr").first().waitFor();
    const models = await p.locator("[data-test=cost] tbody tr td:first-child").allTextContents();
    assert.deepEqual(models, ["churn-tree"]);
    await numbersAgree(p, scoped);
    assert.deepEqual(errors, []);
  });
});

describe("dashboard jobs browser, on a server without keys", () => {
  const gate = createGate();
  let keyless: InProcessServer;
  let p: Page;

  before(async () => {
    const models = await testModels();
    const dir = mkdtempSync(join(tmpdir(), "modelport-ui-jobs-"));
    const file = join(dir, "modelport.yaml");
    writeFileSync(
      file,
      [
        "jobs:",
        `  sqlitePath: ${join(dir, "jobs.db")}`,
        `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
        "  concurrency: 1",
        "models:",
        `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}}`,
        gate.modelYaml("gate"),
      ].join("\n"),
    );
    keyless = await startInProcess({ file });
  });
  after(async () => {
    gate.openAll();
    await keyless?.close();
  });

  it("opens without asking for a key; cancel, retry and result work from the page", async () => {
    let errors: string[];
    ({ page: p, errors } = await open(keyless.url));
    await p.locator('[data-test=models] tr[data-model="gate"]').waitFor();
    assert.equal(await p.locator("[data-test=key-form]").count(), 0);

    // The gate model runs one job at a time and holds it: the first runs, the second waits.
    const running = await postJson(`${keyless.url}/v1/models/gate/jobs`, { rows: [[1]] });
    assert.equal(running.status, 202, JSON.stringify(running.body));
    await gate.started(1);
    const queued = await postJson(`${keyless.url}/v1/models/gate/jobs`, { rows: [[2]] });
    assert.equal(queued.body.status, "queued");

    const jobs = p.locator("[data-test=jobs]");
    await jobs.locator("[data-test=jobs-model]").selectOption("gate");
    const row = jobs.locator(`[data-test=jobs-list] tr[data-job="${queued.body.id}"]`);
    await row.locator(".status.queued").waitFor();
    await jobs.locator(`[data-test=jobs-list] tr[data-job="${running.body.id}"] .status.running`).waitFor();

    // Cancel the queued job, then retry it.
    await row.click();
    const detail = jobs.locator(`[data-test=job-detail][data-job="${queued.body.id}"]`);
    await detail.locator("[data-test=job-cancel]").click();
    await detail.locator("[data-test=detail-status].canceled").waitFor();
    assert.equal(
      ((await (await fetch(`${keyless.url}/v1/jobs/${queued.body.id}`)).json()) as any).status,
      "canceled",
    );
    await jobs.locator("[data-test=jobs-status]").selectOption("canceled");
    await row.locator(".status.canceled").waitFor();
    await jobs.locator("[data-test=jobs-status]").selectOption("");
    await detail.locator("[data-test=job-retry]").click();
    await until(
      "the retried job back in the queue",
      async () =>
        ["queued", "running"].includes(
          ((await (await fetch(`${keyless.url}/v1/jobs/${queued.body.id}`)).json()) as any).status,
        ),
      WAIT,
    );
    gate.openAll();
    await detail.locator("[data-test=detail-status].succeeded").waitFor();
    await detail.locator("[data-test=job-result]").click();
    const result = JSON.parse((await detail.locator("[data-test=job-result-body]").textContent()) ?? "{}");
    assert.deepEqual(result.outputs, { y: [[4]] });

    assert.deepEqual(errors, []);
  });
});
