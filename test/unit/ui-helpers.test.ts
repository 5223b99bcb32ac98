// The dashboard's pure helpers (ui/src/metrics.ts, ui/src/forms.ts, ui/src/format.ts): the number
// formats (whole numbers keep their zeros), Prometheus text parsing,
// scrape differencing into rates (counter resets, the dashboard's own polls left out), histogram
// quantiles as Prometheus computes them, cost per model, the chart path, the "try it" form's
// defaults and bodies, and the SSE splitter of the chat.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fmt, fmtBytes, fmtMs } from "../../ui/src/format.js";
import {
  batchable,
  choices,
  defaultText,
  parseField,
  predictBody,
  sseEvents,
  type TensorSpec,
} from "../../ui/src/forms.js";
import {
  bucketIncrease,
  buckets,
  costs,
  increase,
  linePath,
  parseMetrics,
  quantile,
  rates,
  serverRole,
  total,
} from "../../ui/src/metrics.js";

const SCRAPE_1 = `# HELP modelport_requests_total Requests answered.
# TYPE modelport_requests_total counter
modelport_requests_total{model="churn-tree",route="/v1/models/:model/predict",status="200"} 10
modelport_requests_total{model="",route="/metrics",status="200"} 5
modelport_requests_total{model="",route="/v1/chat/completions",status="400"} 1
modelport_request_duration_seconds_bucket{le="0.01",route="/v1/models/:model/predict"} 8
modelport_request_duration_seconds_bucket{le="0.1",route="/v1/models/:model/predict"} 10
modelport_request_duration_seconds_bucket{le="+Inf",route="/v1/models/:model/predict"} 10
modelport_request_duration_seconds_bucket{le="0.01",route="/metrics"} 5
modelport_request_duration_seconds_bucket{le="0.1",route="/metrics"} 5
modelport_request_duration_seconds_bucket{le="+Inf",route="/metrics"} 5
modelport_batch_rows_sum{model="churn-tree"} 20
modelport_batch_rows_count{model="churn-tree"} 10
modelport_queue_depth_rows{model="churn-tree"} 0
modelport_llm_generated_tokens_total{model="tiny-llama"} 100
modelport_llm_time_to_first_token_seconds_sum{model="tiny-llama"} 0.5
modelport_llm_time_to_first_token_seconds_count{model="tiny-llama"} 5
`;

const SCRAPE_2 = `modelport_requests_total{model="churn-tree",route="/v1/models/:model/predict",status="200"} 30
modelport_requests_total{model="churn-tree",route="/v1/models/:model/predict",status="503"} 2
modelport_requests_total{model="",route="/metrics",status="200"} 6
modelport_requests_total{model="",route="/v1/chat/completions",status="400"} 3
modelport_request_duration_seconds_bucket{le="0.01",route="/v1/models/:model/predict"} 18
modelport_request_duration_seconds_bucket{le="0.1",route="/v1/models/:model/predict"} 30
modelport_request_duration_seconds_bucket{le="+Inf",route="/v1/models/:model/predict"} 32
modelport_request_duration_seconds_bucket{le="0.01",route="/metrics"} 6
modelport_request_duration_seconds_bucket{le="0.1",route="/metrics"} 6
modelport_request_duration_seconds_bucket{le="+Inf",route="/metrics"} 6
modelport_batch_rows_sum{model="churn-tree"} 50
modelport_batch_rows_count{model="churn-tree"} 15
modelport_queue_depth_rows{model="churn-tree"} 3
modelport_queue_depth_rows{model="segment-mlp"} 4
modelport_llm_generated_tokens_total{model="tiny-llama"} 140
modelport_llm_time_to_first_token_seconds_sum{model="tiny-llama"} 0.9
modelport_llm_time_to_first_token_seconds_count{model="tiny-llama"} 7
`;

describe("ui number formats", () => {
  it("whole numbers keep their trailing zeros; only decimal zeros are dropped", () => {
    const cases: [number, number, string][] = [
      [0, 0, "0"],
      [0, 2, "0"],
      [10, 0, "10"],
      [20, 0, "20"],
      [330, 0, "330"],
      [1000, 0, "1000"],
      [1e6, 0, "1000000"],
      [10, 2, "10"],
      [100, 3, "100"],
      [1000, 8, "1000"],
      [0.5, 2, "0.5"],
      [1.5, 2, "1.5"],
      [1.5, 0, "2"],
      [1.05, 2, "1.05"],
      [2.1, 3, "2.1"],
      [10.25, 1, "10.3"],
      [-20, 0, "-20"],
      [-0.0001, 2, "-1.0e-4"],
      [0.00012345, 3, "1.2e-4"],
      [0.001, 3, "0.001"],
    ];
    for (const [n, digits, text] of cases) assert.equal(fmt(n, digits), text, `fmt(${n}, ${digits})`);
    assert.equal(fmt(20), "20");
    for (const n of [undefined, Number.NaN, Number.POSITIVE_INFINITY]) assert.equal(fmt(n), "–");
  });

  it("bytes and milliseconds keep whole numbers whole", () => {
    assert.equal(fmtBytes(0), "0 B");
    assert.equal(fmtBytes(10), "10 B");
    assert.equal(fmtBytes(1000), "1000 B");
    assert.equal(fmtBytes(10 * 1024), "10 KiB");
    assert.equal(fmtBytes(1.5 * 1024 * 1024), "1.5 MiB");
    assert.equal(fmtBytes(20 * 1024 ** 3), "20 GiB");
    assert.equal(fmtMs(10), "10 ms");
    assert.equal(fmtMs(250.04), "250 ms");
    assert.equal(fmtMs(12.34), "12.3 ms");
    assert.equal(fmtMs(10_000), "10 s");
    assert.equal(fmtMs(1500), "1.5 s");
    assert.equal(fmtMs(undefined), "–");
  });
});

