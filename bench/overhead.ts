// The overhead suite (`npm run bench:overhead` = --suite overhead): what modelport adds to
// inference where it cannot batch its way ahead. Each case pairs modelport (default settings, a
// fresh `modelport serve <models>/<model>.onnx` per point) with a baseline measured in the same
// round, the two alternating which goes first:
// - the naive server (bench/naive-server.ts) on a small MLP: one row at concurrency 1 (p50), 32
//   rows at concurrency 1 and 64 (requests/s);
// - onnxruntime in this process (`session.run` in a loop, 1 intra-op thread as modelport's
//   default) on large tensors (an image-shaped and a detector-shaped model, over OIP JSON and OIP
//   binary) and on a stateful multi-input model with a scalar input (OIP JSON). The large-tensor
//   models come twice: light (a few ms of inference, so the transport's own cost dominates) and
//   "full", with the arithmetic of the real families (tens of ms, as the issue's measured models).
// The OIP cases on the default runner also measure a bare node:http + onnxruntime OIP server
// (bench/bare-oip-server.ts) in the same round: what the transport costs any server, so that what
// modelport adds beyond it shows apart from what loopback HTTP costs (reported, not judged).
// The `-shm` cases send no tensor bytes at all: inputs and the first output go through shared
// memory regions (--shared-memory, bench/shared-memory-client.ts), as a client on the same host
// would with Triton's extension (reported, not judged).
// Concurrency-1 points use a sequential keep-alive node:http client (sub-millisecond latencies,
// binary bodies); the concurrency-64 point uses the shared autocannon load generator. Models come
// from bench/overhead-models.ts. Ratios are per round, reported as medians.
import { Agent, request } from "node:http";
import path from "node:path";
import { InferenceSession, Tensor } from "onnxruntime-node";
import { Random } from "../examples/build/random.js";
import { runLoad } from "../src/loadgen/load.js";
import { processTreeCpuMs } from "./cpu.js";
import { loop } from "./in-process.js";
import { UsageError } from "./options.js";
import { type OverheadModel, writeOverheadModel } from "./overhead-models.js";
import { type RunningServer, startBareOip, startModelport, startNaive } from "./servers.js";
import { openShmSession } from "./shared-memory-client.js";
import { median, round, Samples } from "./stats.js";
import { type SuiteContext, writeResults } from "./suite.js";
import type { Workload } from "./workload.js";

/** oip-shm: inputs and the first output through registered shared memory regions (bench/shared-memory-client.ts). */
type Transport = "rows" | "oip-json" | "oip-binary" | "oip-shm";

interface InputSpec {
  name: string;
  datatype: "FP32" | "INT64";
  shape: number[];
}

interface Case {
  id: string;
  about: string;
  model: OverheadModel;
  inputs: InputSpec[];
  transport: Transport;
  concurrency: number;
  baseline: "naive" | "in-process";
  /** What is compared: p50 latency (ms) or requests/s. */
  metric: "p50" | "rps";
  /** The issue's bar, as a check of (modelport, baseline) and its wording; none: reported only. */
  bar?: { rule: string; holds(modelport: number, baseline: number): boolean };
  /** `modelport serve` flags beyond the defaults (e.g. the runner's placement). */
  flags?: readonly string[];
  /** Also measure the bare OIP server (bench/bare-oip-server.ts) in each round (OIP cases). */
  bare?: true;
}

type Server = "modelport" | "naive" | "bare";

const MLP_IN: InputSpec[] = [{ name: "features", datatype: "FP32", shape: [1, 30] }];
const MLP32_IN: InputSpec[] = [{ name: "features", datatype: "FP32", shape: [32, 30] }];
const IMAGE_IN: InputSpec[] = [{ name: "x", datatype: "FP32", shape: [1, 3, 48, 320] }];
const DETECT_IN: InputSpec[] = [{ name: "images", datatype: "FP32", shape: [1, 3, 640, 640] }];
const VAD_IN: InputSpec[] = [
  { name: "x", datatype: "FP32", shape: [1, 512] },
  { name: "h", datatype: "FP32", shape: [2, 1, 64] },
  { name: "c", datatype: "FP32", shape: [2, 1, 64] },
  { name: "sr", datatype: "INT64", shape: [] },
];

