// `npm run bench:grpc`: the overhead suite's large-tensor cases (bench/overhead.ts: an image-shaped
// and a detector-shaped model over OIP binary, bench/overhead-models.ts) over gRPC. In each round one
// `modelport serve <model>.onnx --grpc-port P --shared-memory` (default settings otherwise) answers
// ModelInfer with raw_input_contents, the overhead suite's OIP binary HTTP request, and both again
// with the tensors in shared memory regions (Triton's system shared-memory extension: inputs
// written once and the output region read after the point, as perf_analyzer runs it; the regions
// are registered over HTTP, the registry is the server's, not a port's), and onnxruntime runs the
// model in this process as the baseline (`session.run` in a loop, 1 intra-op thread as modelport's
// default); they take turns going first. Each is one client sending one request after another on
// one connection. gRPC is called by two clients: @grpc/grpc-js in this process (one channel, the
// message built once from the shipped .proto, as the HTTP body is built once), and, where Debian's
// python3-grpcio and python3-grpc-tools are installed, Python's grpcio (gRPC's C core, the client
// tritonclient and KServe's Python SDK use) with stubs generated from the same .proto, the message
// built once (raw contents only). p50 per point and CPU per call of the server and of this process
// (/proc), ratios per round, reported as medians. Every answer is checked against onnxruntime's.
// Usage: node dist/bench/overhead-grpc.js [--rounds N] [--warmup S] [--duration S] [--log-level L]
//        [--cases LIST] (the overhead suite's OIP binary case ids; default all of them)
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { freePort } from "../src/loadgen/serve-child.js";
import { cpuReport, cpuSnapshot } from "./cpu.js";
import {
  type CASES,
  encodeRequest,
  feeds,
  inProcess,
  makeInputs,
  openSession,
  selectCases,
  sequential,
  summary,
  workloadFor,
} from "./overhead.js";
import { writeOverheadModel } from "./overhead-models.js";
import { machine } from "./report.js";
import { startModelport } from "./servers.js";
import { openShmSession, type ShmSession, type ShmTensorRef } from "./shared-memory-client.js";
import { median, round, Samples } from "./stats.js";

const here = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const repoRoot = path.resolve(here, "../..");
/** The .proto as the build ships it beside the compiled server. */
const PROTO = path.resolve(here, "../src/grpc/inference.proto");

type Case = (typeof CASES)[number];
type Measure = Awaited<ReturnType<typeof sequential>>;
type Values = ReturnType<typeof makeInputs>[number];
type Who = "in-process" | "http-binary" | "http-shm" | "grpc" | "grpc-shm" | "grpc-python";

function inferRequest(c: Case, values: Values[]) {
  return {
    model_name: c.model,
    inputs: c.inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    raw_input_contents: values.map((v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength)),
  };
}

/** OIP JSON parameters as gRPC's InferParameter messages (region references hold strings and integers). */
function grpcParameters(p: ShmTensorRef["parameters"]) {
  return Object.fromEntries(
    Object.entries(p).map(([k, v]) => [
      k,
      typeof v === "string" ? { string_param: v } : { int64_param: String(v) },
    ]),
  );
}

/** The shared-memory session's request as a ModelInfer message: regions by parameters, no raw contents. */
function shmInferRequest(c: Case, shm: ShmSession) {
  const ref = ({ parameters, ...t }: ShmTensorRef) => ({ ...t, parameters: grpcParameters(parameters) });
  return { model_name: c.model, inputs: shm.request.inputs.map(ref), outputs: shm.request.outputs.map(ref) };
}

interface InferResponse {
  outputs: { name: string; datatype: string }[];
  raw_output_contents: Buffer[];
}

const definition = () => loadSync(PROTO, { keepCase: true, longs: String, defaults: true });
const MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer";

/**
 * ModelInfer calls one after another on one channel. The message is serialized once, as the HTTP
 * point sends one prebuilt body, and answers are taken as bytes (decoded only the first time, to
 * check it): what is timed is the transport and the server, not protobufjs in the client. The
 * first output is read from the first answer, or by `shmOutput` when it is written to a region.
 */