describe("ui metrics helpers", () => {
  it("parses names, labels (escapes included), values and skips comments", () => {
    const samples = parseMetrics(
      [
        "# TYPE x counter",
        'a_total{x="1",y="q\\"uote\\\\"} 3',
        "b 4.5 1700000000000",
        'c{le="+Inf"} +Inf',
        'd{role="api",instance_id="h:1"} NaN',
        "",
      ].join("\n"),
    );
    assert.deepEqual(samples, [
      { name: "a_total", labels: { x: "1", y: 'q"uote\\' }, value: 3 },
      { name: "b", labels: {}, value: 4.5 },
      { name: "c", labels: { le: "+Inf" }, value: Number.POSITIVE_INFINITY },
    ]);
  });

  it("sums series across labels and groups histogram buckets by bound", () => {
    const s = parseMetrics(SCRAPE_2);
    assert.equal(total(s, "modelport_queue_depth_rows"), 7);
    assert.deepEqual(buckets(s, "modelport_request_duration_seconds"), [
      { le: 0.01, count: 24 },
      { le: 0.1, count: 36 },
      { le: Number.POSITIVE_INFINITY, count: 38 },
    ]);
  });

  it("a counter that went down was reset: it grew by its new value", () => {
    assert.equal(increase(10, 15), 5);
    assert.equal(increase(10, 3), 3);
    assert.deepEqual(
      bucketIncrease(
        [
          { le: 1, count: 5 },
          { le: Number.POSITIVE_INFINITY, count: 6 },
        ],
        [
          { le: 1, count: 7 },
          { le: Number.POSITIVE_INFINITY, count: 2 },
        ],
      ),
      [
        { le: 1, count: 2 },
        { le: Number.POSITIVE_INFINITY, count: 2 },
      ],
    );
  });

  it("quantiles interpolate within the bucket, as histogram_quantile does", () => {
    const b = [
      { le: 0.1, count: 50 },
      { le: 0.2, count: 100 },
      { le: Number.POSITIVE_INFINITY, count: 100 },
    ];
    assert.ok(Math.abs(quantile(0.5, b) - 0.1) < 1e-12);
    assert.ok(Math.abs(quantile(0.75, b) - 0.15) < 1e-12);
    assert.ok(Math.abs(quantile(0.25, b) - 0.05) < 1e-12);
    // In the +Inf bucket: the highest finite bound.
    assert.equal(
      quantile(0.99, [
        { le: 0.1, count: 1 },
        { le: Number.POSITIVE_INFINITY, count: 10 },
      ]),
      0.1,
    );
    assert.ok(Number.isNaN(quantile(0.5, [{ le: 1, count: 0 }])));
    assert.ok(Number.isNaN(quantile(0.5, [])));
  });

  it("two scrapes 2 s apart become rates, without the dashboard's own polls", () => {
    const r = rates(
      { t: 1000, samples: parseMetrics(SCRAPE_1) },
      { t: 3000, samples: parseMetrics(SCRAPE_2) },
    );
    // 20 + 2 predicts + 2 chats in 2 s; the /metrics poll is not counted.
    assert.equal(r.rps, 12);
    assert.equal(r.errors5xx, 1);
    assert.equal(r.errors4xx, 1);
    // Window buckets (predict only): 10 ≤ 0.01, 10 in (0.01, 0.1], 2 above; p50 is rank 11 of 22,
    // the first in the second bucket; p99 falls in +Inf, so the highest finite bound.
    assert.ok(Math.abs(r.p50 - (0.01 + (0.09 * 1) / 10)) < 1e-12, String(r.p50));
    assert.equal(r.p99, 0.1);
    assert.equal(r.batchRows, 6);
    assert.equal(r.queueDepth, 7);
    assert.equal(r.tokensPerSec, 20);
    assert.ok(Math.abs(r.ttft - 0.2) < 1e-12);
    assert.equal(r.requestsTotal, 35);
  });

  it("no traffic between scrapes: zero rates and NaN quantiles and means (no line drawn)", () => {
    const s = parseMetrics(SCRAPE_1);
    const r = rates({ t: 0, samples: s }, { t: 2000, samples: s });
    assert.equal(r.rps, 0);
    assert.ok(Number.isNaN(r.p50) && Number.isNaN(r.batchRows) && Number.isNaN(r.ttft));
  });

  it("on an API tier, queue depth is the runners' (modelport_runner_queue_depth_rows), and the role is read from the labels", () => {
    const api = parseMetrics(
      [
        'modelport_requests_total{model="",route="/v1/models",status="200",role="api",instance_id="a:1"} 1',
        'modelport_runner_queue_depth_rows{model="churn-tree",role="api",instance_id="a:1"} 5',
        'modelport_runner_queue_depth_rows{model="gate",role="api",instance_id="a:1"} 2',
      ].join("\n"),
    );
    assert.equal(rates({ t: 0, samples: api }, { t: 2000, samples: api }).queueDepth, 7);
    assert.equal(serverRole(api), "api");
    assert.equal(serverRole(parseMetrics('modelport_model_ready{model="m",role="runner"} 1')), "runner");
    assert.equal(serverRole(parseMetrics(SCRAPE_2)), "all");
  });

  it("cost per model from the modelport_cost_* counters", () => {
    const c = costs(
      parseMetrics(
        [
          'modelport_cost_requests_total{model="a"} 4',
          'modelport_cost_dollars_total{model="a"} 0.002',
          'modelport_cost_compute_seconds_total{model="a"} 1.5',
          'modelport_cost_tokens_total{model="a",kind="input"} 7',
          'modelport_cost_tokens_total{model="a",kind="output"} 9',
          'modelport_cost_requests_total{model="b"} 0',
        ].join("\n"),
      ),
    );
    assert.equal(c.length, 2);
    assert.deepEqual(c[0], {
      model: "a",
      requests: 4,
      computeSeconds: 1.5,
      dollars: 0.002,
      inputTokens: 7,
      outputTokens: 9,
      per1000: 0.5,
    });
    assert.ok(Number.isNaN(c[1]!.per1000));
  });

  it("chart paths scale into the box, clip at the top and break at NaN", () => {
    assert.equal(linePath([0, 5, 10], 100, 50, 10), "M0.0 50.0 L50.0 25.0 L100.0 0.0");
    assert.equal(linePath([20], 100, 50, 10), "M0.0 0.0");
    assert.equal(linePath([1, Number.NaN, 1], 100, 50, 1), "M0.0 0.0 M100.0 0.0");
    assert.equal(linePath([], 100, 50, 1), "");
  });
});