const largeBinary = {
  rule: "p50 <= in-process + 10% + 2 ms",
  holds: (m: number, b: number) => m <= b * 1.1 + 2,
};

/**
 * The large-tensor cases of one pair of models (`overhead-image<variant>`, `overhead-detect<variant>`):
 * the image over OIP JSON and OIP binary, the detector over OIP binary, each against onnxruntime
 * in this process.
 */
function largeTensorCases(variant: "" | "-full", about: { image: string; detector: string }): Case[] {
  const image = `overhead-image${variant}` as OverheadModel;
  const common = { concurrency: 1, baseline: "in-process", metric: "p50", bare: true } as const;
  return [
    {
      id: `image${variant}-json`,
      about: `${about.image}, OIP JSON`,
      model: image,
      inputs: IMAGE_IN,
      transport: "oip-json",
      ...common,
      bar: { rule: "p50 <= 2x in-process", holds: (m, b) => m <= 2 * b },
    },
    {
      id: `image${variant}-binary`,
      about: "the same over OIP binary tensors",
      model: image,
      inputs: IMAGE_IN,
      transport: "oip-binary",
      ...common,
      bar: largeBinary,
    },
    {
      id: `detect${variant}-binary`,
      about: `${about.detector}, OIP binary`,
      model: `overhead-detect${variant}` as OverheadModel,
      inputs: DETECT_IN,
      transport: "oip-binary",
      ...common,
      bar: largeBinary,
    },
  ];
}

/** The light detector over OIP binary against in-process, for the cases that vary modelport's flags. */
const LIGHT_DETECTOR_BINARY = {
  model: "overhead-detect",
  inputs: DETECT_IN,
  transport: "oip-binary",
  concurrency: 1,
  baseline: "in-process",
  metric: "p50",
} as const;

export const CASES: readonly Case[] = [
  {
    id: "mlp-1row-c1",
    about: "MLP 30-64-64-2, 1 row, concurrency 1",
    model: "overhead-mlp",
    inputs: MLP_IN,
    transport: "rows",
    concurrency: 1,
    baseline: "naive",
    metric: "p50",
    bar: { rule: "p50 <= naive + 0.08 ms", holds: (m, b) => m <= b + 0.08 },
  },
  {
    id: "mlp-32rows-c1",
    about: "MLP, 32 rows per request, concurrency 1",
    model: "overhead-mlp",
    inputs: MLP32_IN,
    transport: "rows",
    concurrency: 1,
    baseline: "naive",
    metric: "rps",
    bar: { rule: "requests/s >= 90% of naive", holds: (m, b) => m >= 0.9 * b },
  },
  {
    id: "mlp-32rows-c64",
    about: "MLP, 32 rows per request, concurrency 64",
    model: "overhead-mlp",
    inputs: MLP32_IN,
    transport: "rows",
    concurrency: 64,
    baseline: "naive",
    metric: "rps",
    bar: { rule: "requests/s >= 110% of naive", holds: (m, b) => m >= 1.1 * b },
  },
  ...largeTensorCases("", {
    image: "image-shaped, 1x3x48x320 in, 1x40x6625 out",
    detector: "detector-shaped, 1x3x640x640 in, 1x84x6400 out",
  }),
  ...largeTensorCases("-full", {
    image: "image-shaped with a text recogniser's arithmetic (~1.9 G multiply-adds)",
    detector: "detector-shaped with a YOLOv8n-sized arithmetic (~3.9 G multiply-adds)",
  }),
  {
    id: "vad-json",
    about: "stateful audio-shaped, 4 inputs (one an INT64 scalar), OIP JSON",
    model: "overhead-vad",
    inputs: VAD_IN,
    transport: "oip-json",
    concurrency: 1,
    baseline: "in-process",
    metric: "p50",
    bare: true,
  },
  ...(["image", "detect", "detect-full"] as const).map(
    (m): Case => ({
      id: `${m}-shm`,
      about: `the ${m === "image" ? "light image" : m === "detect" ? "light detector" : "full detector"} through shared memory regions (--shared-memory; inputs written once, as perf_analyzer does)`,
      model: `overhead-${m}` as OverheadModel,
      inputs: m === "image" ? IMAGE_IN : DETECT_IN,
      transport: "oip-shm",
      concurrency: 1,
      baseline: "in-process",
      metric: "p50",
      flags: ["--shared-memory"],
    }),
  ),
  {
    id: "detect-binary-process",
    about: "the light detector over OIP binary, its runner a child process (--placement process)",
    ...LIGHT_DETECTOR_BINARY,
    flags: ["--placement", "process"],
  },
  {
    id: "detect-binary-inline",
    about:
      "the light detector over OIP binary, computed on the HTTP thread when the model is idle (--inline-max-ms 50)",
    ...LIGHT_DETECTOR_BINARY,
    flags: ["--inline-max-ms", "50"],
  },
];

