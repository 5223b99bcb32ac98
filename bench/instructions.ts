// Instructions per request, counted rather than timed (`npm run bench:instructions`): the naive
// server and modelport on the small MLP (bench/overhead-models.ts), one row per request (`--rows`)
// at concurrency 1, each run under valgrind's callgrind. A count does not move with the machine's
// load, where the 1-row p50 on a shared 2-core machine moves by 2× from one minute to the next.
//
// Each server gets `--warmup` requests first (V8 is still optimizing modelport's functions for
// the first ~15,000), then callgrind's counters are zeroed, `--requests` requests are sent one
// after another over one keep-alive connection, and the counters are dumped, one file per thread.
// The report splits each server's instructions per request into the request thread, the model's
// thread (a worker), V8's optimizing compiler (on its helper threads) and the rest (the
// collector's helpers, libuv's pool). modelport is measured twice: as its defaults serve this
// model natively (idle at concurrency 1, it runs on the request thread: batching.inlineMaxMs) and
// with every request through the model's thread (`--inline-max-ms 0`). Needs valgrind (Debian
// package `valgrind`); takes ~15 minutes.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { freePort, MODELPORT_BIN } from "../src/loadgen/serve-child.js";
import { spawnChild } from "./children.js";
import { send } from "./overhead.js";
import { writeOverheadModel } from "./overhead-models.js";
import { provenance } from "./provenance.js";

const here = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const repoRoot = path.resolve(here, "../..");

interface Variant {
  label: string;
  /** The server's arguments after `node`, given the model file and the port. */
  args(model: string, port: number): string[];
  path: string;
}

const VARIANTS: readonly Variant[] = [
  {
    label: "naive",
    args: (model, port) => [path.join(here, "naive-server.js"), model, String(port)],
    path: "/",
  },
  ...[
    // Under callgrind a call takes ~50× its native time, past the 1 ms up to which the default
    // runs an idle small model on the request thread: 100 ms keeps what the default does natively.
    { label: "modelport, request thread", flags: ["--inline-max-ms", "100"] },
    { label: "modelport, model thread", flags: ["--inline-max-ms", "0"] },
  ].map((v) => ({
    label: v.label,
    args: (model: string, port: number) => [
      MODELPORT_BIN,
      "serve",
      model,
      "--port",
      String(port),
      "--log-format",
      "json",
      "--log-level",
      "warn",
      ...v.flags,
    ],
    path: "/v1/models/overhead-mlp/predict",
  })),
];

/** Instructions by thread kind, summed over a run's per-thread dumps. */
interface Counts {
  total: number;
  requestThread: number;
  modelThread: number;
  compiler: number;
  other: number;
}

const COMPILE_TASK = "OptimizingCompileDispatcher::CompileTask::RunInternal";

/**
 * One per-thread callgrind dump: its total (the `summary:` line) and what was spent inside V8's
 * optimizing compile tasks (the inclusive cost of each call to one, summed), and whether the thread
 * is a Worker's (node::worker::Worker::Run on its stack).
 */
function readDump(text: string): { total: number; compiler: number; worker: boolean } {
  const names = new Map<string, string>();
  let total = 0;
  let compiler = 0;
  let callee = "";
  let inCall = false;
  for (const line of text.split("\n")) {
    if (inCall) {
      // The line after calls=: "<position> <inclusive cost>".
      inCall = false;
      if (callee.includes(COMPILE_TASK)) compiler += Number(line.trim().split(/\s+/).pop());
      continue;
    }
    if (line.startsWith("summary:")) total = Number(line.slice(8).trim());
    else if (line.startsWith("cfn=")) callee = resolveName(names, line.slice(4));
    else if (line.startsWith("fn=")) resolveName(names, line.slice(3));
    else if (line.startsWith("calls=")) inCall = true;
  }
  const worker = [...names.values()].some((n) => n.includes("node::worker::Worker::Run"));
  return { total, compiler, worker };
}

/** callgrind's name compression: "(id) name" defines id, "(id)" alone refers to it. */
function resolveName(names: Map<string, string>, spec: string): string {
  const m = /^\((\d+)\)(?: (.*))?$/.exec(spec);
  if (!m) return spec;
  if (m[2] !== undefined) names.set(m[1]!, m[2]);
  return names.get(m[1]!) ?? "";
}

