// Live charts and cost: GET /metrics every 2 s, each scrape differenced against the one before
// (metrics.ts) into one point per chart; the last 90 points (3 minutes) are drawn as small SVG
// line charts. Cost per model comes from the modelport_cost_* counters of the latest scrape.
// On an API tier (role api) the batches and their cost are on the runners: those charts say so
// rather than stay empty, and queue depth is the runners' as the tier last polled them.
import { call } from "./api.js";
import { fmt, html, usePoll, useRef, useState } from "./html.js";
import {
  costs,
  linePath,
  type ModelCost,
  parseMetrics,
  type Rates,
  rates,
  type Snapshot,
  serverRole,
} from "./metrics.js";

const POINTS = 90;
const W = 260;
const H = 64;

interface Line {
  values: number[];
  label: string;
  cls: string;
}

interface ChartProps {
  title: string;
  lines: Line[];
  unit: string;
  test: string;
  /** A line under the title saying where the figures come from. */
  note?: string | undefined;
  /** Measured elsewhere, not by this server: this text in place of the chart. */
  elsewhere?: string | undefined;
}

function Chart({ title, lines, unit, test, note, elsewhere }: ChartProps) {
  if (elsewhere)
    return html`<figure class="chart" data-test=${test}>
      <figcaption>${title}</figcaption>
      <p class="elsewhere" data-test=${`${test}-elsewhere`}>${elsewhere}</p>
    </figure>`;
  const finite = lines.flatMap((l) => l.values.filter(Number.isFinite));
  const peak = Math.max(0, ...finite);
  const max = peak * 1.15 || 1;
  return html`<figure class="chart" data-test=${test} data-peak=${peak}>
    <figcaption>
      ${title}
      ${lines.map((l) => {
        const last = [...l.values].reverse().find(Number.isFinite);
        return html` <span class=${`legend ${l.cls}`}>${l.label} <b data-test=${`${test}-${l.cls}`}>${fmt(last, 2)}</b>${unit}</span>`;
      })}
    </figcaption>
    ${note ? html`<small class="note" data-test=${`${test}-note`}>${note}</small>` : null}
    <svg viewBox=${`0 0 ${W} ${H}`} width=${W} height=${H} role="img" aria-label=${title}>
      <line x1="0" y1=${H - 0.5} x2=${W} y2=${H - 0.5} class="axis" />
      ${lines.map((l) => html`<path d=${linePath(l.values, W, H - 2, max)} class=${`series ${l.cls}`} />`)}
      <text x="2" y="10" class="max">${fmt(max, 2)}</text>
    </svg>
  </figure>`;
}

function CostTable({ rows, api }: { rows: ModelCost[]; api: boolean }) {
  return html`<section class="card">
    <h2>Cost per model</h2>
    <p class="muted">Since the server started: machine time × pricePerHour, plus tokens × per-million prices where set (docs/Cost.md).</p>
    ${
      api
        ? html`<p class="muted" data-test="cost-elsewhere">This is an API tier: models that run on the
          runners are costed there (modelport_cost_* in each runner's /metrics).</p>`
        : null
    }
    <table data-test="cost">
      <thead><tr><th>model</th><th>requests</th><th>compute s</th><th>tokens in/out</th><th>$ / 1,000 req</th><th>$ total</th></tr></thead>
      <tbody>
        ${rows.map(
          (c) => html`<tr data-model=${c.model}>
            <td>${c.model}</td><td data-test="cost-requests">${fmt(c.requests, 0)}</td>
            <td data-test="cost-compute">${fmt(c.computeSeconds, 3)}</td>
            <td data-test="cost-tokens">${fmt(c.inputTokens, 0)} / ${fmt(c.outputTokens, 0)}</td>
            <td>${fmt(c.per1000, 8)}</td><td data-test="cost-dollars">${fmt(c.dollars, 8)}</td>
          </tr>`,
        )}
      </tbody>
    </table>
  </section>`;
}

export function Live() {
  const last = useRef<Snapshot | undefined>(undefined);
  const [points, setPoints] = useState<Rates[]>([]);
  const [cost, setCost] = useState<ModelCost[]>([]);
  const [role, setRole] = useState<"all" | "api" | "runner">("all");
  const [error, setError] = useState<string | undefined>();
  usePoll(async () => {
    try {
      const text = await (await call("metrics", { poll: true })).text();
      const now: Snapshot = { t: Date.now(), samples: parseMetrics(text) };
      const before = last.current;
      last.current = now;
      setCost(costs(now.samples));
      setRole(serverRole(now.samples));
      setError(undefined);
      if (before) setPoints((p) => [...p, rates(before, now)].slice(-POINTS));
    } catch (e) {
      setError(`metrics unavailable: ${(e as Error).message}`);
    }
  }, 2000);
  const series = (f: (r: Rates) => number) => points.map(f);
  const latest = points[points.length - 1];
  const api = role === "api";
  return html`<section class="card wide">
      <h2>Live <small class="muted">GET /metrics every 2 s · requests so far:
        <b data-test="requests-total">${latest ? fmt(latest.requestsTotal, 0) : "–"}</b></small></h2>
      ${error ? html`<p class="error">${error}</p>` : null}
      <div class="charts">
        <${Chart} title="Requests" unit="/s" test="chart-rps" lines=${[{ values: series((r) => r.rps), label: "", cls: "a" }]} />
        <${Chart} title="Latency" unit=" ms" test="chart-latency" lines=${[
          { values: series((r) => r.p50 * 1000), label: "p50", cls: "a" },
          { values: series((r) => r.p99 * 1000), label: "p99", cls: "b" },
        ]} />
        <${Chart} title="Errors" unit="/s" test="chart-errors" lines=${[
          { values: series((r) => r.errors5xx), label: "5xx", cls: "b" },
          { values: series((r) => r.errors4xx), label: "4xx", cls: "c" },
        ]} />
        <${Chart} title="Batch size" unit=" rows" test="chart-batch" lines=${[{ values: series((r) => r.batchRows), label: "mean", cls: "a" }]}
          elsewhere=${api ? "Measured on the runners, which batch what this API tier forwards: modelport_batch_rows in each runner's /metrics." : undefined} />
        <${Chart} title="Queue depth" unit=" rows" test="chart-queue" lines=${[{ values: series((r) => r.queueDepth), label: "", cls: "a" }]}
          note=${api ? "rows queued on the runners, as this API tier last polled them" : undefined} />
        <${Chart} title="LLM tokens" unit="/s" test="chart-tokens" lines=${[{ values: series((r) => r.tokensPerSec), label: "", cls: "a" }]} />
        <${Chart} title="Time to first token" unit=" ms" test="chart-ttft" lines=${[{ values: series((r) => r.ttft * 1000), label: "mean", cls: "a" }]} />
      </div>
    </section>
    <${CostTable} rows=${cost} api=${api} />`;
}