async function sequentialGrpc(
  address: string,
  request: object,
  warmupS: number,
  durationS: number,
  shmOutput?: () => Float32Array,
) {
  const method = definition()["inference.GRPCInferenceService"] as unknown as Record<
    string,
    { requestSerialize(r: object): Buffer; responseDeserialize(b: Buffer): InferResponse }
  >;
  const { requestSerialize, responseDeserialize } = method.ModelInfer!;
  const message = requestSerialize(request);
  // Outputs of a few MB: past grpc-js's 4 MiB default for what a client receives, and far past its
  // 64 KiB default receive window, which would make the answer wait on a WINDOW_UPDATE every 64 KiB
  // (docs/API.md#grpc advises grpc-js clients to set the window).
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
    "grpc.max_receive_message_length": -1,
    "grpc-node.flow_control_window": 16 * 1024 * 1024,
  });
  const identity = (b: Buffer) => b;
  const call = () =>
    new Promise<Buffer>((resolve, reject) =>
      client.makeUnaryRequest(MODEL_INFER, identity, identity, message, (err, res) =>
        err ? reject(err) : resolve(res!),
      ),
    );
  try {
    const first = responseDeserialize(await call());
    const raw = first.raw_output_contents[0]!;
    const output = Array.from(
      shmOutput?.() ?? new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength)),
    );
    const run = async (ms: number, samples?: Samples) => {
      const start = performance.now();
      let now = start;
      while (now < start + ms) {
        const t0 = performance.now();
        await call();
        now = performance.now();
        samples?.add(now - t0);
      }
      return (now - start) / 1000;
    };
    await run(warmupS * 1000);
    const samples = new Samples();
    return { measure: summary(samples, await run(durationS * 1000, samples)), output };
  } finally {
    client.close();
  }
}

const PYTHON = "/usr/bin/python3";

/** Python stubs generated from the shipped .proto into a new folder, or why there are none. */
function pythonStubs(): string | { skipped: string } {
  const available =
    existsSync(PYTHON) &&
    spawnSync(PYTHON, ["-c", "import grpc, grpc_tools"], { encoding: "utf8" }).status === 0;
  if (!available) return { skipped: "python3-grpcio and python3-grpc-tools are not installed" };
  const dir = mkdtempSync(path.join(tmpdir(), "modelport-bench-grpc-py-"));
  const gen = spawnSync(
    PYTHON,
    [
      "-m",
      "grpc_tools.protoc",
      `-I${path.dirname(PROTO)}`,
      `--python_out=${dir}`,
      `--grpc_python_out=${dir}`,
      PROTO,
    ],
    { encoding: "utf8" },
  );
  if (gen.status !== 0) throw new Error(`grpc_tools.protoc failed: ${gen.stderr}`);
  // argv: address, request JSON (inputs without data), raw input files, warm-up s, duration s, output file.
  writeFileSync(
    path.join(dir, "client.py"),
    `import json, sys, time
import grpc
import inference_pb2 as pb, inference_pb2_grpc as rpc
address, spec, files, warmup, duration, out = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
req = pb.ModelInferRequest(model_name=spec["model_name"])
for i in spec["inputs"]:
    t = req.inputs.add(); t.name = i["name"]; t.datatype = i["datatype"]; t.shape.extend(i["shape"])
for f in files:
    req.raw_input_contents.append(open(f, "rb").read())
channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)])
stub = rpc.GRPCInferenceServiceStub(channel)
open(out, "wb").write(stub.ModelInfer(req, timeout=60).raw_output_contents[0])
def run(seconds, samples):
    start = time.perf_counter(); now = start
    while now < start + seconds:
        t0 = time.perf_counter(); stub.ModelInfer(req, timeout=60); now = time.perf_counter()
        if samples is not None: samples.append((now - t0) * 1000)
    return now - start
run(warmup, None)
samples = []
seconds = run(duration, samples)
print(json.dumps({"seconds": seconds, "samples": samples}))
`,
  );
  return dir;
}

