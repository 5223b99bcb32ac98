// The cost arithmetic: machine time × pricePerHour for local models (a batch's time shared
// among its requests), tokens × per-million prices (upstream models, and language models where
// set), the batch price factor of jobs, and the figures `modelport cost` prints.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { costFromMetrics, costTable, money, parsePrometheus } from "../../src/cli/cost.js";
import {
  CostMeter,
  pricesOf,
  requestCost,
  shareBatchTime,
  summarize,
  timeCost,
  tokenCost,
} from "../../src/metrics/cost.js";
import { Metrics } from "../../src/metrics/metrics.js";

const close = (a: number, b: number, eps = 1e-12) => assert.ok(Math.abs(a - b) <= eps, `${a} ≈ ${b}`);

describe("cost arithmetic", () => {
  it("prices machine time by the hour", () => {
    close(timeCost(3_600_000, 2.5), 2.5);
    close(timeCost(36, 1), 0.00001);
    assert.equal(timeCost(1000), 0);
  });

  it("prices tokens per million", () => {
    close(tokenCost(1_000_000, 0, { pricePerMillionInputTokens: 0.15 }), 0.15);
    close(tokenCost(2000, 500, { pricePerMillionInputTokens: 3, pricePerMillionOutputTokens: 15 }), 0.0135);
    assert.equal(tokenCost(100, 100, {}), 0);
  });

  it("shares a batch's time among its requests by rows", () => {
    assert.deepEqual(shareBatchTime(30, [1, 2]), [10, 20]);
    assert.deepEqual(shareBatchTime(8, [4]), [8]);
    assert.deepEqual(shareBatchTime(5, []), []);
  });

  it("a meter sums batches and derives per-request figures", () => {
    const m = new CostMeter("m", { pricePerHour: 3.6 });
    m.batch(4, 20); // 4 requests shared 20 ms
    m.batch(1, 10);
    const s = m.snapshot();
    assert.equal(s.requests, 5);
    assert.equal(s.computeMs, 30);
    close(s.dollars, (30 / 3_600_000) * 3.6);
    close(s.computeMsPerRequest, 6);
    close(s.costPer1000Requests, ((30 / 3_600_000) * 3.6 * 1000) / 5);
  });

  it("a meter prices upstream tokens and keeps wall time", () => {
    const m = new CostMeter("u", { pricePerMillionInputTokens: 1, pricePerMillionOutputTokens: 2 });
    m.tokens(1000, 500, 40);
    m.tokens(3000, 0, 60);
    const s = m.snapshot();
    assert.equal(s.requests, 2);
    assert.equal(s.inputTokens, 4000);
    assert.equal(s.outputTokens, 500);
    close(s.dollars, (4000 * 1 + 500 * 2) / 1e6);
    close(s.costPer1000Requests, ((4000 + 1000) / 1e6 / 2) * 1000);
    close(s.computeMsPerRequest, 50);
  });

  it("requestCost adds machine time and tokens, and prices background work at batchPriceFactor", () => {
    const prices = { pricePerHour: 3.6, pricePerMillionInputTokens: 2, pricePerMillionOutputTokens: 10 };
    // 1,000 ms at $3.60/h = $0.001; 500 prompt tokens at $2/M = $0.001; 100 completion at $10/M = $0.001.
    const used = { inputTokens: 500, outputTokens: 100, ms: 1000 };
    close(requestCost(prices, used), 0.003);
    close(requestCost(prices, { ...used, background: true }), 0.003, 1e-15);
    close(requestCost({ ...prices, batchPriceFactor: 0.5 }, { ...used, background: true }), 0.0015);
    close(requestCost({ ...prices, batchPriceFactor: 0.5 }, used), 0.003);
    close(requestCost({ pricePerHour: 3.6 }, { ms: 1000, inputTokens: 1e9 }), 0.001);
    close(requestCost({ pricePerMillionInputTokens: 1 }, { ms: 1e9, inputTokens: 1e6 }), 1);
    assert.equal(requestCost({}, used), 0);
  });

  it("pricesOf keeps only the price fields of a model's config", () => {
    const config = {
      name: "m",
      threads: 2,
      pricePerHour: 1,
      batchPriceFactor: 0.5,
      pricePerMillionInputTokens: 3,
    };
    assert.deepEqual(pricesOf(config), {
      pricePerHour: 1,
      batchPriceFactor: 0.5,
      pricePerMillionInputTokens: 3,
    });
    assert.deepEqual(pricesOf({}), {});
  });

  it("a meter of a language model prices time and tokens, a job's at the batch factor", () => {
    const prices = {
      pricePerHour: 3.6,
      pricePerMillionInputTokens: 2,
      pricePerMillionOutputTokens: 10,
      batchPriceFactor: 0.5,
    };
    const m = new CostMeter("llm", prices);
    m.tokens(500, 100, 1000); // $0.003
    m.tokens(500, 100, 1000, true); // $0.0015
    const s = m.snapshot();
    assert.equal(s.requests, 2);
    assert.equal(s.computeMs, 2000);
    assert.equal(s.inputTokens, 1000);
    assert.equal(s.outputTokens, 200);
    close(s.dollars, 0.0045);
  });

  it("a meter prices batched requests' tokens where token prices are set (embeddings)", () => {
    const m = new CostMeter("e", { pricePerHour: 3.6, pricePerMillionInputTokens: 2 });
    m.batch(2, 1000);
    m.countTokens(500);
    const s = m.snapshot();
    assert.equal(s.requests, 2);
    assert.equal(s.inputTokens, 500);
    close(s.dollars, 0.002);
  });

  it("summarize gives zeros before the first request", () => {
    const s = summarize({ requests: 0, computeMs: 0, dollars: 0 });
    assert.equal(s.costPer1000Requests, 0);
    assert.equal(s.computeMsPerRequest, 0);
  });

  it("feeds the Prometheus counters", async () => {
    const metrics = new Metrics({ processMetrics: false });
    const m = new CostMeter("m", { pricePerHour: 36 }, metrics.cost);
    m.batch(2, 100);
    const text = await metrics.registry.metrics();
    assert.match(text, /modelport_cost_requests_total\{model="m"\} 2/);
    assert.match(text, /modelport_cost_compute_seconds_total\{model="m"\} 0\.1/);
    assert.match(text, /modelport_cost_dollars_total\{model="m"\} 0\.001/);
  });
});