async function measure(
  v: Variant,
  model: string,
  dir: string,
  body: Buffer,
  warmup: number,
  requests: number,
): Promise<Counts> {
  const port = await freePort();
  const prefix = path.join(dir, `cg-${v.label.replace(/[^a-z0-9]+/gi, "-")}`);
  const child = spawnChild(
    "valgrind",
    [
      "--tool=callgrind",
      "--separate-threads=yes",
      "--dump-instr=no",
      `--callgrind-out-file=${prefix}.%p`,
      process.execPath,
      ...v.args(model, port),
    ],
    v.label,
  );
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const req = { path: v.path, headers: { "content-type": "application/json" }, body };
  const call = async () => {
    const answer = await send(agent, `http://127.0.0.1:${port}`, req);
    if (answer.status !== 200)
      throw new Error(`${v.label} answered ${answer.status}: ${answer.body.toString().slice(0, 300)}`);
  };
  try {
    // Started once it answers the request itself (under callgrind, loading takes tens of seconds).
    for (const startBy = Date.now() + 180_000; ; ) {
      if (child.process.exitCode !== null)
        throw new Error(`${v.label} exited while starting:\n${child.stderrTail()}`);
      try {
        await call();
        break;
      } catch (err) {
        if (Date.now() > startBy)
          throw new Error(`${v.label} did not answer within 180 s: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    for (let i = 0; i < warmup; i++) await call();
    execFileSync("callgrind_control", ["-z", String(child.pid)], { stdio: "ignore" });
    for (let i = 0; i < requests; i++) await call();
    execFileSync("callgrind_control", ["-d", String(child.pid)], { stdio: "ignore" });
  } finally {
    agent.destroy();
    await child.stop(0);
  }
  // The dump's files: PREFIX.PID.1-NN, one per thread (01 is the main thread).
  const base = path.basename(prefix);
  const counts: Counts = { total: 0, requestThread: 0, modelThread: 0, compiler: 0, other: 0 };
  for (const f of readdirSync(dir).filter((n) => n.startsWith(`${base}.`) && /\.1-\d+$/.test(n))) {
    const d = readDump(readFileSync(path.join(dir, f), "utf8"));
    counts.total += d.total;
    counts.compiler += d.compiler;
    if (f.endsWith("-01")) counts.requestThread += d.total - d.compiler;
    else if (d.worker) counts.modelThread += d.total - d.compiler;
    else counts.other += d.total - d.compiler;
  }
  if (counts.total === 0) throw new Error(`${v.label}: callgrind wrote no counts`);
  for (const k of Object.keys(counts) as (keyof Counts)[]) counts[k] = Math.round(counts[k] / requests);
  return counts;
}

async function main(): Promise<void> {
  const { values: flags } = parseArgs({
    options: {
      warmup: { type: "string", default: "25000" },
      requests: { type: "string", default: "2000" },
      rows: { type: "string", default: "1" },
    },
  });
  const warmup = Number(flags.warmup);
  const requests = Number(flags.requests);
  const rows = Number(flags.rows);
  if (![warmup, requests, rows].every((n) => Number.isInteger(n) && n >= 0) || requests < 1 || rows < 1) {
    console.error("Usage: npm run bench:instructions -- [--warmup N] [--requests N] [--rows N]");
    process.exit(2);
  }
  try {
    execFileSync("valgrind", ["--version"], { stdio: "ignore" });
  } catch {
    console.error("bench:instructions needs valgrind (Debian: apt-get install valgrind)");
    process.exit(2);
  }
  const dir = mkdtempSync(path.join(tmpdir(), "modelport-instructions-"));
  try {
    const model = writeOverheadModel(dir, "overhead-mlp");
    const row = Array.from({ length: 30 }, (_, i) => Math.round(Math.sin(i) * 1000) / 1000);
    const body = Buffer.from(JSON.stringify({ rows: Array.from({ length: rows }, () => row) }));
    const results: { server: string; perRequest: Counts }[] = [];
    for (const v of VARIANTS) {
      const started = Date.now();
      const perRequest = await measure(v, model, dir, body, warmup, requests);
      console.log(
        `  ${v.label.padEnd(28)} ${perRequest.total.toLocaleString("en-US")} instructions a request (${Math.round((Date.now() - started) / 1000)} s)`,
      );
      results.push({ server: v.label, perRequest });
    }
    const naive = results[0]!.perRequest;
    const n = (x: number) => x.toLocaleString("en-US");
    const lines = [
      `### Instructions per request, ${new Date().toISOString().slice(0, 10)}`,
      "",
      `MLP 30-64-64-2, ${rows} row(s) per request, one client, ${n(warmup)} requests of warm-up, ${n(requests)} counted; callgrind, every thread of the server.`,
      "",
      "| server | total | / naive | request thread | model thread | V8 compiler | other threads |",
      "|---|--:|--:|--:|--:|--:|--:|",
      ...results.map(
        ({ server, perRequest: c }) =>
          `| ${server} | ${n(c.total)} | ${(c.total / naive.total).toFixed(2)} | ${n(c.requestThread)} | ${n(c.modelThread)} | ${n(c.compiler)} | ${n(c.other)} |`,
      ),
    ];
    const outDir = path.join(repoRoot, "bench/results");
    mkdirSync(outDir, { recursive: true });
    const out = path.join(outDir, `instructions-${new Date().toISOString().replace(/:/g, "-")}.json`);
    writeFileSync(
      out,
      `${JSON.stringify({ date: new Date().toISOString(), source: provenance(repoRoot), warmup, requests, rows, results }, null, 2)}\n`,
    );
    lines.push(
      "",
      `Command: \`npm run bench:instructions -- --warmup ${warmup} --requests ${requests} --rows ${rows}\`; results: ${path.relative(process.cwd(), out) || out}`,
    );
    console.log(`\n${lines.join("\n")}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
