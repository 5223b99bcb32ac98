// The per-request counters and histograms (src/metrics/fast-metrics.ts) against prom-client's own:
// the same calls on both must give the same /metrics text (Prometheus and OpenMetrics) and the
// same JSON, and refuse the same mistakes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Counter, Histogram, Registry } from "prom-client";
import { FastCounter, FastHistogram } from "../../src/metrics/fast-metrics.js";

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** What both implementations are driven by: the subset of prom-client's API modelport uses. */
interface CounterLike {
  labels(l: Record<string, string | number>): { inc(by?: number): void };
  inc(l?: Record<string, string | number> | number, by?: number): void;
  remove(l: Record<string, string | number>): void;
}
interface HistogramLike {
  labels(l: Record<string, string | number>): { observe(v: number): void };
  observe(l: Record<string, string | number> | number, v?: number): void;
  remove(l: Record<string, string | number>): void;
}

function pair(contentType?: string) {
  const make = (fast: boolean) => {
    const registry = new Registry();
    if (contentType) registry.setContentType(contentType as never);
    const registers = [registry];
    const C = (fast ? FastCounter : Counter) as unknown as new (o: object) => CounterLike;
    const H = (fast ? FastHistogram : Histogram) as unknown as new (o: object) => HistogramLike;
    return {
      registry,
      requests: new C({
        name: "t_requests_total",
        help: "Requests.",
        labelNames: ["model", "route", "status"],
        registers,
      }),
      plain: new C({ name: "t_plain_total", help: "No labels.", registers }),
      duration: new H({
        name: "t_duration_seconds",
        help: "Latency.",
        labelNames: ["route"],
        buckets: BUCKETS,
        registers,
      }),
      rows: new H({ name: "t_rows", help: "Rows, no labels.", buckets: [1, 2, 4, 8], registers }),
    };
  };
  return [make(false), make(true)] as const;
}

type Side = ReturnType<typeof pair>[number];

/** Runs `script` on prom-client's metrics and on modelport's, and compares what each registry shows. */
async function same(script: (m: Side) => void, contentType?: string): Promise<string> {
  const [reference, fast] = pair(contentType);
  script(reference);
  script(fast);
  const text = await reference.registry.metrics();
  assert.equal(await fast.registry.metrics(), text);
  // prom-client's JSON also carries an empty `exemplar` on histogram samples; exemplars are not kept here.
  const json = async (r: Registry) =>
    JSON.parse(
      JSON.stringify(await r.getMetricsAsJSON(), (k, v) => (k === "exemplar" && v === null ? undefined : v)),
    );
  assert.deepEqual(await json(fast.registry), await json(reference.registry));
  return text;
}

describe("fast counters and histograms render as prom-client's", () => {
  it("fresh: series without labels at zero, labelled ones absent", async () => {
    const text = await same(() => {});
    assert.match(text, /^t_plain_total 0$/m);
    assert.match(text, /^t_rows_bucket\{le="\+Inf"\} 0$/m);
    assert.doesNotMatch(text, /t_requests_total\{/);
  });

  it("children and direct calls, numbers as label values, series in first-use order", async () => {
    const text = await same((m) => {
      const ok = m.requests.labels({ model: "m", route: "/v1/models/:model/predict", status: 200 });
      const child = m.duration.labels({ route: "predict" });
      for (let i = 0; i < 50; i++) {
        ok.inc();
        child.observe(i / 997);
      }
      m.requests.inc({ model: "m", route: "x", status: 503 }, 3);
      m.requests.labels({ status: 404, model: "", route: "x" }).inc(0);
      m.plain.inc();
      m.plain.inc(2.5);
      m.duration.observe({ route: "other" }, 0.0005);
      m.duration.observe({ route: "other" }, 10);
      m.duration.observe({ route: "other" }, 11);
      m.rows.observe(3);
      m.rows.observe(100);
    });
    assert.match(
      text,
      /^t_requests_total\{model="m",route="\/v1\/models\/:model\/predict",status="200"\} 50$/m,
    );
    assert.match(text, /^t_duration_seconds_bucket\{le="0.0005",route="other"\} 1$/m);
    assert.match(text, /^t_duration_seconds_bucket\{le="10",route="other"\} 2$/m);
    assert.match(text, /^t_duration_seconds_bucket\{le="\+Inf",route="other"\} 3$/m);
    assert.match(text, /^t_rows_sum 103$/m);
  });

  it("label values that need escaping, OpenMetrics, remove", async () => {
    const script = (m: Side) => {
      m.requests.inc({ model: 'a"b\\c\nd', route: "r", status: 1 });
      m.requests.inc({ model: "gone", route: "r", status: 1 });
      m.duration.observe({ route: "gone" }, 1);
      m.duration.observe({ route: "kept" }, 0.3);
      m.requests.remove({ model: "gone", route: "r", status: 1 });
      m.duration.remove({ route: "gone" });
      m.requests.inc({ model: "gone", route: "r", status: 1 });
      m.plain.inc(5);
      m.rows.observe(1);
    };
    await same(script);
    const open = await same(script, Registry.OPENMETRICS_CONTENT_TYPE);
    assert.match(open, /# EOF/);
  });

  it("refuses what prom-client refuses", () => {
    const [reference, fast] = pair();
    for (const m of [reference, fast]) {
      assert.throws(
        () => m.requests.inc({ model: "m", route: "r", status: 1 }, -1),
        /not possible to decrease/,
      );
      assert.throws(() => m.requests.inc({ nope: "x" }), /Added label "nope" is not included/);
      // Beside labels whose series exists already.
      m.requests.inc({ model: "m", route: "r", status: 1 });
      assert.throws(
        () => m.requests.inc({ model: "m", route: "r", status: 1, nope: "x" } as never),
        /Added label "nope" is not included/,
      );
      assert.throws(() => m.duration.observe({ route: "r" }, Number.POSITIVE_INFINITY), /not a valid number/);
      assert.throws(() => m.duration.observe({ nope: "x" }, 1), /Added label "nope" is not included/);
    }
    // prom-client adds NaN to a counter (and shows NaN from then on); these refuse it.
    assert.throws(
      () => fast.requests.inc({ model: "m", route: "r", status: 1 }, Number.NaN),
      /not a valid number/,
    );
  });
});
