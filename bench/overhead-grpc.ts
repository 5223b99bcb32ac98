// `npm run bench:grpc`: the overhead suite's large-tensor cases (bench/overhead.ts: an image-shaped
// and a detector-shaped model over OIP binary, bench/overhead-models.ts) over gRPC. In each round one
// `modelport serve <model>.onnx --grpc-port P` (default settings) answers both ModelInfer with
// raw_input_contents and the overhead suite's OIP binary HTTP request, and onnxruntime runs the
// model in this process as the baseline (`session.run` in a loop, 1 intra-op thread as modelport's
// default); the three take turns going first. Each is one client sending one request after another
// on one connection (gRPC: one @grpc/grpc-js channel, the message built once from the shipped
// .proto, as the HTTP body is built once); p50 per point and CPU per call of the server and of this
// process (/proc), ratios per round, reported as medians. Every answer is checked against
// onnxruntime's first.
// Usage: node dist/bench/overhead-grpc.js [--rounds N] [--warmup S] [--duration S] [--log-level L]
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { freePort } from "../src/loadgen/serve-child.js";
import { cpuReport, cpuSnapshot } from "./cpu.js";
import {
  CASES,
  encodeRequest,
  feeds,
  inProcess,
  makeInputs,
  openSession,
  sequential,
  summary,
  workloadFor,
} from "./overhead.js";
import { writeOverheadModel } from "./overhead-models.js";
import { machine } from "./report.js";
import { startModelport } from "./servers.js";
import { median, round, Samples } from "./stats.js";

const here = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const repoRoot = path.resolve(here, "../..");
/** The .proto as the build ships it beside the compiled server. */
const PROTO = path.resolve(here, "../src/grpc/inference.proto");

type Case = (typeof CASES)[number];
type Measure = Awaited<ReturnType<typeof sequential>>;
type Values = ReturnType<typeof makeInputs>[number];
type Who = "in-process" | "http-binary" | "grpc";

/** The overhead suite's large-tensor cases over OIP binary: the image and the detector. */
const GRPC_CASES = CASES.filter((c) => c.transport === "oip-binary");

function inferRequest(c: Case, values: Values[]) {
  return {
    model_name: c.model,
    inputs: c.inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    raw_input_contents: values.map((v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength)),
  };
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
 * check it): what is timed is the transport and the server, not protobufjs in the client.
 */
async function sequentialGrpc(address: string, request: object, warmupS: number, durationS: number) {
  const method = definition()["inference.GRPCInferenceService"] as unknown as Record<
    string,
    { requestSerialize(r: object): Buffer; responseDeserialize(b: Buffer): InferResponse }
  >;
  const { requestSerialize, responseDeserialize } = method.ModelInfer!;
  const message = requestSerialize(request);
  // Outputs of a few MB: past grpc-js's 4 MiB default for what a client receives.
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
    "grpc.max_receive_message_length": -1,
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
      new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength)),
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
    },
  });
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
  let turn = 0;
  for (let roundNo = 1; roundNo <= rounds; roundNo++) {
    for (const c of GRPC_CASES) {
      const values = makeInputs(c);
      const session = await openSession(files.get(c.model)!);
      const inputs = feeds(c, values);
      const expected = Array.from((await session.run(inputs))[session.outputNames[0]!]!.data as Float32Array);
      const grpcPort = await freePort();
      const server = await startModelport(modelDir, logLevel, workloadFor(c), {
        flags: ["--grpc-port", String(grpcPort)],
      });
      commands.add(server.command);
      try {
        const order: Who[] = ["in-process", "http-binary", "grpc"];
        for (let k = 0; k < turn % 3; k++) order.push(order.shift()!);
        turn++;
        for (const who of order) {
          let measure: Measure;
          // The server's and this process's CPU over the point (warm-up included, at the same rate).
          const before = cpuSnapshot(server.child.pid);
          if (who === "in-process") measure = await inProcess(session, inputs, warmupS, durationS);
          else if (who === "http-binary")
            measure = await sequential(server.url, encodeRequest(c, values, "modelport"), warmupS, durationS);
          else {
            const r = await sequentialGrpc(
              `127.0.0.1:${grpcPort}`,
              inferRequest(c, values),
              warmupS,
              durationS,
            );
            const worst = worstDifference(r.output, expected);
            if (!(worst <= 1e-4)) throw new Error(`gRPC's answer differs from onnxruntime's by ${worst}`);
            measure = r.measure;
          }
          const cpu = cpuReport(before, cpuSnapshot(server.child.pid), os.cpus().length);
          // % of a core divided by calls per second: CPU ms per call.
          const perCall = (pct: number | null) => (pct === null ? null : round((pct * 10) / measure.rps));
          const serverCpuMs = who === "in-process" ? null : perCall(cpu.serverPct);
          const clientCpuMs = perCall(cpu.benchPct);
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
        await server.child.stop();
        await session.release();
      }
    }
  }

  const rows = GRPC_CASES.map((c) => {
    const p50 = (who: Who) =>
      points.filter((p) => p.case === c.id && p.who === who).map((p) => p.measure.p50);
    const [base, http, viaGrpc] = [p50("in-process"), p50("http-binary"), p50("grpc")];
    const serverCpu = (who: Who) =>
      median(points.filter((p) => p.case === c.id && p.who === who).map((p) => p.serverCpuMs ?? Number.NaN));
    return {
      case: c.id,
      about: c.about,
      inProcess: round(median(base)),
      httpBinary: round(median(http)),
      grpc: round(median(viaGrpc)),
      grpcOverInProcess: round(median(viaGrpc.map((v, i) => v / base[i]!))),
      grpcOverHttp: round(median(viaGrpc.map((v, i) => v / http[i]!))),
      httpOverInProcess: round(median(http.map((v, i) => v / base[i]!))),
      serverCpuMsHttp: round(serverCpu("http-binary")),
      serverCpuMsGrpc: round(serverCpu("grpc")),
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
        `${durationS} s measured per point, one client, sequential; the three take turns going first. ` +
        "p50 in ms; ratios per round, medians shown.",
      "",
      "| case | in-process | HTTP binary | gRPC raw | gRPC / in-process | gRPC / HTTP binary | HTTP binary / in-process | server CPU ms per call, HTTP / gRPC |",
      "|---|--:|--:|--:|--:|--:|--:|--:|",
      ...rows.map(
        (r) =>
          `| ${r.case}: ${r.about} | ${r.inProcess} | ${r.httpBinary} | ${r.grpc} | ${r.grpcOverInProcess} | ${r.grpcOverHttp} | ${r.httpOverInProcess} | ${r.serverCpuMsHttp} / ${r.serverCpuMsGrpc} |`,
      ),
      "",
      `Command: \`npm run bench:grpc -- --rounds ${rounds} --warmup ${warmupS} --duration ${durationS}\`; results: ${path.relative(process.cwd(), out) || out}`,
    ].join("\n"),
  );
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
