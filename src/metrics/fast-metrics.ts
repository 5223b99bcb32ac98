// Counters and histograms for the per-request path, rendered by prom-client's Registry exactly as
// its own Counter and Histogram render (the same text, the same series order). prom-client's
// inc/observe validate and hash the label set and find the bucket by its bound as a property name
// on every call, children included: 0.4–0.6 µs each, ~19 µs of main-thread time per predict
// request across modelport's series in a server profile (docs/PERFORMANCE.md). Here a series is
// found once (labels(), which callers keep) and inc/observe add to numbers in place.
//
// What this leaves out of prom-client's API: exemplars, collect() callbacks, startTimer, reset(),
// zero() and the cluster aggregators other than "sum"; and unlike prom-client's counter it refuses
// NaN. Gauges stay prom-client's (set() is cheap).
import type { Metric, Registry } from "prom-client";

type LabelValues<L extends string> = Partial<Record<L, string | number>>;

interface Options<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
  registers: Registry[];
}

/** A sample as prom-client's Registry reads it. */
interface Sample {
  value: number;
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string | number>;
  metricName?: string;
}

abstract class FastMetric<L extends string, S extends { labels: LabelValues<L> }> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  readonly aggregator = "sum";
  abstract readonly type: "counter" | "histogram";
  protected readonly series = new Map<string, S>();

  constructor(options: Options<L>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames ?? [];
    for (const r of options.registers) r.registerMetric(this as unknown as Metric);
  }

  protected abstract create(labels: LabelValues<L>): S;

  /** The series of `labels`, created on first use. */
  protected find(labels: LabelValues<L>): S {
    const key = this.key(labels);
    let s = this.series.get(key);
    if (!s) {
      s = this.create(labels);
      this.series.set(key, s);
    }
    return s;
  }

  /** The series key of `labels`; throws on a label name the metric does not have, as prom-client does. */
  private key(labels: LabelValues<L>): string {
    let key = "";
    let named = 0;
    for (const name of this.labelNames) {
      const v = labels[name];
      if (v !== undefined) named++;
      key += v === undefined ? "\u0002" : `${v}\u0001`;
    }
    if (named !== Object.keys(labels).length)
      for (const name of Object.keys(labels))
        if (!this.labelNames.includes(name as L))
          throw new Error(
            `Added label "${name}" is not included in initial labelset: ${JSON.stringify(this.labelNames)}`,
          );
    return key;
  }

  /** Drops the series of `labels`. */
  remove(labels: LabelValues<L>): void {
    this.series.delete(this.key(labels));
  }

  protected abstract samples(all: Iterable<S>): Sample[];

  async getForPromString() {
    // A metric without labels has its one series from the start, at zero, as prom-client's do.
    if (this.labelNames.length === 0) this.find({});
    const values = this.samples(this.series.values());
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** As prom-client's get(): series labels and sample labels in one object. */
  async get() {
    const { values: samples } = await this.getForPromString();
    const values = samples.map(({ sharedLabels, labels, ...rest }) => ({
      ...rest,
      labels: { ...labels, ...sharedLabels },
    }));
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

interface CounterSeries<L extends string> {
  labels: LabelValues<L>;
  value: number;
  inc(by?: number): void;
}

function checkIncrement(by: number): void {
  if (by < 0) throw new Error("It is not possible to decrease a counter");
  if (!Number.isFinite(by)) throw new TypeError(`Value is not a valid number: ${by}`);
}

export class FastCounter<L extends string = string> extends FastMetric<L, CounterSeries<L>> {
  readonly type = "counter" as const;

  /** The series of `labels`: keep it, its inc() is the cheap path. */
  labels(labels: LabelValues<L>): { inc(by?: number): void } {
    return this.find(labels);
  }

  inc(labelsOrBy?: LabelValues<L> | number, by = 1): void {
    if (typeof labelsOrBy === "object") this.find(labelsOrBy).inc(by);
    else this.find({}).inc(labelsOrBy ?? 1);
  }

  protected create(labels: LabelValues<L>): CounterSeries<L> {
    return {
      labels,
      value: 0,
      inc(by = 1) {
        checkIncrement(by);
        this.value += by;
      },
    };
  }

  protected samples(all: Iterable<CounterSeries<L>>): Sample[] {
    return [...all].map((s) => ({ value: s.value, labels: s.labels as Sample["labels"] }));
  }
}

interface HistogramSeries<L extends string> {
  labels: LabelValues<L>;
  /** Observations per bucket, not cumulative; the last slot counts those above every bound. */
  counts: Float64Array;
  sum: number;
  count: number;
  observe(value: number): void;
}

export class FastHistogram<L extends string = string> extends FastMetric<L, HistogramSeries<L>> {
  readonly type = "histogram" as const;
  readonly upperBounds: readonly number[];

  /** `buckets`: upper bounds, ascending. */
  constructor(options: Options<L> & { buckets: readonly number[] }) {
    super(options);
    this.upperBounds = [...options.buckets];
  }

  /** The series of `labels`: keep it, its observe() is the cheap path. */
  labels(labels: LabelValues<L>): { observe(value: number): void } {
    return this.find(labels);
  }

  observe(labelsOrValue: LabelValues<L> | number, value?: number): void {
    if (typeof labelsOrValue === "object") this.find(labelsOrValue).observe(value as number);
    else this.find({}).observe(labelsOrValue);
  }

  protected create(labels: LabelValues<L>): HistogramSeries<L> {
    const bounds = this.upperBounds;
    return {
      labels,
      counts: new Float64Array(bounds.length + 1),
      sum: 0,
      count: 0,
      observe(value) {
        if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
        let i = 0;
        while (i < bounds.length && value > bounds[i]!) i++;
        this.counts[i]!++;
        this.sum += value;
        this.count++;
      },
    };
  }

  protected samples(all: Iterable<HistogramSeries<L>>): Sample[] {
    const out: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of all) {
      const shared = s.labels as Sample["labels"];
      let acc = 0;
      this.upperBounds.forEach((le, i) => {
        acc += s.counts[i]!;
        out.push({ value: acc, labels: { le }, sharedLabels: shared, metricName: bucket });
      });
      out.push(
        { value: s.count, labels: { le: "+Inf" }, sharedLabels: shared, metricName: bucket },
        { value: s.sum, labels: {}, sharedLabels: shared, metricName: `${this.name}_sum` },
        { value: s.count, labels: {}, sharedLabels: shared, metricName: `${this.name}_count` },
      );
    }
    return out;
  }
}