type Values = Float32Array | BigInt64Array;

/** Seeded inputs for a case: uniform in [0, 1) (features in [-2, 2)), sr = 16000. */
export function makeInputs(c: Case): Values[] {
  const rng = new Random(4242);
  return c.inputs.map((s) => {
    const n = s.shape.reduce((a, b) => a * b, 1);
    if (s.datatype === "INT64") return BigInt64Array.from({ length: n }, () => 16000n);
    const lo = s.name === "features" ? -2 : 0;
    return Float32Array.from({ length: n }, () => rng.uniform(lo, lo === 0 ? 1 : 2));
  });
}

interface Request {
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

export function encodeRequest(c: Case, values: Values[], kind: Server): Request {
  const numbers = (v: Values) => Array.from(v as ArrayLike<number | bigint>, Number);
  if (c.transport === "rows") {
    const [spec, data] = [c.inputs[0]!, numbers(values[0]!)];
    const width = spec.shape[1]!;
    const rows = Array.from({ length: spec.shape[0]! }, (_, r) => data.slice(r * width, (r + 1) * width));
    const path = kind === "naive" ? "/" : `/v1/models/${c.model}/predict`;
    return {
      path,
      headers: { "content-type": "application/json" },
      body: Buffer.from(JSON.stringify({ rows })),
    };
  }
  const path = `/v2/models/${c.model}/infer`;
  if (c.transport === "oip-json") {
    const inputs = c.inputs.map((s, i) => ({ ...s, data: numbers(values[i]!) }));
    return {
      path,
      headers: { "content-type": "application/json" },
      body: Buffer.from(JSON.stringify({ inputs })),
    };
  }
  const header = Buffer.from(
    JSON.stringify({
      inputs: c.inputs.map((s, i) => ({ ...s, parameters: { binary_data_size: values[i]!.byteLength } })),
      parameters: { binary_data_output: true },
    }),
  );
  const raw = values.map((v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength));
  return {
    path,
    headers: {
      "content-type": "application/octet-stream",
      "inference-header-content-length": String(header.length),
    },
    body: Buffer.concat([header, ...raw]),
  };
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** POSTs `req` to `base` on `agent`; the answer whatever its status. */
export function send(agent: Agent, base: string, req: Request): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const r = request(
      `${base}${req.path}`,
      { method: "POST", agent, headers: { ...req.headers, "content-length": String(req.body.length) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on("error", reject);
      },
    );
    r.on("error", reject);
    r.end(req.body);
  });
}

