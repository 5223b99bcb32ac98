// A filtered Prometheus exposition: only the series a predicate keeps, rendered by the registry's
// own formatter (the same text, default labels and series order as registry.metrics()), so a
// client key's /metrics differs from the full one only in what it leaves out. The full scrape
// never comes here: it stays registry.metrics() as is, at no cost per scrape.
import type { Registry } from "prom-client";

type Labels = Record<string, string | number>;

interface Sample {
  labels?: Labels;
  sharedLabels?: Labels;
  value: number;
  metricName?: string;
}

interface MetricData {
  name: string;
  help: string;
  type: string;
  values?: Sample[];
  aggregator?: string;
}

/** What the registry reads of a metric: getForPromString (histograms, FastMetric) or get(). */
interface Readable {
  getForPromString?: () => Promise<MetricData>;
  get(): Promise<MetricData> | MetricData;
}

/** prom-client's Registry formats one metric with this method (public in its code, absent from its types). */
interface Formatter {
  getMetricsAsString(metric: { getForPromString(): Promise<MetricData> }): Promise<string>;
}

/**
 * The exposition of `registry` with only the series whose labels (a histogram's shared labels
 * included) `keep` accepts; a metric left without series is left out whole.
 */
export async function filteredExposition(
  registry: Registry,
  keep: (labels: Readonly<Record<string, string | number | undefined>>) => boolean,
): Promise<string> {
  const formatter = registry as unknown as Formatter;
  const parts: string[] = [];
  for (const metric of registry.getMetricsAsArray() as unknown as Readable[]) {
    const data = metric.getForPromString ? await metric.getForPromString() : await metric.get();
    const values = (data.values ?? []).filter((v) => keep({ ...v.labels, ...v.sharedLabels }));
    if (values.length === 0) continue;
    parts.push(await formatter.getMetricsAsString({ getForPromString: async () => ({ ...data, values }) }));
  }
  return parts.length > 0 ? `${parts.join("\n\n")}\n` : "";
}
