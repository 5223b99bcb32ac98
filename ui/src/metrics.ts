// The dashboard's arithmetic on GET /metrics, pure and DOM-free (unit-tested in
// test/unit/ui-metrics.test.ts): parse the Prometheus text format, sum series across labels,
// difference two scrapes into rates, and estimate quantiles from histogram buckets the way
// Prometheus' histogram_quantile does. Counters that went down (a restart) count from zero.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** One scrape: when it was taken (ms) and its samples. */
export interface Snapshot {
  t: number;
  samples: Sample[];
}

type Filter = (labels: Record<string, string>) => boolean;

function parseValue(s: string): number {
  if (s === "+Inf" || s === "Inf") return Number.POSITIVE_INFINITY;
  if (s === "-Inf") return Number.NEGATIVE_INFINITY;
  return Number(s);
}

/** Parses `name{a="x",b="y"} value [timestamp]` lines; comments and blank lines are skipped. */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const brace = line.indexOf("{");
    const space = line.indexOf(" ");
    let name: string;
    const labels: Record<string, string> = {};
    let rest: string;
    if (brace !== -1 && (space === -1 || brace < space)) {
      name = line.slice(0, brace);
      let i = brace + 1;
      while (i < line.length && line[i] !== "}") {
        const eq = line.indexOf("=", i);
        if (eq === -1) break;
        const key = line.slice(i, eq).trim().replace(/^,/, "").trim();
        let j = eq + 2; // past ="
        let value = "";
        while (j < line.length && line[j] !== '"') {
          if (line[j] === "\\" && j + 1 < line.length) {
            const c = line[j + 1];
            value += c === "n" ? "\n" : c;
            j += 2;
          } else value += line[j++];
        }
        labels[key] = value;
        i = j + 1;
        if (line[i] === ",") i++;
      }
      rest = line.slice(line.indexOf("}", i) + 1).trim();
    } else {
      if (space === -1) continue;
      name = line.slice(0, space);
      rest = line.slice(space + 1).trim();
    }
    const value = parseValue(rest.split(/\s+/)[0] ?? "");
    if (name && !Number.isNaN(value)) out.push({ name, labels, value });
  }
  return out;
}

/** The sum of every series of `name` whose labels pass `filter`. */
export function total(samples: readonly Sample[], name: string, filter: Filter = () => true): number {
  let sum = 0;
  for (const s of samples) if (s.name === name && filter(s.labels)) sum += s.value;
  return sum;
}

/** Sums of `name` grouped by the value of label `by`. */
export function totalsBy(
  samples: readonly Sample[],
  name: string,
  by: string,
  filter: Filter = () => true,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of samples)
    if (s.name === name && filter(s.labels)) {
      const k = s.labels[by] ?? "";
      out.set(k, (out.get(k) ?? 0) + s.value);
    }
  return out;
}

/** How much a counter grew; a counter that went down was reset, so it grew by its new value. */
export function increase(before: number, after: number): number {
  return after >= before ? after - before : after;
}

export interface Bucket {
  le: number;
  count: number;
}

/** A histogram's cumulative buckets (`NAME_bucket`), summed across series, by ascending `le`. */
export function buckets(samples: readonly Sample[], name: string, filter: Filter = () => true): Bucket[] {
  const byLe = new Map<number, number>();
  for (const s of samples) {
    if (s.name !== `${name}_bucket` || !filter(s.labels) || s.labels.le === undefined) continue;
    const le = parseValue(s.labels.le);
    byLe.set(le, (byLe.get(le) ?? 0) + s.value);
  }
  return [...byLe.entries()].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
}

/** The buckets' growth between two scrapes (same bucket bounds; a missing one counts 0). */
export function bucketIncrease(before: readonly Bucket[], after: readonly Bucket[]): Bucket[] {
  const old = new Map(before.map((b) => [b.le, b.count]));
  return after.map((b) => ({ le: b.le, count: increase(old.get(b.le) ?? 0, b.count) }));
}

/**
 * The q-quantile (0..1) of cumulative buckets, interpolated linearly inside the bucket it falls
 * in (Prometheus' histogram_quantile); NaN without observations; the highest finite bound when it
 * falls in the +Inf bucket.
 */