describe("modelport cost: reading /metrics", () => {
  const text = [
    "# HELP modelport_cost_dollars_total Estimated cost",
    "# TYPE modelport_cost_dollars_total counter",
    'modelport_cost_dollars_total{model="a",role="all",instance="h:1"} 0.002',
    'modelport_cost_dollars_total{model="a",role="all",instance="h:2"} 0.002',
    'modelport_cost_compute_seconds_total{model="a",role="all",instance="h:1"} 2',
    'modelport_cost_requests_total{model="a",role="all",instance="h:1"} 1000',
    'modelport_cost_requests_total{model="a",role="all",instance="h:2"} 1000',
    'modelport_cost_requests_total{model="b"} 0',
    'modelport_cost_tokens_total{model="b",kind="input"} 0',
    'modelport_requests_total{model="a",route="/x",status="200"} 5',
  ].join("\n");

  it("sums each model's counters over instances and derives per-request figures", () => {
    const rows = costFromMetrics(text);
    assert.deepEqual(
      rows.map((r) => r.model),
      ["a", "b"],
    );
    const a = rows[0]!;
    assert.equal(a.requests, 2000);
    close(a.dollars, 0.004);
    close(a.costPer1000Requests, 0.002);
    close(a.computeMsPerRequest, 1);
    assert.equal(rows[1]!.requests, 0);
  });

  it("prints one row per model, side by side", () => {
    const table = costTable(costFromMetrics(text)).split("\n");
    assert.equal(table.length, 3);
    assert.match(
      table[0]!,
      /^model\s+requests\s+cost \/ 1,000 req\s+compute ms \/ req\s+tokens \/ req\s+total$/,
    );
    assert.match(table[1]!, /^a\s+2000\s+\$0\.00200\s+1\.000\s+0\.0\s+\$0\.00400$/);
  });

  it("prints small dollar amounts in fixed notation with three significant digits", () => {
    assert.equal(money(2.99e-7), "$0.000000299");
    assert.equal(money(7.9e-6), "$0.00000790");
    assert.equal(money(0.0123), "$0.0123");
    assert.equal(money(0.5), "$0.500");
    assert.equal(money(1e-12), "$0.00000000000100");
    assert.equal(money(12.345), "$12.35");
    assert.equal(money(0), "$0");
    const table = costTable([
      { model: "llm", ...summarize({ requests: 1, computeMs: 1, dollars: 2.99e-7 }) },
    ]);
    assert.doesNotMatch(table, /e-/);
    assert.match(table, /\$0\.000000299$/);
  });

  it("parses label values with escapes", () => {
    const [s] = parsePrometheus('m{model="a\\"b",x="1"} 3');
    assert.deepEqual(s, { name: "m", labels: { model: 'a"b', x: "1" }, value: 3 });
  });
});

describe("modelport cost: label escapes", () => {
  it("reads escapes left to right: an escaped backslash before n stays a backslash and an n", () => {
    // Text form `a\\n` is the value a, backslash, n; `b\n` is b, newline.
    const [s] = parsePrometheus('m{x="a\\\\n",y="b\\n",z="q\\"\\\\"} 1');
    assert.deepEqual(s?.labels, { x: "a\\n", y: "b\n", z: 'q"\\' });
  });

  it("round-trips label values written by prom-client (backslash-n, newline, quote)", async () => {
    const metrics = new Metrics({ processMetrics: false });
    const values = ["C:\\new\\table", "two\nlines", 'say "hi"', "\\\\n\\"];
    const m = new CostMeter("x", { pricePerHour: 1 }, metrics.cost);
    m.batch(1, 1);
    for (const v of values) new CostMeter(v, { pricePerHour: 1 }, metrics.cost).batch(1, 1);
    const text = await metrics.registry.metrics();
    const models = parsePrometheus(text)
      .filter((s) => s.name === "modelport_cost_requests_total")
      .map((s) => s.labels.model);
    for (const v of values)
      assert.ok(models.includes(v), `${JSON.stringify(v)} in ${JSON.stringify(models)}`);
  });
});
