// `modelport bench URL`: load a running server (modelport or any HTTP URL) with autocannon at
// one or more concurrencies and report requests/s and latency percentiles, as a table, JSON and
// an SVG (or HTML) chart.
import { isUtf8 } from "node:buffer";
import { writeFileSync } from "node:fs";
import { extname } from "node:path";
import { chartHtml, chartSvg } from "../loadgen/chart.js";
import { type LoadResult, runLoad, type Target } from "../loadgen/load.js";
import { Progress } from "../loadgen/progress.js";
import { fmtNumber, machine, problemLine, resultLine, table } from "../loadgen/report.js";
import {
  bodyFromSignature,
  describeRemoteModel,
  LoadgenError,
  parseHeaders,
  readBodyArg,
  trialRequest,
} from "../loadgen/target.js";
import { VERSION } from "../version.js";
import { parse, UsageError } from "./args.js";

export const BENCH_HELP = `Usage: modelport bench URL [options]

Loads URL with autocannon (keep-alive connections, one request in flight per connection) for
each concurrency in turn, and prints requests/s and latency percentiles of the 2xx answers.
URL may be any HTTP endpoint; with --model it is a modelport base URL (http://127.0.0.1:8080).

Options:
      --concurrency LIST   connections, comma-separated: one run per value (default 1,8,64)
      --duration S         measured seconds per run (default 10)
      --warmup S           seconds of load before each run, not measured (default 1)
      --method METHOD      HTTP method (default GET; POST with --body or --model)
      --body JSON|@FILE    request body, inline or a file's bytes as they are (content-type defaults
                           to JSON; a binary OIP body needs --header inference-header-content-length:N)
      --header K:V         request header (repeatable), e.g. --header "authorization: Bearer KEY"
      --model NAME         bench POST URL/v1/models/NAME/predict; unless --body is given the body
                           is one row made from the model's declared inputs (GET /v1/models/NAME):
                           dynamic dims 1, floats 0.5, integers 1, BOOL false, BYTES "a"
      --timeout S          per-request timeout (default 10)
      --json FILE          write settings, machine and results as JSON
      --chart FILE         write a chart of latency and throughput against concurrency
                           (.svg, or .html for the chart with a table)
  -h, --help               show this help

Exit status: 0 when every run got answers without connection errors or timeouts; 1 when the URL
cannot be reached, a run had errors, or no answer was 2xx; 2 on a usage error.
`;

const BENCH_OPTIONS = {
  concurrency: { type: "string" },
  duration: { type: "string" },
  warmup: { type: "string" },
  method: { type: "string" },
  body: { type: "string" },
  header: { type: "string", multiple: true },
  model: { type: "string" },
  timeout: { type: "string" },
  json: { type: "string" },
  chart: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** Parses "1,8,64" into whole numbers ≥ 1. */
export function concurrencyList(flag: string, value: string): number[] {
  const list = value.split(",").map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${flag} takes whole numbers >= 1, got '${s}'`);
    return n;
  });
  if (list.length === 0) throw new UsageError(`--${flag} needs at least one value`);
  return list;
}

/** A number of seconds: > 0, or >= 0 when `zero` is allowed. */
export function seconds(flag: string, value: string | undefined, fallback: number, zero = false): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || (!zero && n === 0))
    throw new UsageError(`--${flag} must be a number of seconds ${zero ? ">= 0" : "> 0"}, got '${value}'`);
  return n;
}

function normalizeUrl(raw: string): string {
  const withScheme = /^[a-z]+:\/\//i.test(raw) ? raw : `http://${raw}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new UsageError(`'${raw}' is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new UsageError(`bench loads http:// or https:// URLs, got '${raw}'`);
  return url.toString();
}

/** Headers as written to the JSON results: credentials are not. */
function redacted(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers))
    out[k] = /^(authorization|cookie|x-api-key)$/i.test(k) ? "<redacted>" : v;
  return out;
}

const tableHead = ["concurrency", "req/s", "p50 ms", "p90 ms", "p99 ms", "errors", "non-2xx"];
const tableRow = (r: LoadResult) => [
  String(r.concurrency),
  fmtNumber(r.rps),
  fmtNumber(r.latencyMs.p50),
  fmtNumber(r.latencyMs.p90),
  fmtNumber(r.latencyMs.p99),
  String(r.errors),
  String(r.non2xx),
];

