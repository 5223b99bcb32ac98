// `modelport tune MODEL`: the layout experiment done for the user. For each layout the thread
// budget accepts (front processes × model threads × batching settings) it starts `modelport
// serve`, waits until it is ready, loads it with the shared load generator, stops it, and in the
// end recommends the layout with the most requests/s whose p99 meets the target, as a config file.
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { basename, dirname, relative, resolve } from "node:path";
import { stringify } from "yaml";
import { ConfigError, loadConfig } from "../config/load.js";
import { THREADS_DOC } from "../config/threads.js";
import type { GoldenFile } from "../golden.js";
import { type LoadResult, runLoad, type Target } from "../loadgen/load.js";
import { Progress } from "../loadgen/progress.js";
import { fmtNumber, machine, problemLine, resultLine, table } from "../loadgen/report.js";
import { type ServeChild, startServe } from "../loadgen/serve-child.js";
import {
  bodyFromGolden,
  bodyFromSignature,
  describeRemoteModel,
  LoadgenError,
  readBodyArg,
  trialRequest,
} from "../loadgen/target.js";
import { VERSION } from "../version.js";
import { parse, UsageError } from "./args.js";
import { concurrencyList, seconds } from "./bench.js";

export const TUNE_HELP = `Usage: modelport tune MODEL [options]

Finds a good serving layout for MODEL on this machine. For every layout within the cores
(front processes × model threads that the thread budget accepts, × batching settings) it starts
'modelport serve MODEL --port 0 ...', waits until ready, loads it at --concurrency for --duration
seconds, and stops it. It prints every layout, recommends the one with the most requests/s among
those with p99 <= --p99-ms and no errors, and writes that layout as a config file.

The request: --body, else the first row of MODEL's golden example (NAME.golden.json beside the
model) when there is one, else one row made from the model's declared inputs (as bench --model).

Options:
      --concurrency N        connections during each measurement (default 32)
      --duration S           measured seconds per layout (default 5; --quick: 1)
      --warmup S             seconds of load before each measurement (default 1; --quick: 0.5)
      --p99-ms MS            latency target: p99 at most this (default 100)
      --out FILE             recommended config (default modelport.tuned.yaml)
      --json FILE            also write every measurement as JSON
      --body JSON|@FILE      request body for every measurement
      --quick                a short sweep (processes and threads 1 and 2, batching off and
                             adaptive 64 rows / 2 ms), for a smoke test
      --budget-minutes M     stop starting new layouts once this much time is spent (default 10)
      --processes LIST       front processes to try (default 1, 2, 4, … up to the cores)
      --threads LIST         model threads to try (default 1, 2, 4, … up to the cores)
      --batch-max-rows LIST  adaptive batching's largest batch to try (default 16,64)
      --batch-max-delay-ms LIST  adaptive batching's longest wait to try (default 1,2,5)
      --log-level LEVEL      serve's log level while measured (default info, serve's default)
  -h, --help                 show this help

The load generator runs in this process, on the same cores as the server: on a small machine it
takes a share of the CPU, as a real client on the same host would. See docs/Performance-tuning.md.
`;