/** The same calls from Python's grpcio (a child process), its first answer's first output as floats. */
async function sequentialPython(
  stubs: string,
  address: string,
  c: Case,
  values: Values[],
  warmupS: number,
  durationS: number,
) {
  const files = values.map((v, i) => {
    const f = path.join(stubs, `input-${c.model}-${i}.bin`);
    writeFileSync(f, Buffer.from(v.buffer, v.byteOffset, v.byteLength));
    return f;
  });
  const out = path.join(stubs, "output.bin");
  const spec = {
    model_name: c.model,
    inputs: c.inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
  };
  const child = spawn(
    PYTHON,
    [
      path.join(stubs, "client.py"),
      address,
      JSON.stringify(spec),
      JSON.stringify(files),
      String(warmupS),
      String(durationS),
      out,
    ],
    { cwd: stubs },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  if (code !== 0) throw new Error(`the Python gRPC client failed (${code}): ${stderr}`);
  const r = JSON.parse(stdout) as { seconds: number; samples: number[] };
  const samples = new Samples();
  for (const ms of r.samples) samples.add(ms);
  const raw = readFileSync(out);
  const output = Array.from(
    new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength)),
  );
  return { measure: summary(samples, r.seconds), output };
}

function worstDifference(got: readonly number[], want: readonly number[]): number {
  if (got.length !== want.length) return Number.POSITIVE_INFINITY;
  return got.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i]!)), 0);
}