export function quantile(q: number, cumulative: readonly Bucket[]): number {
  const n = cumulative.length;
  if (n === 0) return Number.NaN;
  const count = cumulative[n - 1]!.count;
  if (count <= 0) return Number.NaN;
  const rank = q * count;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of cumulative) {
    if (b.count >= rank) {
      if (b.le === Number.POSITIVE_INFINITY) return prevLe;
      const inBucket = b.count - prevCount;
      if (inBucket <= 0) return b.le;
      return prevLe + ((b.le - prevLe) * (rank - prevCount)) / inBucket;
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}

/** The dashboard's own traffic (its polls and files), left out of the request figures. */
export const isDashboardRoute = (route: string | undefined): boolean =>
  route === "/metrics" || route === "/ui" || (route ?? "").startsWith("/ui/");

/** One point of the live charts: rates over the time between two scrapes. */
export interface Rates {
  t: number;
  /** Requests answered per second (the dashboard's own polls excluded). */
  rps: number;
  /** Request duration quantiles in seconds over the window; NaN without requests. */
  p50: number;
  p99: number;
  /** 5xx and 4xx answers per second. */
  errors5xx: number;
  errors4xx: number;
  /** Mean rows per batch run in the window; NaN without batches. */
  batchRows: number;
  /**
   * Rows waiting in the batch queues now (a gauge): this process's own, or on an API tier the
   * runners' as its last health poll of each said.
   */
  queueDepth: number;
  /** LLM tokens generated per second. */
  tokensPerSec: number;
  /** Mean time to first token in seconds over the window; NaN without LLM requests. */
  ttft: number;
  /** Requests answered since the server started (all of them, for a counter). */
  requestsTotal: number;
}

const REQUESTS = "modelport_requests_total";
const DURATION = "modelport_request_duration_seconds";

const notDashboard: Filter = (l) => !isDashboardRoute(l.route);

function windowMean(before: readonly Sample[], after: readonly Sample[], name: string): number {
  const count = increase(total(before, `${name}_count`), total(after, `${name}_count`));
  const sum = increase(total(before, `${name}_sum`), total(after, `${name}_sum`));
  return count > 0 ? sum / count : Number.NaN;
}

/** Differences two scrapes into one chart point (at the later scrape's time). */
export function rates(before: Snapshot, after: Snapshot): Rates {
  const dt = Math.max((after.t - before.t) / 1000, 1e-3);
  const a = before.samples;
  const b = after.samples;
  const grew = (name: string, filter?: Filter) => increase(total(a, name, filter), total(b, name, filter));
  const status =
    (digit: string): Filter =>
    (l) =>
      notDashboard(l) && (l.status ?? "").startsWith(digit);
  const window = bucketIncrease(buckets(a, DURATION, notDashboard), buckets(b, DURATION, notDashboard));
  return {
    t: after.t,
    rps: grew(REQUESTS, notDashboard) / dt,
    p50: quantile(0.5, window),
    p99: quantile(0.99, window),
    errors5xx: grew(REQUESTS, status("5")) / dt,
    errors4xx: grew(REQUESTS, status("4")) / dt,
    batchRows: windowMean(a, b, "modelport_batch_rows"),
    queueDepth: total(b, "modelport_queue_depth_rows") + total(b, "modelport_runner_queue_depth_rows"),
    tokensPerSec: grew("modelport_llm_generated_tokens_total") / dt,
    ttft: windowMean(a, b, "modelport_llm_time_to_first_token_seconds"),
    requestsTotal: total(b, REQUESTS, notDashboard),
  };
}

/**
 * The role of the server that answered the scrape: in a split deployment every series carries
 * `role` (api or runner); a single process (role all) sets no such label.
 */
export function serverRole(samples: readonly Sample[]): "all" | "api" | "runner" {
  for (const s of samples) if (s.labels.role === "api" || s.labels.role === "runner") return s.labels.role;
  return "all";
}

/** Cost figures of one model since the server started (modelport_cost_*; docs/Cost.md). */
export interface ModelCost {
  model: string;
  requests: number;
  computeSeconds: number;
  dollars: number;
  inputTokens: number;
  outputTokens: number;
  /** Dollars per 1,000 requests; NaN before the first request. */
  per1000: number;
}

export function costs(samples: readonly Sample[]): ModelCost[] {
  const requests = totalsBy(samples, "modelport_cost_requests_total", "model");
  const compute = totalsBy(samples, "modelport_cost_compute_seconds_total", "model");
  const dollars = totalsBy(samples, "modelport_cost_dollars_total", "model");
  const input = totalsBy(samples, "modelport_cost_tokens_total", "model", (l) => l.kind === "input");
  const output = totalsBy(samples, "modelport_cost_tokens_total", "model", (l) => l.kind === "output");
  const models = new Set([...requests.keys(), ...compute.keys(), ...dollars.keys()]);
  return [...models].sort().map((model) => {
    const n = requests.get(model) ?? 0;
    const d = dollars.get(model) ?? 0;
    return {
      model,
      requests: n,
      computeSeconds: compute.get(model) ?? 0,
      dollars: d,
      inputTokens: input.get(model) ?? 0,
      outputTokens: output.get(model) ?? 0,
      per1000: n > 0 ? (d / n) * 1000 : Number.NaN,
    };
  });
}

/** An SVG path through `values` scaled into width × height (0 at the bottom); NaN breaks the line. */
export function linePath(values: readonly number[], width: number, height: number, max: number): string {
  if (values.length === 0) return "";
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const top = max > 0 ? max : 1;
  let d = "";
  let pen = false;
  values.forEach((v, i) => {
    if (!Number.isFinite(v)) {
      pen = false;
      return;
    }
    const x = (i * step).toFixed(1);
    const y = (height - (Math.min(v, top) / top) * height).toFixed(1);
    d += `${pen ? "L" : "M"}${x} ${y} `;
    pen = true;
  });
  return d.trim();
}