interface Measure {
  p50: number;
  p99: number;
  rps: number;
  requests: number;
  /**
   * CPU ms a request of the server process, all its threads (model threads included), and of its
   * runner processes, from /proc over the measured requests; sequential points on Linux only.
   */
  serverCpuMs?: number;
}

export function summary(samples: Samples, seconds: number): Measure {
  const [p50, p99] = samples.percentiles([50, 99]) as [number, number];
  return { p50: round(p50), p99: round(p99), rps: round(samples.count / seconds), requests: samples.count };
}

/**
 * Requests one after another on one keep-alive connection; every answer must be a 200. With
 * `serverPid`, the server's CPU a request is measured too.
 */
export async function sequential(
  base: string,
  req: Request,
  warmupS: number,
  durationS: number,
  serverPid?: number,
): Promise<Measure> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const loop = async (ms: number, samples?: Samples) => {
      const start = performance.now();
      let now = start;
      while (now < start + ms) {
        const t0 = performance.now();
        const a = await send(agent, base, req);
        now = performance.now();
        if (a.status !== 200)
          throw new Error(`${base}${req.path} answered ${a.status}: ${a.body.toString().slice(0, 300)}`);
        samples?.add(now - t0);
      }
      return (now - start) / 1000;
    };
    await loop(warmupS * 1000);
    const samples = new Samples();
    const before = serverPid === undefined ? null : processTreeCpuMs(serverPid);
    const measure = summary(samples, await loop(durationS * 1000, samples));
    const after = serverPid === undefined ? null : processTreeCpuMs(serverPid);
    if (before === null || after === null) return measure;
    return { ...measure, serverCpuMs: round((after - before) / samples.count) };
  } finally {
    agent.destroy();
  }
}

/** The first output of an answer, flat (JSON rows, OIP JSON or OIP binary). */
function firstOutput(c: Case, a: Answer, kind: Server): number[] {
  if (c.transport === "oip-binary") {
    const headerLength = Number(a.headers["inference-header-content-length"]);
    const header = JSON.parse(a.body.subarray(0, headerLength).toString()) as {
      outputs: { parameters?: { binary_data_size?: number } }[];
    };
    const size = header.outputs[0]!.parameters!.binary_data_size!;
    const raw = a.body.subarray(headerLength, headerLength + size);
    return Array.from(new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + size)));
  }
  const body = JSON.parse(a.body.toString()) as Record<string, unknown>;
  if (c.transport === "oip-json") return (body.outputs as { data: number[] }[])[0]!.data;
  const outputs = (kind === "naive" ? body : body.outputs) as Record<string, unknown[]>;
  return (Object.values(outputs)[0] as unknown[]).flat(Number.POSITIVE_INFINITY) as number[];
}

/** onnxruntime in this process with modelport's default: one intra-op thread. */
export async function openSession(file: string): Promise<InferenceSession> {
  return InferenceSession.create(file, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
  });
}

export function feeds(c: Case, values: Values[]): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  c.inputs.forEach((s, i) => {
    out[s.name] = new Tensor(s.datatype === "FP32" ? "float32" : "int64", values[i]!, s.shape);
  });
  return out;
}

/** `session.run` in a loop: warm-up, then p50/p99 of every call. */
export async function inProcess(
  session: InferenceSession,
  f: Record<string, Tensor>,
  warmupS: number,
  durationS: number,
) {
  await loop(session, f, warmupS * 1000);
  const samples = new Samples();
  const { seconds } = await loop(session, f, durationS * 1000, samples);
  return summary(samples, seconds);
}

interface Point {
  case: string;
  round: number;
  server: Server | "in-process";
  measure: Measure;
}

/** The case as the shared server launcher describes a workload. */
export function workloadFor(c: Case): Workload {
  return {
    modelName: c.model,
    modelFile: `${c.model}.onnx`,
    inputName: c.inputs[0]!.name,
    row: [],
    body: "",
    description: c.about,
  };
}

