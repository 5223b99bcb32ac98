// What every fuzz file shares: the case budget and seed (FUZZ_RUNS, FUZZ_SEED), a `modelport
// serve` child process with the example models, a keep-alive HTTP client, the check that an
// answer is no 5xx and carries an MP_ERR_* code in its route's wire shape, a /livez poller in a
// worker thread, and the child's RSS.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { Worker } from "node:worker_threads";
import fc from "fast-check";
import { ERRORS, type ErrorCode } from "../../src/errors.js";
import { testModels } from "../helpers/models.js";
import { type ChildServer, startChild, waitReady } from "../helpers/server.js";
import { encode, type Json } from "./arbitraries.js";
import { writeRaggedModel } from "./ragged-model.js";

/**
 * Cases for the whole suite (every fuzz file together). Each property takes a share of it, so
 * FUZZ_RUNS=100000 runs every property ten times longer than the default.
 */
export const SUITE_RUNS = Number(process.env.FUZZ_RUNS ?? 12_000);
/** One seed per file run: printed at start and in every failure, FUZZ_SEED replays it. */
export const SEED = process.env.FUZZ_SEED
  ? Number(process.env.FUZZ_SEED)
  : Date.now() ^ (Math.random() * 2 ** 31);

/**
 * Each property's share of SUITE_RUNS. The shares add up to 1, so the suite runs SUITE_RUNS cases
 * whatever the split (a test in config.test.ts checks the sum).
 */
export const SHARES = {
  nativeRows: 0.045,
  nativeInputs: 0.05,
  nativeRaw: 0.05,
  nativeValid: 0.03,
  raggedBatch: 0.01,
  oipJson: 0.07,
  oipBinary: 0.08,
  oipShm: 0.03,
  grpcInfer: 0.04,
  grpcValid: 0.02,
  grpcBytes: 0.01,
  grpcShm: 0.01,
  chat: 0.01,
  completions: 0.01,
  embeddings: 0.04,
  openaiInvalid: 0.045,
  responses: 0.01,
  jobsSubmit: 0.055,
  jobsRead: 0.05,
  wsFrames: 0.05,
  headers: 0.045,
  rawSocket: 0.01,
  configText: 0.025,
  config: 0.025,
  keyFile: 0.01,
  manageHostile: 0.02,
  manageSequence: 0.01,
  authHeaders: 0.01,
  grpcAuth: 0.005,
  usageQuery: 0.005,
  keyLimits: 0.005,
  isolation: 0.012,
  isolationJobs: 0.004,
  isolationShm: 0.004,
  captureRecords: 0.01,
  captureOpenai: 0.005,
  upstream: 0.01,
  tiersNative: 0.02,
  tiersOip: 0.02,
  tiersGrpc: 0.01,
  runnerAnswers: 0.005,
  tiersManageHostile: 0.01,
  tiersManageSequence: 0.005,
} as const;

export type Share = keyof typeof SHARES;

const counts = new Map<string, number>();

/** How many cases property `share` runs (at least 5). */
export function runsFor(share: Share): number {
  return Math.max(5, Math.round(SUITE_RUNS * SHARES[share]));
}

/** fc.assert with the suite's seed and this property's share of cases; counts the cases run. */
export async function check<T>(
  share: Share,
  property: fc.IAsyncProperty<T> | fc.IProperty<T>,
): Promise<void> {
  const numRuns = runsFor(share);
  try {
    await fc.assert(property as fc.IAsyncProperty<T>, {
      numRuns,
      seed: SEED,
      endOnFailure: true,
      includeErrorInReport: true,
    });
  } catch (err) {
    (err as Error).message = `[${share}] replay with FUZZ_SEED=${SEED}\n${(err as Error).message}`;
    throw err;
  }
  counts.set(share, (counts.get(share) ?? 0) + numRuns);
}

/** Cases run so far in this file, per property. */
export function caseCounts(): Record<string, number> {
  return Object.fromEntries(counts);
}

// ---------------------------------------------------------------------------------------------
// HTTP

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: unknown;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

