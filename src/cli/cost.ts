// `modelport cost [URL]`: reads a running server's /metrics and prints, for each served model
// side by side, its requests, cost per 1,000 requests and compute time per request, so a user
// can weigh self-hosting (machine time × pricePerHour) against a hosted API (tokens × prices).
import { type CostSnapshot, summarize } from "../metrics/cost.js";
import { parse, UsageError } from "./args.js";

export const COST_HELP = `Usage: modelport cost [URL] [options]

Reads URL/metrics of a running modelport (default http://127.0.0.1:8080) and prints, per model:
requests counted, cost per 1,000 requests, compute ms per request, tokens per request and the
total so far. Local models cost machine time × pricePerHour (a batch's time is shared among its
requests; a llama.cpp generation's is its share of the model's busy time), plus tokens ×
pricePerMillionInputTokens / pricePerMillionOutputTokens where set; upstream models cost tokens only.
Set the prices in the config (docs/Cost.md); without them time and tokens are still shown.

With --by key: usage per API key name and model for a period, from URL/v1/usage (kept by the
hour in the job store, across restarts and processes; docs/Multi-tenant.md). An admin key sees
every key; a client key its own.

Options:
      --url URL          the server's base URL (same as the positional URL)
      --by model|key     per model since the server started (default), or per key and model
      --from TIME        --by key: the period's start, ISO 8601 or ms (default 30 days before --to)
      --to TIME          --by key: the period's end (default now)
      --api-key KEY      bearer key, when the server has API keys on (or MODELPORT_API_KEY)
      --json             print the figures as JSON instead of a table
  -h, --help             show this help

Exit status: 0 on success; 1 when the server cannot be read; 2 on a usage error.
`;