async function main(): Promise<void> {
  const { values: flags } = parseArgs({
    options: {
      rounds: { type: "string", default: "3" },
      warmup: { type: "string", default: "2" },
      duration: { type: "string", default: "5" },
      "log-level": { type: "string", default: "info" },
      cases: { type: "string" },
    },
  });
  // The overhead suite's large-tensor cases over OIP binary, the image and the detector, with
  // modelport's default runner.
  const GRPC_CASES = selectCases(flags.cases?.split(",").map((c) => c.trim()) ?? null).filter(
    (c) => c.transport === "oip-binary" && !c.flags,
  );
  const rounds = Number(flags.rounds);
  const warmupS = Number(flags.warmup);
  const durationS = Number(flags.duration);
  const logLevel = flags["log-level"]!;
  const modelDir = mkdtempSync(path.join(tmpdir(), "modelport-bench-grpc-"));
  const files = new Map(GRPC_CASES.map((c) => [c.model, writeOverheadModel(modelDir, c.model)]));
  const points: {
    case: string;
    round: number;
    who: Who;
    measure: Measure;
    serverCpuMs: number | null;
    clientCpuMs: number | null;
    otherPct: number | null;
  }[] = [];
  const commands = new Set<string>();
  const stubs = pythonStubs();
  if (typeof stubs !== "string") console.log(`gRPC from Python skipped: ${stubs.skipped}`);
  const whos: Who[] = [
    "in-process",
    "http-binary",
    "http-shm",
    "grpc",
    "grpc-shm",
    ...(typeof stubs === "string" ? (["grpc-python"] as const) : []),
  ];
  let turn = 0;
  for (let roundNo = 1; roundNo <= rounds; roundNo++) {
    for (const c of GRPC_CASES) {
      const values = makeInputs(c);
      const session = await openSession(files.get(c.model)!);
      const inputs = feeds(c, values);
      const outputName = session.outputNames[0]!;
      const expected = Array.from((await session.run(inputs))[outputName]!.data as Float32Array);
      const grpcPort = await freePort();
      const server = await startModelport(modelDir, logLevel, workloadFor(c), {
        flags: ["--grpc-port", String(grpcPort), "--shared-memory"],
      });
      commands.add(server.command);
      let shm: ShmSession | undefined;
      try {
        shm = await openShmSession(
          server.url,
          c.model,
          `modelport_bench-grpc-${process.pid}`,
          c.inputs.map((s, i) => ({ ...s, data: values[i]! })),
          { name: outputName, byteSize: expected.length * 4 },
        );
        const check = (who: Who, output: ArrayLike<number>) => {
          const worst = worstDifference(Array.from(output), expected);
          if (!(worst <= 1e-4)) throw new Error(`${who}'s answer differs from onnxruntime's by ${worst}`);
        };
        const order = [...whos];
        for (let k = 0; k < turn % order.length; k++) order.push(order.shift()!);
        turn++;
        for (const who of order) {
          let measure: Measure;
          // The server's and this process's CPU over the point (warm-up included, at the same rate).
          const before = cpuSnapshot(server.child.pid);
          // A region still holding an earlier point's answer must not pass this point's check.
          if (who.endsWith("-shm")) shm.clearOutput();
          if (who === "in-process") measure = await inProcess(session, inputs, warmupS, durationS);
          else if (who === "http-binary")
            measure = await sequential(server.url, encodeRequest(c, values, "modelport"), warmupS, durationS);
          else if (who === "http-shm") {
            measure = await sequential(server.url, shm.http, warmupS, durationS);
            check(who, shm.output());
          } else {
            const address = `127.0.0.1:${grpcPort}`;
            const r =
              who === "grpc"
                ? await sequentialGrpc(address, inferRequest(c, values), warmupS, durationS)
                : who === "grpc-shm"
                  ? await sequentialGrpc(address, shmInferRequest(c, shm), warmupS, durationS, shm.output)
                  : await sequentialPython(stubs as string, address, c, values, warmupS, durationS);
            check(who, r.output);
            measure = r.measure;
          }
          const cpu = cpuReport(before, cpuSnapshot(server.child.pid), os.cpus().length);
          // % of a core divided by calls per second: CPU ms per call.
          const perCall = (pct: number | null) => (pct === null ? null : round((pct * 10) / measure.rps));
          const serverCpuMs = who === "in-process" ? null : perCall(cpu.serverPct);
          // The Python client is another process: its CPU is not this process's.
          const clientCpuMs = who === "grpc-python" ? null : perCall(cpu.benchPct);
          points.push({
            case: c.id,
            round: roundNo,
            who,
            measure,
            serverCpuMs,
            clientCpuMs,
            otherPct: cpu.otherPct,
          });
          console.log(
            `  round ${roundNo} ${c.id.padEnd(14)} ${who.padEnd(11)} p50 ${measure.p50} ms, p99 ${measure.p99} ms, ` +
              `${measure.rps} req/s; CPU ms per call: server ${serverCpuMs ?? "-"}, client ${clientCpuMs}; ` +
              `other load ${cpu.otherPct ?? "-"} % of a core`,
          );
        }
      } finally {
        await shm?.remove();
        await server.child.stop();
        await session.release();
      }
    }
  }

  const rows = GRPC_CASES.map((c) => {
    const p50 = (who: Who) =>
      points.filter((p) => p.case === c.id && p.who === who).map((p) => p.measure.p50);
    const [base, http, httpShm, viaGrpc, grpcShm, viaPython] = [
      p50("in-process"),
      p50("http-binary"),
      p50("http-shm"),
      p50("grpc"),
      p50("grpc-shm"),
      p50("grpc-python"),
    ];
    const overBase = (v: number[]) => round(median(v.map((x, i) => x / base[i]!)));
    const verdict = (label: string, v: number[]) =>
      `${label} ${c.bar!.holds(median(v), median(base)) ? "holds" : "missed"}`;
    const serverCpu = (who: Who) =>
      median(points.filter((p) => p.case === c.id && p.who === who).map((p) => p.serverCpuMs ?? Number.NaN));
    return {
      case: c.id,
      about: c.about,
      inProcess: round(median(base)),
      httpBinary: round(median(http)),
      httpShm: round(median(httpShm)),
      grpc: round(median(viaGrpc)),
      grpcShm: round(median(grpcShm)),
      grpcOverInProcess: overBase(viaGrpc),
      grpcOverHttp: round(median(viaGrpc.map((v, i) => v / http[i]!))),
      httpOverInProcess: overBase(http),
      httpShmOverInProcess: overBase(httpShm),
      grpcShmOverInProcess: overBase(grpcShm),
      serverCpuMsHttp: round(serverCpu("http-binary")),
      serverCpuMsHttpShm: round(serverCpu("http-shm")),
      serverCpuMsGrpc: round(serverCpu("grpc")),
      serverCpuMsGrpcShm: round(serverCpu("grpc-shm")),
      grpcPython: viaPython.length > 0 ? round(median(viaPython)) : null,
      grpcPythonOverInProcess: viaPython.length > 0 ? overBase(viaPython) : null,
      serverCpuMsGrpcPython: viaPython.length > 0 ? round(serverCpu("grpc-python")) : null,
      bar: c.bar
        ? `${c.bar.rule}: ${[
            verdict("HTTP", http),
            verdict("HTTP shm", httpShm),
            verdict("gRPC", viaGrpc),
            verdict("gRPC shm", grpcShm),
            ...(viaPython.length > 0 ? [verdict("gRPC from Python", viaPython)] : []),
          ].join(", ")}`
        : "",
    };
  });
  const m = machine();
  const date = new Date().toISOString();
  const outDir = path.join(repoRoot, "bench/results");
  mkdirSync(outDir, { recursive: true });
  const out = path.join(outDir, `overhead-grpc-${date.replace(/:/g, "-")}.json`);
  const options = { rounds, warmupS, durationS, logLevel };
  writeFileSync(
    out,
    `${JSON.stringify({ date, machine: m, options, points, rows, commands: [...commands] }, null, 2)}\n`,
  );
  console.log(
    [
      "",
      `### Overhead over gRPC, ${date.slice(0, 10)}`,
      "",
      `Machine: ${m.cpuModel}, ${m.cpus} CPUs, Node ${m.node}. ${rounds} round(s), ${warmupS} s warm-up and ` +
        `${durationS} s measured per point, one client, sequential; they take turns going first. ` +
        "p50 in ms, with its ratio to in-process (per round, medians shown). gRPC (grpc-js): @grpc/grpc-js in the bench process; " +
        "gRPC (Python): grpcio, a child process; shm: the tensors in shared memory regions written once (--shared-memory), the request naming them.",
      "",
      "| case | in-process | HTTP binary | HTTP shm | gRPC (grpc-js) | gRPC shm (grpc-js) | gRPC (Python) | server CPU ms per call, HTTP / HTTP shm / grpc-js / grpc-js shm / Python | bar |",
      "|---|--:|--:|--:|--:|--:|--:|--:|---|",
      ...rows.map(
        (r) =>
          `| ${r.case}: ${r.about} | ${r.inProcess} | ${r.httpBinary} (${r.httpOverInProcess}) | ${r.httpShm} (${r.httpShmOverInProcess}) | ${r.grpc} (${r.grpcOverInProcess}) | ${r.grpcShm} (${r.grpcShmOverInProcess}) | ${r.grpcPython === null ? "-" : `${r.grpcPython} (${r.grpcPythonOverInProcess})`} | ${r.serverCpuMsHttp} / ${r.serverCpuMsHttpShm} / ${r.serverCpuMsGrpc} / ${r.serverCpuMsGrpcShm} / ${r.serverCpuMsGrpcPython ?? "-"} | ${r.bar} |`,
      ),
      "",
      `Command: \`npm run bench:grpc -- --rounds ${rounds} --warmup ${warmupS} --duration ${durationS}${flags.cases ? ` --cases ${flags.cases}` : ""}\`; results: ${path.relative(process.cwd(), out) || out}`,
    ].join("\n"),
  );
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
