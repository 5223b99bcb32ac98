// One sample of a running server's /metrics, read with the exposition parser `modelport cost` uses.
import { parsePrometheus } from "../../src/cli/cost.js";

/** The value of `name` whose labels include `labels`; undefined when there is none. */
export async function metricValue(
  url: string,
  name: string,
  labels: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`, { headers })).text();
  return parsePrometheus(text).find(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  )?.value;
}