export async function bench(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, BENCH_OPTIONS);
  if (values.help) {
    process.stdout.write(BENCH_HELP);
    return 0;
  }
  if (positionals.length !== 1)
    throw new UsageError("bench takes one URL (modelport bench http://127.0.0.1:8080 --model NAME)");
  const concurrency = concurrencyList("concurrency", values.concurrency ?? "1,8,64");
  const durationS = seconds("duration", values.duration, 10);
  const warmupS = seconds("warmup", values.warmup, 1, true);
  const timeoutS = seconds("timeout", values.timeout, 10);
  if (values.chart && ![".svg", ".html", ".htm"].includes(extname(values.chart).toLowerCase()))
    throw new UsageError(`--chart writes .svg or .html, got '${values.chart}'`);
  const log = (line: string) => process.stderr.write(`${line}\n`);

  try {
    let url = normalizeUrl(positionals[0]!);
    const headers = parseHeaders(values.header ?? []);
    let body = values.body !== undefined ? readBodyArg(values.body) : undefined;
    let bodySource = body !== undefined ? "--body" : "none";
    if (values.model) {
      const base = url.replace(/\/+$/, "");
      const model = await describeRemoteModel(base, values.model, headers);
      if (!model.ready) log(`warning: model '${model.name}' is not ready; its predict route will answer 503`);
      if (body === undefined) {
        body = bodyFromSignature(model.inputs);
        bodySource = "made from the model's declared inputs";
      }
      url = `${base}/v1/models/${encodeURIComponent(values.model)}/predict`;
    }
    const method = (values.method ?? (body !== undefined ? "POST" : "GET")).toUpperCase();
    if (body !== undefined && !("content-type" in headers)) headers["content-type"] = "application/json";
    const target: Target = { url, method, headers, ...(body !== undefined ? { body } : {}) };

    const trial = await trialRequest(target);
    if (trial.status < 200 || trial.status >= 300)
      log(`warning: a trial request answered ${trial.status}: ${trial.text.slice(0, 300)}`);
    log(
      `modelport bench: ${method} ${url}` +
        (body !== undefined ? `, body ${Buffer.byteLength(body)} bytes (${bodySource})` : "") +
        `; concurrency ${concurrency.join(", ")}; ${durationS} s per run after ${warmupS} s warm-up`,
    );

    const progress = new Progress();
    const results: LoadResult[] = [];
    for (const c of concurrency) {
      const label = `c=${c}`;
      const r = await runLoad(target, {
        concurrency: c,
        durationS,
        warmupS,
        timeoutS,
        onProgress: (p) => progress.update(label, p),
      });
      results.push(r);
      progress.line(`${label}: ${resultLine(r)}`);
    }

    const date = new Date().toISOString();
    const out = ["", table(tableHead, results.map(tableRow)), ""];
    for (const r of results) {
      const problems = problemLine(r);
      if (problems) out.push(`concurrency ${r.concurrency}: ${problems}`);
    }
    out.push("latency: of 2xx answers, ms; errors: connection errors and timeouts (no answer).");
    if (values.json) {
      const shown = shownBody(body);
      const json = {
        tool: "modelport bench",
        version: VERSION,
        date,
        machine: machine(),
        settings: {
          url,
          method,
          headers: redacted(headers),
          bodyBytes: body === undefined ? 0 : Buffer.byteLength(body),
          ...(shown !== undefined ? { body: shown } : {}),
          bodySource,
          ...(values.model ? { model: values.model } : {}),
          concurrency,
          durationS,
          warmupS,
          timeoutS,
          pipelining: 1,
        },
        results,
      };
      // Files the user asked for (results, chart), holding measurements only: the umask decides their modes.
      writeFileSync(values.json, `${JSON.stringify(json, null, 2)}\n`);
      out.push(`results: ${values.json}`);
    }
    if (values.chart) {
      const points = results.map((r) => ({
        concurrency: r.concurrency,
        rps: r.rps,
        p50: r.latencyMs.p50,
        p99: r.latencyMs.p99,
      }));
      const chartOpts = {
        title: `modelport bench: ${method} ${url}`,
        subtitle: `${durationS} s per run, ${machine().cpus} cores, ${date}`,
      };
      const html = /\.html?$/i.test(values.chart);
      writeFileSync(
        values.chart,
        html ? chartHtml(points, chartOpts, tableHead, results.map(tableRow)) : chartSvg(points, chartOpts),
      );
      out.push(`chart: ${values.chart}`);
    }
    process.stdout.write(`${out.join("\n")}\n`);

    const errored = results.filter((r) => r.errors > 0);
    const no2xx = results.filter((r) => r.latencyMs.p50 === null);
    if (errored.length) {
      log(`modelport bench: errors at concurrency ${errored.map((r) => r.concurrency).join(", ")}`);
      return 1;
    }
    if (no2xx.length) {
      log(`modelport bench: no 2xx answer at concurrency ${no2xx.map((r) => r.concurrency).join(", ")}`);
      return 1;
    }
    return 0;
  } catch (err) {
    if (err instanceof LoadgenError) {
      log(`modelport bench: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

/** The body as the results show it: text of at most 4 KiB (a file's too, when it is UTF-8); else none. */
function shownBody(body: string | Buffer | undefined): string | undefined {
  if (body === undefined || Buffer.byteLength(body) > 4096) return undefined;
  if (typeof body === "string") return body;
  return isUtf8(body) ? body.toString("utf8") : undefined;
}