describe("ui form helpers", () => {
  const features: TensorSpec = { name: "features", datatype: "FP32", shape: [-1, 6] };
  const contract: TensorSpec = {
    name: "contract",
    datatype: "BYTES",
    shape: [-1],
    description: "month-to-month | one-year | two-year",
  };
  const autopay: TensorSpec = { name: "autopay", datatype: "BOOL", shape: [-1] };

  it("defaults fit the schema: a row of zeros, the first listed choice, false", () => {
    assert.equal(defaultText(features, true), "0, 0, 0, 0, 0, 0");
    assert.deepEqual(choices(contract), ["month-to-month", "one-year", "two-year"]);
    assert.equal(defaultText(contract, true), "month-to-month");
    assert.equal(defaultText(autopay, true), "false");
    assert.equal(
      defaultText({ name: "m", datatype: "INT64", shape: [2, -1, 3] }, false),
      "[[[0,0,0]],[[0,0,0]]]",
    );
  });

  it("fields read back as the input's datatype; bad text names the input", () => {
    assert.deepEqual(parseField(features, "1, 2.5, 3, 4, 5, 6", true), [1, 2.5, 3, 4, 5, 6]);
    assert.deepEqual(parseField(features, "[1,2,3,4,5,6]", true), [1, 2, 3, 4, 5, 6]);
    assert.equal(parseField(autopay, "true", true), true);
    assert.equal(parseField(contract, "one-year", true), "one-year");
    assert.throws(() => parseField(features, "1, x", true), /features: a number/);
    assert.throws(() => parseField(autopay, "maybe", true), /autopay: true or false/);
  });

  it("bodies: one object row when every input has a batch dim, named tensors otherwise", () => {
    assert.equal(batchable([features, contract]), true);
    assert.deepEqual(predictBody([features], { features: "1,2,3,4,5,6" }), {
      rows: [{ features: [1, 2, 3, 4, 5, 6] }],
    });
    assert.deepEqual(predictBody([autopay, contract], {}), {
      rows: [{ autopay: false, contract: "month-to-month" }],
    });
    const fixed: TensorSpec = { name: "a", datatype: "FP32", shape: [1, 2] };
    assert.deepEqual(predictBody([fixed], {}), { inputs: { a: [[0, 0]] } });
  });

  it("SSE: complete events' data, the incomplete rest kept for the next read", () => {
    const first = sseEvents('data: {"a":1}\n\ndata: [DONE]\n\ndata: {"b"');
    assert.deepEqual(first, { data: ['{"a":1}', "[DONE]"], rest: 'data: {"b"' });
    const next = sseEvents(`${first.rest}:2}\r\n\r\n: keep-alive\n\n`);
    assert.deepEqual(next, { data: ['{"b":2}'], rest: "" });
  });
});