const TUNE_OPTIONS = {
  concurrency: { type: "string" },
  duration: { type: "string" },
  warmup: { type: "string" },
  "p99-ms": { type: "string" },
  out: { type: "string", short: "o" },
  json: { type: "string" },
  body: { type: "string" },
  quick: { type: "boolean" },
  "budget-minutes": { type: "string" },
  processes: { type: "string" },
  threads: { type: "string" },
  "batch-max-rows": { type: "string" },
  "batch-max-delay-ms": { type: "string" },
  "log-level": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

export type BatchingChoice =
  | { enabled: false }
  | { enabled: true; maxBatchRows: number; maxDelayMs: number; adaptive: true };

export interface Layout {
  processes: number;
  threads: number;
  batching: BatchingChoice;
}

export interface Measured {
  layout: Layout;
  /** measured, or why not. */
  outcome: "measured" | "skipped" | "failed";
  reason?: string;
  result?: LoadResult;
}

/** 1, 2, 4, … up to `cores`, and `cores` itself. */
export function powersUpTo(cores: number): number[] {
  const out: number[] = [];
  for (let n = 1; n <= cores; n *= 2) out.push(n);
  if (out[out.length - 1] !== cores) out.push(cores);
  return out;
}

export function describeBatching(b: BatchingChoice): string {
  return b.enabled ? `adaptive ${b.maxBatchRows} rows/${b.maxDelayMs} ms` : "off";
}

function describeLayout(l: Layout): string {
  return (
    `${l.processes} process${l.processes === 1 ? "" : "es"} × ${l.threads} thread${l.threads === 1 ? "" : "s"}, ` +
    (l.batching.enabled
      ? `adaptive batching (max ${l.batching.maxBatchRows} rows, ${l.batching.maxDelayMs} ms)`
      : "no batching")
  );
}

function layoutFlags(model: string, l: Layout): string[] {
  const flags = [model, "--processes", String(l.processes), "--threads", String(l.threads)];
  if (!l.batching.enabled) return [...flags, "--batching", "off"];
  return [
    ...flags,
    "--batching",
    "on",
    "--batch-mode",
    "adaptive",
    "--batch-max-rows",
    String(l.batching.maxBatchRows),
    "--batch-max-delay-ms",
    String(l.batching.maxDelayMs),
  ];
}

function numberList(flag: string, value: string, integer: boolean): number[] {
  return value.split(",").map((s) => {
    const n = Number(s.trim());
    if (!Number.isFinite(n) || n < 0 || (integer && (!Number.isInteger(n) || n < 1)))
      throw new UsageError(`--${flag} takes ${integer ? "whole numbers >= 1" : "numbers >= 0"}, got '${s}'`);
    return n;
  });
}

/**
 * The winner: most requests/s among layouts measured without errors or non-2xx answers whose
 * p99 is within `p99Ms`. When none meets the target, the error-free layout with the lowest p99
 * (`met` false). Undefined when every measurement had errors.
 */
export function pickWinner(
  rows: readonly Measured[],
  p99Ms: number,
): { winner: Measured; met: boolean; runnerUp?: Measured; eligible: number } | undefined {
  const clean = rows.filter(
    (m) => m.result && m.result.errors === 0 && m.result.non2xx === 0 && m.result.latencyMs.p99 !== null,
  );
  const eligible = clean
    .filter((m) => m.result!.latencyMs.p99! <= p99Ms)
    .sort((a, b) => b.result!.rps - a.result!.rps);
  if (eligible.length)
    return {
      winner: eligible[0]!,
      met: true,
      ...(eligible[1] ? { runnerUp: eligible[1] } : {}),
      eligible: eligible.length,
    };
  const lowest = [...clean].sort((a, b) => a.result!.latencyMs.p99! - b.result!.latencyMs.p99!)[0];
  return lowest ? { winner: lowest, met: false, eligible: 0 } : undefined;
}

/** The one-sentence reason for the choice. */
export function explain(pick: NonNullable<ReturnType<typeof pickWinner>>, p99Ms: number): string {
  const w = pick.winner.result!;
  const what = `${describeLayout(pick.winner.layout)}`;
  if (!pick.met)
    return (
      `No layout kept p99 within ${p99Ms} ms at this concurrency, so the recommendation is the error-free ` +
      `one with the lowest p99: ${what} (${fmtNumber(w.latencyMs.p99)} ms, ${fmtNumber(w.rps)} req/s); ` +
      "lower --concurrency or raise --p99-ms if that load is not what you expect."
    );
  const base =
    `Recommended: ${what}, the highest throughput (${fmtNumber(w.rps)} req/s, p99 ${fmtNumber(w.latencyMs.p99)} ms) ` +
    `of the ${pick.eligible} layout${pick.eligible === 1 ? "" : "s"} that kept p99 within ${p99Ms} ms without errors`;
  if (!pick.runnerUp) return `${base}.`;
  const r = pick.runnerUp.result!;
  const ahead = (w.rps / r.rps - 1) * 100;
  const versus = `${describeLayout(pick.runnerUp.layout)}, ${fmtNumber(r.rps)} req/s`;
  return ahead < 5
    ? `${base}, though the runner-up (${versus}) is within ${ahead.toFixed(1)}%, inside the noise of a short run.`
    : `${base}, ${ahead.toFixed(0)}% ahead of the runner-up (${versus}).`;
}

/** The recommended config as YAML text, with a comment saying where it came from. */
export function tunedYaml(opts: {
  name: string;
  backend: "onnx" | "custom" | "transformers";
  modelPath: string;
  layout: Layout;
  comment: string[];
}): string {
  const { layout } = opts;
  const doc = {
    server: { processes: layout.processes },
    models: [
      {
        name: opts.name,
        backend: opts.backend,
        path: opts.modelPath,
        threads: layout.threads,
        batching: layout.batching.enabled
          ? {
              enabled: true,
              maxBatchRows: layout.batching.maxBatchRows,
              maxDelayMs: layout.batching.maxDelayMs,
              adaptive: true,
            }
          : { enabled: false },
      },
    ],
  };
  return `${opts.comment.map((c) => `# ${c}`).join("\n")}\n${stringify(doc)}`;
}

export async function tune(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, TUNE_OPTIONS);
  if (values.help) {
    process.stdout.write(TUNE_HELP);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError("tune takes one model path (modelport tune model.onnx)");
  const quick = values.quick ?? false;
  const concurrency = concurrencyList("concurrency", values.concurrency ?? "32")[0]!;
  if (values.concurrency?.includes(",")) throw new UsageError("tune's --concurrency takes one value");
  const durationS = seconds("duration", values.duration, quick ? 1 : 5);
  const warmupS = seconds("warmup", values.warmup, quick ? 0.5 : 1, true);
  const p99Ms = seconds("p99-ms", values["p99-ms"], 100);
  const budgetMin = seconds("budget-minutes", values["budget-minutes"], 10);
  const logLevel = values["log-level"] ?? "info";
  const out = resolve(values.out ?? "modelport.tuned.yaml");
  const cores = availableParallelism();
  const modelArg = positionals[0]!;
  const log = (line: string) => process.stderr.write(`${line}\n`);

  let base: ReturnType<typeof loadConfig>;
  try {
    base = loadConfig({ modelPath: modelArg });
  } catch (err) {
    if (err instanceof ConfigError) {
      log(`modelport: ${err.code}: ${err.message}`);
      return 2;
    }
    throw err;
  }
  const model = base.models[0]!;

  // The layouts to try, and those the thread budget refuses (listed, not run).
  const quickList = [...new Set([1, Math.min(2, cores)])];
  const ps = values.processes
    ? numberList("processes", values.processes, true)
    : quick
      ? quickList
      : powersUpTo(cores);
  const ts = values.threads
    ? numberList("threads", values.threads, true)
    : quick
      ? quickList
      : powersUpTo(cores);
  const rowsList = values["batch-max-rows"]
    ? numberList("batch-max-rows", values["batch-max-rows"], true)
    : quick
      ? [64]
      : [16, 64];
  const delays = values["batch-max-delay-ms"]
    ? numberList("batch-max-delay-ms", values["batch-max-delay-ms"], false)
    : quick
      ? [2]
      : [1, 2, 5];
  const batchings: BatchingChoice[] = [
    { enabled: false },
    ...rowsList.flatMap((maxBatchRows) =>
      delays.map((maxDelayMs) => ({
        enabled: true as const,
        maxBatchRows,
        maxDelayMs,
        adaptive: true as const,
      })),
    ),
  ];
  const rows: Measured[] = [];
  const toRun: Layout[] = [];
  for (const processes of ps) {
    for (const threads of ts) {
      try {
        loadConfig({ modelPath: modelArg, flags: { processes, threads }, cores });
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        const reason = err.problems
          .map((p) => p.replace(/^command line: (thread budget: )?/, "").replace(/ \(see [^)]*\)/, ""))
          .join("; ");
        rows.push({
          layout: { processes, threads, batching: { enabled: false } },
          outcome: "skipped",
          reason,
        });
        continue;
      }
      for (const batching of batchings) toRun.push({ processes, threads, batching });
    }
  }
  const refused = rows.length;

  // The request body: --body, the golden example's first row, or made from the signature.
  let body = values.body !== undefined ? readBodyArg(values.body) : undefined;
  let bodySource = body !== undefined ? "--body" : "";
  let golden: GoldenFile | undefined;
  if (body === undefined && model.golden) {
    try {
      golden = JSON.parse(readFileSync(model.golden, "utf8")) as GoldenFile;
    } catch (err) {
      log(
        `warning: cannot read ${model.golden} (${(err as Error).message}); making a request from the inputs`,
      );
    }
  }

  let startEstimateS = 3; // refined from real start-ups
  const perLayoutS = () => warmupS + durationS + startEstimateS;
  log(
    `modelport tune: ${model.name} on ${cores} cores: ${toRun.length} layouts to measure` +
      (refused
        ? ` (and ${refused} processes × threads pair${refused === 1 ? "" : "s"} the thread budget refuses)`
        : "") +
      `, concurrency ${concurrency}, ${warmupS} s warm-up + ${durationS} s each: about ` +
      `${Math.ceil((toRun.length * perLayoutS()) / 60)} min (budget ${budgetMin} min)`,
  );

  const progress = new Progress();
  const started = performance.now();
  let starts = 0;
  let startTotalS = 0;
  let target: Target | undefined;
  for (const [i, layout] of toRun.entries()) {
    const label = `[${i + 1}/${toRun.length}] P=${layout.processes} T=${layout.threads} batching ${describeBatching(layout.batching)}`;
    const elapsedS = (performance.now() - started) / 1000;
    if (elapsedS + perLayoutS() > budgetMin * 60) {
      rows.push({ layout, outcome: "skipped", reason: `--budget-minutes ${budgetMin} reached` });
      continue;
    }
    let server: ServeChild | undefined;
    const t0 = performance.now();
    try {
      server = await startServe({
        args: layoutFlags(model.path, layout),
        processes: layout.processes,
        logLevel,
      });
    } catch (err) {
      const reason = (err as Error).message.split("\n").find((l) => l.trim()) ?? "did not start";
      rows.push({ layout, outcome: "failed", reason });
      progress.line(`${label}: failed: ${reason}`);
      continue;
    }
    starts++;
    startTotalS += (performance.now() - t0) / 1000;
    startEstimateS = startTotalS / starts + 0.5;
    try {
      if (!target) {
        const url = `${server.url}/v1/models/${encodeURIComponent(model.name)}/predict`;
        if (body === undefined) {
          const sig = await describeRemoteModel(server.url, model.name, {});
          if (golden) {
            body = bodyFromGolden(golden, sig.batchable);
            bodySource = `${basename(model.golden!)} (${sig.batchable ? "its first row" : "its whole example"})`;
          } else {
            body = bodyFromSignature(sig.inputs);
            bodySource = "made from the model's declared inputs";
          }
        }
        const candidate: Target = {
          url,
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        };
        const trial = await trialRequest(candidate);
        if (trial.status !== 200) {
          log(
            `modelport tune: the request (${bodySource}) was refused with ${trial.status}: ` +
              `${trial.text.slice(0, 300)}\nPass a body the model accepts with --body.`,
          );
          return 1;
        }
        log(
          `request: POST /v1/models/${model.name}/predict, ${Buffer.byteLength(body)} bytes, from ${bodySource}`,
        );
        target = candidate;
      }
      const t: Target = {
        ...target,
        url: `${server.url}/v1/models/${encodeURIComponent(model.name)}/predict`,
      };
      const result = await runLoad(t, {
        concurrency,
        durationS,
        warmupS,
        onProgress: (p) => progress.update(label, p),
      });
      rows.push({ layout, outcome: "measured", result });
      progress.line(`${label}: ${resultLine(result)}`);
    } catch (err) {
      if (err instanceof LoadgenError) {
        if (!target) {
          // No request could be made for this model: every other layout would fail alike.
          log(`modelport tune: ${err.message}`);
          return 1;
        }
        rows.push({ layout, outcome: "failed", reason: err.message });
        progress.line(`${label}: failed: ${err.message}`);
      } else throw err;
    } finally {
      await server.stop();
    }
  }

  // The table, in the order tried, refused layouts last.
  const ordered = [
    ...rows.filter((r) => r.outcome !== "skipped" || r.reason?.startsWith("--budget")),
    ...rows.filter((r) => r.outcome === "skipped" && !r.reason?.startsWith("--budget")),
  ];
  const pick = pickWinner(rows, p99Ms);
  const head = ["P", "T", "batching", "req/s", "p50 ms", "p99 ms", "errors", "note"];
  const cells = ordered.map((m) => {
    const r = m.result;
    const refusedRow = m.outcome === "skipped" && !m.reason?.startsWith("--budget");
    let note = "";
    if (m.outcome !== "measured") note = `${m.outcome}: ${m.reason}`;
    else if (m === pick?.winner) note = "<- recommended";
    else if (r && r.errors + r.non2xx > 0) note = problemLine(r);
    else if (r && (r.latencyMs.p99 ?? Number.POSITIVE_INFINITY) > p99Ms) note = `p99 over ${p99Ms} ms`;
    return [
      String(m.layout.processes),
      String(m.layout.threads),
      refusedRow ? "(any)" : describeBatching(m.layout.batching),
      fmtNumber(r?.rps ?? null),
      fmtNumber(r?.latencyMs.p50 ?? null),
      fmtNumber(r?.latencyMs.p99 ?? null),
      r ? String(r.errors + r.non2xx) : "-",
      note,
    ];
  });
  const lines = [
    "",
    table(head, cells, "lllrrrrl"),
    "",
    `P: serving processes; T: model threads; errors: connection errors, timeouts and non-2xx answers. ` +
      `Concurrency ${concurrency}, ${durationS} s per layout, ${cores} cores.`,
  ];
  if (refused) lines.push(`Refused layouts break the thread budget: see ${THREADS_DOC}.`);
  let code = 0;
  if (!pick) {
    lines.push("", "No layout was measured without errors: nothing to recommend.");
    code = 1;
  } else {
    lines.push("", explain(pick, p99Ms));
    const w = pick.winner;
    const date = new Date().toISOString();
    let modelPath = relative(dirname(out), model.path);
    if (!modelPath.startsWith(".") && !modelPath.startsWith("/")) modelPath = `./${modelPath}`;
    const yaml = tunedYaml({
      name: model.name,
      backend: model.backend,
      modelPath,
      layout: w.layout,
      comment: [
        `Written by modelport tune ${VERSION} on ${date} (${cores} cores, concurrency ${concurrency}, ${durationS} s per layout).`,
        `Measured: ${fmtNumber(w.result!.rps)} req/s, p50 ${fmtNumber(w.result!.latencyMs.p50)} ms, ` +
          `p99 ${fmtNumber(w.result!.latencyMs.p99)} ms (target ${p99Ms} ms).`,
        `Serve with: modelport serve -c ${basename(out)}`,
      ],
    });
    // Write beside the destination, check that serve would accept it, then move it into place.
    // A config (and below, a results file) the user asked for: the umask decides their modes.
    const tmp = `${out}.${process.pid}.tmp`;
    writeFileSync(tmp, yaml);
    try {
      loadConfig({ file: tmp, cores });
      renameSync(tmp, out);
      lines.push(
        `Wrote ${relative(process.cwd(), out) || out}: modelport serve -c ${relative(process.cwd(), out) || out}`,
      );
    } catch (err) {
      rmSync(tmp, { force: true });
      if (!(err instanceof ConfigError)) throw err;
      lines.push(`The recommended config did not validate, so it was not written:\n${err.message}`);
      code = 1;
    }
  }
  if (values.json) {
    const json = {
      tool: "modelport tune",
      version: VERSION,
      date: new Date().toISOString(),
      machine: machine(),
      settings: {
        model: model.path,
        concurrency,
        durationS,
        warmupS,
        p99Ms,
        budgetMinutes: budgetMin,
        quick,
        logLevel,
        bodySource,
      },
      recommended: pick ? { layout: pick.winner.layout, metTarget: pick.met } : null,
      layouts: rows,
    };
    writeFileSync(values.json, `${JSON.stringify(json, null, 2)}\n`);
    lines.push(`Results: ${values.json}`);
  }
  process.stdout.write(`${lines.join("\n")}\n`);
  return code;
}