async function measureServer(
  ctx: SuiteContext,
  c: Case,
  kind: Server,
  values: Values[],
  expected: { name: string; values: number[] },
): Promise<{ measure: Measure; command: string }> {
  const w = workloadFor(c);
  const server: RunningServer =
    kind === "naive"
      ? await startNaive(ctx.modelDir, w, ctx.opts.serverCpus)
      : kind === "bare"
        ? await startBareOip(ctx.modelDir, w, ctx.opts.serverCpus)
        : await startModelport(ctx.modelDir, ctx.opts.logLevel, w, {
            flags: c.flags ?? [],
            cpus: ctx.opts.serverCpus,
          });
  const shm =
    c.transport === "oip-shm"
      ? await openShmSession(
          server.url,
          c.model,
          `modelport_bench-${process.pid}`,
          c.inputs.map((s, i) => ({ ...s, data: values[i]! })),
          { name: expected.name, byteSize: expected.values.length * 4 },
        )
      : undefined;
  try {
    const req: Request = shm ? shm.http : encodeRequest(c, values, kind);
    const agent = new Agent({ keepAlive: false });
    const answer = await send(agent, server.url, req);
    agent.destroy();
    if (answer.status !== 200)
      throw new Error(`${kind} answered ${answer.status}: ${answer.body.toString().slice(0, 500)}`);
    const got = shm ? Array.from(shm.output()) : firstOutput(c, answer, kind);
    const worst = got.reduce(
      (m, v, i) => Math.max(m, Math.abs(v - expected.values[i]!)),
      got.length === expected.values.length ? 0 : Infinity,
    );
    if (!(worst <= 1e-4)) throw new Error(`${kind}'s answer differs from onnxruntime's by ${worst}`);
    const { warmupS, durationS } = ctx.opts;
    let measure: Measure;
    if (c.concurrency === 1)
      measure = await sequential(server.url, req, warmupS, durationS, server.child.pid);
    else {
      const r = await runLoad(
        { url: `${server.url}${req.path}`, method: "POST", headers: req.headers, body: req.body.toString() },
        { concurrency: c.concurrency, durationS, warmupS, timeoutS: 30 },
      );
      if (r.non2xx + r.errors + r.timeouts > 0)
        throw new Error(`${kind}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
      measure = {
        p50: round(r.latencyMs.p50 ?? Number.NaN),
        p99: round(r.latencyMs.p99 ?? Number.NaN),
        rps: r.rps,
        requests: r.requests,
      };
    }
    return { measure, command: server.command };
  } finally {
    await shm?.remove();
    await server.child.stop();
  }
}

/** The cases `ids` names (all when null). */
export function selectCases(ids: readonly string[] | null): readonly Case[] {
  if (ids === null) return CASES;
  const unknown = ids.filter((id) => !CASES.some((c) => c.id === id));
  if (unknown.length > 0)
    throw new UsageError(
      `--cases: no case ${unknown.join(", ")}; the cases are ${CASES.map((c) => c.id).join(", ")}`,
    );
  return CASES.filter((c) => ids.includes(c.id));
}

export async function runOverhead(ctx: SuiteContext, commandLine: string): Promise<string> {
  const { opts, log } = ctx;
  const points: Point[] = [];
  const commands = new Map<string, string>();
  const cases = selectCases(opts.cases);
  const files = new Map<OverheadModel, string>();
  for (const c of cases)
    if (!files.has(c.model)) files.set(c.model, writeOverheadModel(ctx.modelDir, c.model));

  let turn = 0;
  for (let roundNo = 1; roundNo <= opts.rounds; roundNo++) {
    for (const c of cases) {
      const values = makeInputs(c);
      const session = await openSession(files.get(c.model)!);
      const f = feeds(c, values);
      const name = session.outputNames[0]!;
      const expected = { name, values: Array.from((await session.run(f))[name]!.data as Float32Array) };
      const servers = ["modelport", c.baseline, ...(c.bare ? (["bare"] as const) : [])] as const;
      const order = turn++ % 2 === 0 ? servers : [...servers].reverse();
      for (const who of order) {
        let measure: Measure;
        if (who === "in-process") measure = await inProcess(session, f, opts.warmupS, opts.durationS);
        else {
          const r = await measureServer(ctx, c, who, values, expected);
          measure = r.measure;
          commands.set(`${who} ${c.model}`, r.command);
        }
        points.push({ case: c.id, round: roundNo, server: who, measure });
        log(
          `  round ${roundNo} ${c.id.padEnd(15)} ${who.padEnd(10)} p50 ${measure.p50} ms, p99 ${measure.p99} ms, ${measure.rps} req/s${measure.serverCpuMs === undefined ? "" : `, server CPU ${measure.serverCpuMs} ms a request`}`,
        );
      }
      await session.release();
    }
  }

  const rows = cases.map((c) => {
    const pick = (who: string) =>
      points.filter((p) => p.case === c.id && p.server === who).map((p) => p.measure[c.metric]);
    const m = pick("modelport");
    const b = pick(c.baseline);
    const ratios = m.map((v, i) => v / b[i]!);
    const [mm, bb] = [median(m), median(b)];
    const bare = pick("bare");
    const overBare = bare.map((v, i) => m[i]! / v);
    return {
      case: c.id,
      about: c.about,
      metric: c.metric,
      baseline: c.baseline,
      modelport: round(mm),
      baselineValue: round(bb),
      ratio: round(median(ratios)),
      perRound: ratios.map(round),
      bare: bare.length > 0 ? round(median(bare)) : null,
      overBare: bare.length > 0 ? round(median(overBare)) : null,
      overBarePerRound: overBare.map(round),
      bar: c.bar?.rule ?? null,
      holds: c.bar ? c.bar.holds(mm, bb) : null,
    };
  });

  const header =
    "| case | measure | baseline | modelport | baseline value | ratio (rounds) | bar | verdict | bare OIP server | modelport / bare (rounds) |";
  const table = [
    header,
    "|---|---|---|--:|--:|--:|---|---|--:|--:|",
    ...rows.map(
      (r) =>
        `| ${r.case}: ${r.about} | ${r.metric === "p50" ? "p50 ms" : "req/s"} | ${r.baseline} | ${r.modelport} | ${r.baselineValue} | ${r.ratio} (${r.perRound.join(", ")}) | ${r.bar ?? "-"} | ${r.holds === null ? "-" : r.holds ? "holds" : "missed"} | ${r.bare ?? "-"} | ${r.overBare === null ? "-" : `${r.overBare} (${r.overBarePerRound.join(", ")})`} |`,
    ),
  ].join("\n");
  const out = writeResults(ctx, "overhead", {
    date: ctx.date,
    machine: ctx.machine,
    source: ctx.source,
    command: commandLine,
    options: opts,
    points,
    rows,
    commands: Object.fromEntries(commands),
  });
  return [
    "",
    `### Overhead suite, ${ctx.date.slice(0, 10)}`,
    "",
    `Machine: ${ctx.machine.cpuModel}, ${ctx.machine.cpus} CPUs, Node ${ctx.machine.node}. ${opts.rounds} round(s), ` +
      `${opts.warmupS} s warm-up and ${opts.durationS} s measured per point; modelport and its baselines alternate. ` +
      "Ratios are modelport / baseline per round, medians shown; the bare OIP server (bench/bare-oip-server.ts: node:http and onnxruntime on its main thread) is measured beside the OIP cases in the same rounds, not judged.",
    "",
    table,
    "",
    `Command: \`${commandLine}\`; results: ${path.relative(process.cwd(), out) || out}`,
    "",
  ].join("\n");
}