const COST_OPTIONS = {
  url: { type: "string" },
  "api-key": { type: "string" },
  json: { type: "boolean" },
  by: { type: "string" },
  from: { type: "string" },
  to: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * A label value as the text format writes it, unescaped: the three escapes (backslash before a
 * backslash, a quote or "n") are read left to right in one pass, so an escaped backslash followed
 * by "n" stays a backslash and an "n", never a newline.
 */
export function unescapeLabel(raw: string): string {
  return raw.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
}

/** Parses Prometheus text exposition: one sample per non-comment line. */
export function parsePrometheus(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = unescapeLabel(l[2]!);
    }
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** Each model's cost figures from a /metrics text, in name order (summed over instances). */
export function costFromMetrics(text: string): (CostSnapshot & { model: string })[] {
  const totals = new Map<
    string,
    { requests: number; computeMs: number; dollars: number; inputTokens: number; outputTokens: number }
  >();
  const get = (model: string) => {
    let t = totals.get(model);
    if (!t) {
      t = { requests: 0, computeMs: 0, dollars: 0, inputTokens: 0, outputTokens: 0 };
      totals.set(model, t);
    }
    return t;
  };
  for (const s of parsePrometheus(text)) {
    const model = s.labels.model;
    if (model === undefined || !Number.isFinite(s.value)) continue;
    switch (s.name) {
      case "modelport_cost_requests_total":
        get(model).requests += s.value;
        break;
      case "modelport_cost_compute_seconds_total":
        get(model).computeMs += s.value * 1000;
        break;
      case "modelport_cost_dollars_total":
        get(model).dollars += s.value;
        break;
      case "modelport_cost_tokens_total":
        if (s.labels.kind === "input") get(model).inputTokens += s.value;
        else if (s.labels.kind === "output") get(model).outputTokens += s.value;
        break;
    }
  }
  return [...totals.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([model, t]) => ({ model, ...summarize(t) }));
}

/**
 * Dollars as a reader wants them: cents from $1 up, else three significant digits in fixed
 * notation ($0.000000299, never $2.99e-7).
 */
export function money(x: number): string {
  if (x === 0) return "$0";
  if (x < 0) return `-${money(-x)}`;
  if (x >= 1) return `$${x.toFixed(2)}`;
  // Decimals that keep three significant digits: the zeros after the point, plus three.
  const decimals = Math.min(100, Math.max(2, 2 - Math.floor(Math.log10(x))));
  return `$${x.toFixed(decimals)}`;
}

/** The side-by-side table `modelport cost` prints. */
export function costTable(rows: readonly (CostSnapshot & { model: string })[]): string {
  const header = ["model", "requests", "cost / 1,000 req", "compute ms / req", "tokens / req", "total"];
  const body = rows.map((r) => [
    r.model,
    String(Math.round(r.requests)),
    money(r.costPer1000Requests),
    r.computeMsPerRequest.toFixed(3),
    r.requests > 0 ? ((r.inputTokens + r.outputTokens) / r.requests).toFixed(1) : "0",
    money(r.dollars),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), ...body.map(line)].join("\n");
}

export async function cost(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, COST_OPTIONS);
  if (values.help) {
    process.stdout.write(COST_HELP);
    return 0;
  }
  if (positionals.length > 1) throw new UsageError(`cost takes one URL, got ${positionals.join(" ")}`);
  const base = (values.url ?? positionals[0] ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
  if (!/^https?:\/\//.test(base)) throw new UsageError(`'${base}' is not an http(s) URL`);
  const key = values["api-key"] ?? process.env.MODELPORT_API_KEY;
  const by = values.by ?? "model";
  if (by !== "model" && by !== "key") throw new UsageError(`--by takes model or key, not '${by}'`);
  if (by === "key") return costByKey(base, key, values);
  let text: string;
  try {
    const res = await fetch(`${base}/metrics`, key ? { headers: { authorization: `Bearer ${key}` } } : {});
    if (!res.ok) {
      process.stderr.write(`modelport cost: ${base}/metrics answered HTTP ${res.status}\n`);
      return 1;
    }
    text = await res.text();
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    process.stderr.write(`modelport cost: cannot read ${base}/metrics: ${cause}\n`);
    return 1;
  }
  const rows = costFromMetrics(text);
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ url: base, models: rows }, null, 2)}\n`);
    return 0;
  }
  if (rows.length === 0) {
    process.stdout.write(`${base} reports no cost figures (modelport_cost_*): is it a modelport server?\n`);
    return 0;
  }
  process.stdout.write(`${costTable(rows)}\n`);
  process.stdout.write(
    "Local models: machine time × pricePerHour (+ tokens × per-million prices where set); upstream: tokens × per-million prices (docs/Cost.md).\n",
  );
  return 0;
}

interface UsageGroupRow {
  key: string;
  model: string;
  requests: number;
  rows: number;
  prompt_tokens: number;
  completion_tokens: number;
  compute_ms: number;
  dollars: number;
}

/** The table of `cost --by key`: one line per key and model. */
export function usageTable(rows: readonly UsageGroupRow[]): string {
  const header = ["key", "model", "requests", "rows", "tokens", "compute ms", "total"];
  const body = rows.map((r) => [
    r.key,
    r.model,
    String(r.requests),
    String(r.rows),
    String(r.prompt_tokens + r.completion_tokens),
    r.compute_ms.toFixed(1),
    money(r.dollars),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), ...body.map(line)].join("\n");
}

async function costByKey(
  base: string,
  key: string | undefined,
  values: { from?: string | undefined; to?: string | undefined; json?: boolean | undefined },
): Promise<number> {
  const query = new URLSearchParams({ group_by: "key,model" });
  if (values.from) query.set("from", values.from);
  if (values.to) query.set("to", values.to);
  const url = `${base}/v1/usage?${query}`;
  let body: { from: string; to: string; data: UsageGroupRow[]; error?: { message?: string } };
  try {
    const res = await fetch(url, key ? { headers: { authorization: `Bearer ${key}` } } : {});
    body = (await res.json()) as typeof body;
    if (!res.ok) {
      process.stderr.write(
        `modelport cost: ${url} answered HTTP ${res.status}: ${body.error?.message ?? ""}\n`,
      );
      return 1;
    }
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    process.stderr.write(`modelport cost: cannot read ${url}: ${cause}\n`);
    return 1;
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ url: base, ...body }, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(`usage from ${body.from} to ${body.to}\n${usageTable(body.data)}\n`);
  return 0;
}