/** The slowest requests of the run (what to look at when /livez was slow). */
const slowest: { ms: number; what: string }[] = [];
function noteTime(ms: number, what: () => string): void {
  if (slowest.length >= 5 && ms <= slowest[slowest.length - 1]!.ms) return;
  slowest.push({ ms, what: what() });
  slowest.sort((a, b) => b.ms - a.ms);
  slowest.length = Math.min(slowest.length, 5);
}

/** No answer within this long is a hang: the case fails with its input. */
const ANSWER_TIMEOUT_MS = 20_000;

/** One request over the shared keep-alive agent; `body` as bytes or text, sent as given. */
export function send(
  base: string,
  method: string,
  path: string,
  options: { headers?: Record<string, string | string[]>; body?: string | Uint8Array } = {},
): Promise<Answer> {
  const url = new URL(path, base);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        method,
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        headers: options.headers ?? {},
        timeout: ANSWER_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {}
          noteTime(performance.now() - started, () => {
            const b = options.body;
            const body = typeof b === "string" ? b : b ? `<${b.length} bytes>` : "";
            return `${method} ${path} ${body.length} chars ${body.slice(0, 120)} → ${res.statusCode}`;
          });
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on("error", reject);
      },
    );
    req.on("timeout", () =>
      req.destroy(new Error(`no answer to ${method} ${path} in ${ANSWER_TIMEOUT_MS} ms`)),
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** POST with a JSON body; a string is sent as is (so it can be invalid JSON). */
export function postJson(base: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  return send(base, "POST", path, {
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : encode(body as Json),
  });
}

export type WireStyle = "native" | "oip" | "openai";

/**
 * The wire shape a path's errors take (docs/Errors.md "Wire shapes"), by the path as the server
 * sees it ("/v2/models/../x" is "/v2/x"). A path no route matches answers in the native shape,
 * whatever its prefix (the not-found handler is no OIP or OpenAI route).
 */
export function styleOf(path: string): WireStyle {
  const p = new URL(path, "http://x").pathname;
  if (p === "/v1/chat/completions" || p === "/v1/completions" || p === "/v1/embeddings") return "openai";
  if (/^\/v2(\/models\/[^/]+(\/versions\/[^/]+)?(\/ready|\/infer)?)?$/.test(p)) return "oip";
  if (/^\/v2\/repository\/(index|models\/[^/]*\/(load|unload))$/.test(p)) return "oip";
  if (
    /^\/v2\/systemsharedmemory(\/region\/[^/]+\/(status|register|unregister)|\/(status|unregister))$/.test(p)
  )
    return "oip";
  return "native";
}

/**
 * 5xx answers a client can cause and that are allowed: 503 only with an overload code (the
 * request is fine, the server is full), and 504 MP_ERR_DEADLINE_EXCEEDED when the client itself
 * set a deadline (X-Request-Timeout-Ms) too short to meet.
 */
const OVERLOAD_CODES = new Set<string>(["MP_ERR_MODEL_OVERLOADED"]);

export interface CheckOptions {
  /** The request set X-Request-Timeout-Ms: a 504 MP_ERR_DEADLINE_EXCEEDED is the documented answer. */
  clientDeadline?: boolean;
  /** 5xx codes that are this case's documented answer (an upstream's failure, a runner's), beside overload. */
  allowed5xx?: readonly ErrorCode[];
  /** What the case sent, for failure messages. */
  what?: string;
}

/**
 * The properties every answer has: no 5xx the client could cause; an error is JSON in the route's
 * wire shape with a code from the table whose status and retryability are the table's.
 */
export function checkAnswer(res: Answer, style: WireStyle, options: CheckOptions = {}): string | undefined {
  const what = `${options.what ?? ""} → ${res.status} ${res.text.slice(0, 400)}`;
  if (res.status < 400) return undefined;
  assert.ok(res.json !== undefined, `error body is not JSON${what}`);
  const body = res.json as Record<string, any>;
  let code: unknown;
  if (style === "native") {
    assert.equal(typeof body.error, "object", `native error shape${what}`);
    code = body.error.code;
    assert.equal(typeof body.error.message, "string", `native error message${what}`);
    assert.equal(typeof body.error.retryable, "boolean", `native error retryable${what}`);
    if (typeof code === "string" && code in ERRORS)
      assert.equal(
        body.error.retryable,
        ERRORS[code as ErrorCode].retryable,
        `retryable as the table says${what}`,
      );
  } else if (style === "oip") {
    assert.equal(typeof body.error, "string", `OIP error shape${what}`);
    code = body.code;
  } else {
    assert.equal(typeof body.error, "object", `OpenAI error shape${what}`);
    assert.equal(typeof body.error.message, "string", `OpenAI error message${what}`);
    assert.equal(typeof body.error.type, "string", `OpenAI error type${what}`);
    assert.ok(body.error.param === null || typeof body.error.param === "string", `OpenAI error param${what}`);
    code = body.error.code;
  }
  assert.ok(typeof code === "string" && code in ERRORS, `an MP_ERR_* code from the table${what}`);
  assert.equal(res.status, ERRORS[code as ErrorCode].status, `the status the table gives ${code}${what}`);
  if (res.status >= 500) {
    const allowed =
      (res.status === 503 && OVERLOAD_CODES.has(code as string)) ||
      (res.status === 504 && code === "MP_ERR_DEADLINE_EXCEEDED" && options.clientDeadline === true) ||
      (options.allowed5xx?.includes(code as ErrorCode) ?? false);
    assert.ok(allowed, `a 5xx for client input${what}`);
  }
  return code as string;
}

// ---------------------------------------------------------------------------------------------
// The server under test

export interface FuzzServer {
  url: string;
  child: ChildServer;
  models: string;
  dir: string;
}

export const MODEL_NAMES = ["tree", "mlp", "multi", "wide"] as const;

/** The fuzz servers' server.sharedMemory.keyPrefix: objects of other processes stay out of reach. */
export const SHM_PREFIX = "mp-fuzz-";

/** A config with the example models (tensor models always; language models when `llm`). */
export function fuzzConfig(
  models: string,
  dir: string,
  options: {
    llm?: boolean;
    extra?: string[];
    grpc?: boolean;
    server?: string[];
    sharedMemory?: string[];
  } = {},
): string {
  const { llm = false, extra = [], grpc = false, server = [], sharedMemory = [] } = options;
  return [
    // Errors and unexpected failures are still logged; one line per request is not needed here.
    // Shared memory on, for the objects the fuzzers make under this prefix (tensor-routes.test.ts);
    // with `grpc`, the gRPC port too (its address is logged as grpcAddress); then `server`'s entries.
    `server: {${[
      "requestLogging: false",
      `sharedMemory: {${["enabled: true", `keyPrefix: "${SHM_PREFIX}"`, ...sharedMemory].join(", ")}}`,
      ...(grpc ? ["grpcPort: 0"] : []),
      ...server,
    ].join(", ")}}`,
    "limits:",
    "  maxBodyBytes: 1048576",
    "  maxBatchRows: 64",
    "jobs:",
    `  sqlitePath: ${join(dir, "jobs.db")}`,
    `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
    "  concurrency: 2",
    "models:",
    `  - {name: tree, path: ${join(models, "churn-tree.onnx")}, threads: 1}`,
    `  - {name: mlp, path: ${join(models, "segment-mlp.onnx")}, threads: 1}`,
    `  - {name: multi, path: ${join(models, "multi-io.onnx")}, threads: 1}`,
    `  - {name: wide, path: ${join(models, "wide-mlp.onnx")}, threads: 1}`,
    `  - {name: ragged, path: ${writeRaggedModel(join(dir, "ragged.onnx"))}, threads: 1}`,
    ...(llm
      ? [
          "  - name: tiny-llama",
          `    path: ${join(models, "tiny-llama.gguf")}`,
          "    threads: 1",
          "    llm: {contextSize: 512, sequences: 2, maxWaiting: 64}",
          "  - name: tiny-embed",
          "    backend: transformers",
          `    path: ${join(models, "tiny-embed")}`,
          "    threads: 1",
        ]
      : []),
    ...extra,
  ].join("\n");
}

/** /proc/PID/status VmRSS in bytes. */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  assert.ok(m, `no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

// The poller runs in its own thread so that the fuzzer's own work (generating inputs, parsing
// answers) cannot delay a probe's timing: what it measures is the server's answer time.
const POLLER = `
const { parentPort, workerData } = require("node:worker_threads");
const http = require("node:http");
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
let phase = "baseline";
let stop = false;
const probes = { baseline: [], fuzz: [] };
const failures = [];
parentPort.on("message", (m) => {
  if (m === "fuzz") phase = "fuzz";
  if (m === "stop") stop = true;
});
function probe() {
  return new Promise((resolve) => {
    const t = performance.now();
    const req = http.get(workerData.url + "/livez", { agent, timeout: 10000 }, (res) => {
      res.resume();
      res.on("end", () => resolve({ ms: performance.now() - t, status: res.statusCode }));
    });
    req.on("timeout", () => req.destroy(new Error("no answer in 10 s")));
    req.on("error", (err) => resolve({ ms: performance.now() - t, status: 0, error: err.message }));
  });
}
(async () => {
  while (!stop) {
    const p = await probe();
    const list = probes[phase];
    list.push(p.ms);
    if (p.status !== 200) failures.push({ phase, ...p });
    await new Promise((r) => setTimeout(r, 20));
  }
  parentPort.postMessage({ probes, failures });
})();
`;

interface PollResult {
  probes: { baseline: number[]; fuzz: number[] };
  failures: { phase: string; ms: number; status: number; error?: string }[];
}

/** The p-th quantile (0..1) of `values`. */
export function quantile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

/** A predict on the tree and an OIP infer on the mlp: the warm-up of the files that compare tiers. */
export async function warmTree(url: string): Promise<void> {
  await postJson(url, "/v1/models/tree/predict", { rows: [[3, 95, 4, 1, 0, 20]] });
  await postJson(url, "/v2/models/mlp/infer", {
    inputs: [{ name: "features", datatype: "FP32", shape: [1, 4], data: [1, 2, 3, 4] }],
  });
}

/** What two answers to one request share when they are the same: status and code, or status, version and outputs. */
export function essence(res: Answer): unknown {
  const body = res.json as Record<string, any> | undefined;
  if (res.status >= 400) return [res.status, body?.code ?? body?.error?.code];
  return [res.status, body?.model_version, body?.outputs];
}

/** A server's gRPC host:port, from its "listening" log line (grpcAddress). */
function grpcAddressOf(child: ChildServer): string {
  const address = /"grpcAddress":"([^"]+)"/.exec(child.output())?.[1];
  assert.ok(address, `no grpcAddress in the server's log:\n${child.output().slice(-2000)}`);
  return address;
}

/** How far a process's RSS may stay above its start once a fuzz run is over. */
const RSS_GROWTH_BYTES = 150e6;

/** The process's RSS, waiting up to 10 s for it to come back under start + RSS_GROWTH_BYTES. */
async function settledRss(pid: number, start: number): Promise<number> {
  let rss = rssOf(pid);
  const settleUntil = Date.now() + 10_000;
  while (rss > start + RSS_GROWTH_BYTES && Date.now() < settleUntil) {
    await new Promise((r) => setTimeout(r, 500));
    rss = Math.min(rss, rssOf(pid));
  }
  return rss;
}

/**
 * Registers before/after hooks that start a `modelport serve` child with the example models, warm
 * every route once (`warm`), measure RSS and a /livez baseline, and poll /livez while the file's
 * tests fuzz it. Call `fuzzServer.finalCheck()` as the file's last test.
 */
export function useFuzzServer(options: {
  llm?: boolean;
  /** Also listen for gRPC (`server.grpc` is its host:port). */
  grpc?: boolean;
  warm?: (url: string) => Promise<void>;
  /** More config lines (after the models), or a function of the built models' folder giving them. */
  extra?: string[] | ((models: string) => string[]);
  /** More `modelport serve` arguments (after `-c FILE`). */
  args?: string[];
  /** More entries of the config's `server` mapping, as YAML flow entries ("key: value"). */
  server?: string[];
  /** More entries of `server.sharedMemory`, as YAML flow entries. */
  sharedMemory?: string[];
  /**
   * A split deployment: a `--role runner` process with the models, and the server under test a
   * `--role api` process in front of it (`server.runner` is the runner's URL).
   */
  tiers?: boolean;
  /** With `tiers`: the API tier reaches the runner through this; given the runner's URL, it gives the URL to use. */
  runnerProxy?: (runner: string) => Promise<string>;
}) {
  const state = {} as FuzzServer & {
    poller: Worker;
    rssStart: number;
    runnerRssStart: number;
    started: number;
    runner?: ChildServer;
  };
  before(async () => {
    const models = await testModels();
    const dir = mkdtempSync(join(tmpdir(), "modelport-fuzz-"));
    const file = join(dir, "fuzz.yaml");
    const extra = typeof options.extra === "function" ? options.extra(models) : options.extra;
    writeFileSync(file, fuzzConfig(models, dir, { ...options, extra }));
    let tier: string[] = [];
    if (options.tiers) {
      state.runner = await startChild(["-c", file, "--role", "runner", ...(options.args ?? [])]);
      const up = await waitReady(state.runner.url, 120_000);
      assert.equal(up.status, 200, `runner not ready: ${state.runner.output().slice(-3000)}`);
      const via = options.runnerProxy ? await options.runnerProxy(state.runner.url) : state.runner.url;
      tier = ["--role", "api", "--runner", via];
    }
    const child = await startChild(["-c", file, ...tier, ...(options.args ?? [])]);
    const ready = await waitReady(child.url, 120_000);
    assert.equal(
      ready.status,
      200,
      `not ready: ${JSON.stringify(ready.body)}\n${child.output().slice(-3000)}`,
    );
    Object.assign(state, { url: child.url, child, models, dir });
    // Every route once, so first-use allocations (arenas, JIT, parsers) are in the RSS baseline.
    for (let i = 0; i < 3; i++) await options.warm?.(child.url);
    await new Promise((r) => setTimeout(r, 500));
    state.rssStart = rssOf(child.proc.pid!);
    if (state.runner) state.runnerRssStart = rssOf(state.runner.proc.pid!);
    state.poller = new Worker(POLLER, { eval: true, workerData: { url: child.url } });
    // Baseline: 3 s of valid requests (the warm-up set, in a loop), so the baseline probes see the
    // same machine, the same client work and a server as busy as while fuzzing.
    const baselineUntil = performance.now() + 3000;
    while (performance.now() < baselineUntil) await options.warm?.(child.url);
    state.poller.postMessage("fuzz");
    state.started = performance.now();
    process.stdout.write(
      `# fuzz seed ${SEED} (replay with FUZZ_SEED=${SEED}), suite runs ${SUITE_RUNS}` +
        `${process.env.FUZZ_KEEP_LOG ? `, server log kept in ${join(dir, "server.log")}` : ""}\n`,
    );
  });
  after(async () => {
    await state.poller?.terminate();
    if (state.child) {
      // The child's own log is the first thing to read when a property failed.
      if (process.env.FUZZ_KEEP_LOG) writeFileSync(join(state.dir, "server.log"), state.child.output());
      await state.child.stop("SIGKILL");
    }
    await state.runner?.stop("SIGKILL");
    if (state.dir && !process.env.FUZZ_KEEP_LOG) rmSync(state.dir, { recursive: true, force: true });
  });
  const server = {
    get url() {
      return state.url;
    },
    get dir() {
      return state.dir;
    },
    /** The runner's URL (with `tiers`). */
    get runner() {
      assert.ok(state.runner, "no runner: start the server with tiers: true");
      return state.runner.url;
    },
    /** The gRPC listener's host:port, from the child's log (with `grpc`). */
    get grpc() {
      return grpcAddressOf(state.child);
    },
    /** The runner's gRPC listener's host:port (with `tiers` and `grpc`). */
    get runnerGrpc() {
      assert.ok(state.runner, "no runner: start the server with tiers: true");
      return grpcAddressOf(state.runner);
    },
    output: () => state.child.output(),
    /** The file's last test: process up, every probe answered and fast, RSS back near its start. */
    finalCheck() {
      it("the server stayed up, /livez answered throughout and RSS came back near its start", async (t) => {
        const seconds = (performance.now() - state.started) / 1000;
        const cases = Object.values(caseCounts()).reduce((a, b) => a + b, 0);
        for (const s of slowest) t.diagnostic(`slow request ${s.ms.toFixed(1)} ms: ${s.what}`);
        t.diagnostic(`${cases} cases in ${seconds.toFixed(1)} s: ${JSON.stringify(caseCounts())}`);
        assert.equal(
          state.child.proc.exitCode,
          null,
          `the server exited:\n${state.child.output().slice(-3000)}`,
        );
        assert.equal(state.child.proc.signalCode, null, "the server was killed");
        if (state.runner)
          assert.deepEqual(
            [state.runner.proc.exitCode, state.runner.proc.signalCode],
            [null, null],
            `the runner exited:\n${state.runner.output().slice(-3000)}`,
          );
        const result = await new Promise<PollResult>((resolve) => {
          state.poller.once("message", resolve);
          state.poller.postMessage("stop");
        });
        const { baseline, fuzz } = result.probes;
        assert.deepEqual(result.failures, [], "every /livez probe answered 200");
        assert.ok(baseline.length >= 20 && fuzz.length >= 5, `probes: ${baseline.length} + ${fuzz.length}`);
        // The bound. The probes share two busy cores with the fuzzer, the server's work (its
        // worker threads and llama.cpp's included) and other processes, so single probes are
        // delayed by the OS scheduler by tens of ms, and on a shared machine by over 100 ms now
        // and then, whatever the server does. An absolute bar would measure the machine. So the
        // baseline is taken in the same run, seconds before, under the same kind of load (valid
        // requests sent back to back, as the fuzzer sends its cases): it carries the machine's
        // noise. What fuzz input adds must stay small: the 95th percentile of the probes while
        // fuzzing may exceed the baseline's by at most 50 ms. Work that blocks the event loop on
        // some inputs (an unbounded synchronous parse, decode or tokenize) delays every probe that
        // arrives meanwhile, so it moves the p95 once it takes more than 5 % of the time, and any
        // single stall over 1 s fails the worst-probe bar, which scheduler noise does not reach.
        const base95 = quantile(baseline, 0.95);
        const p95 = quantile(fuzz, 0.95);
        const worst = Math.max(...fuzz);
        t.diagnostic(
          `/livez: baseline ${baseline.length} probes, p50 ${quantile(baseline, 0.5).toFixed(1)} ms, p95 ${base95.toFixed(1)} ms, worst ${Math.max(...baseline).toFixed(1)} ms; ` +
            `fuzzing ${fuzz.length} probes, p50 ${quantile(fuzz, 0.5).toFixed(1)} ms, p95 ${p95.toFixed(1)} ms, worst ${worst.toFixed(1)} ms`,
        );
        assert.ok(
          p95 < base95 + 50,
          `/livez p95 ${p95.toFixed(1)} ms while fuzzing ≥ baseline p95 ${base95.toFixed(1)} ms + 50 ms`,
        );
        assert.ok(
          worst < 1000,
          `a /livez probe took ${worst.toFixed(0)} ms: something blocked the event loop`,
        );
        const rssChecks: [string, ChildServer, number][] = [["the server", state.child, state.rssStart]];
        if (state.runner) rssChecks.push(["the runner", state.runner, state.runnerRssStart]);
        for (const [name, proc, start] of rssChecks) {
          const rss = await settledRss(proc.proc.pid!, start);
          t.diagnostic(
            `${name}: RSS ${(start / 1e6).toFixed(0)} MB at start, ${(rss / 1e6).toFixed(0)} MB after`,
          );
          assert.ok(
            rss < start + RSS_GROWTH_BYTES,
            `${name}: RSS ${(rss / 1e6).toFixed(0)} MB after the run, ${(start / 1e6).toFixed(0)} MB at start`,
          );
        }
        const live = await send(state.url, "GET", "/livez");
        assert.equal(live.status, 200);
      });
    },
  };
  return server;
}
