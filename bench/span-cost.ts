// `npm run bench:span-cost`: what tracing costs per request in this process, without a server:
// (1) the serving thread's work for the spans of one single-row predict at concurrency: a server
// span with the HTTP attributes, the decode/queue/encode stages as duration attributes, status and
// model at the end, and per 16 requests a modelport.batch span linking them with its
// modelport.infer child (the shape `bench:tracing` serves), through spans.ts with the real span
// factory, processor and export worker, timed in a loop; (2) the export worker's CPU per batch of
// 512 spans' bytes sent to an OTLP/HTTP receiver that only acknowledges. Both run in one process
// on a machine that may be busy, so they are medians of rounds; compare builds by running this in
// each, one after the other.
// Usage: node dist/bench/span-cost.js [--rounds N] [--requests N] [--batches N]
import http from "node:http";
import { parseArgs } from "node:util";
import { median, round } from "./stats.js";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    requests: { type: "string", default: "100000" },
    batches: { type: "string", default: "100" },
  },
});
const rounds = Number(values.rounds);
const requests = Number(values.requests);
const batches = Number(values.batches);

const receiver = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const { port } = receiver.address() as { port: number };
process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${port}`;
process.env.OTEL_TRACES_SAMPLER = "always_on";

const { startTracing, stopTracing } = await import("../src/telemetry/tracing.js");
const { ATTR, KIND, parentOf, SPAN, stage, startSpan } = await import("../src/telemetry/spans.js");
const { ExportWorker } = await import("../src/telemetry/worker-exporter.js");
await startTracing();

type Parent = ReturnType<typeof parentOf>;
interface Request {
  span: ReturnType<typeof startSpan>;
  parent: Parent;
  at: number;
}

function begin(i: number): Request {
  const span = startSpan(
    "POST /v1/models/{model}/predict",
    undefined,
    {
      "http.request.method": "POST",
      "url.path": "/v1/models/overhead-mlp/predict",
      "url.scheme": "http",
      "network.protocol.version": "1.1",
      "client.address": "127.0.0.1",
      "http.route": "/v1/models/{model}/predict",
      "user_agent.original": "autocannon",
      [ATTR.requestId]: `req-${i}`,
    },
    KIND.server,
  );
  const parent = parentOf(span);
  const at = performance.now();
  stage(SPAN.decode, ATTR.decodeMs, parent, at);
  stage(SPAN.queue, ATTR.queueMs, parent, at);
  return { span, parent, at };
}

function end(r: Request): void {
  stage(SPAN.encode, ATTR.encodeMs, r.parent, r.at);
  r.span.setAttribute("http.response.status_code", 200);
  r.span.setAttribute(ATTR.model, "overhead-mlp");
  r.span.end();
}

function serve(n: number): void {
  for (let i = 0; i < n; i += 16) {
    const joined: Request[] = [];
    for (let j = 0; j < 16; j++) joined.push(begin(i + j));
    const batch = startSpan(
      SPAN.batch,
      joined[0]!.parent,
      { [ATTR.model]: "overhead-mlp", [ATTR.batchRows]: 16, [ATTR.batchRequests]: 16 },
      KIND.internal,
      joined.map((r) => r.parent),
    );
    startSpan(SPAN.infer, parentOf(batch), { [ATTR.model]: "overhead-mlp", [ATTR.rows]: 16 }).end();
    batch.end();
    for (const r of joined) end(r);
  }
}

/** CPU time of this process's threads by id, ms (Linux /proc), or undefined elsewhere. */
async function threadCpu(): Promise<Map<string, number> | undefined> {
  const { readdirSync, readFileSync } = await import("node:fs");
  try {
    const dir = `/proc/${process.pid}/task`;
    return new Map(
      readdirSync(dir).map((t) => {
        const fields = readFileSync(`${dir}/${t}/stat`, "utf8").split(") ")[1]!.split(" ");
        return [t, (Number(fields[11]) + Number(fields[12])) * 10];
      }),
    );
  } catch {
    return undefined;
  }
}

console.log(
  `bench:span-cost: ${rounds} rounds; ${requests} simulated requests per round (a server span each, a batch of two spans per 16); ${batches} batches of 512 spans' bytes to the export worker per round; node ${process.version}`,
);
serve(20_000); // warm-up
const perRequest: number[] = [];
for (let r = 0; r < rounds; r++) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  const t0 = performance.now();
  serve(requests);
  perRequest.push(((performance.now() - t0) * 1000) / requests);
}
await stopTracing();

// The export worker alone: batches the size the bench's server sends (512 server spans, ~287 KiB).
const worker = new ExportWorker({ resource: { "service.name": "bench" }, scope: { name: "modelport" } });
const size = 287 * 1024;
const send = async (n: number) => {
  for (let i = 0; i < n; i++) {
    const buffer = worker.spare(size) ?? new ArrayBuffer(size);
    await worker.export(buffer, size, 512);
  }
};
await send(10); // the worker's start
const perBatch: number[] = [];
const wall: number[] = [];
for (let r = 0; r < rounds; r++) {
  const before = await threadCpu();
  const t0 = performance.now();
  await send(batches);
  wall.push((performance.now() - t0) / batches);
  const after = await threadCpu();
  if (before && after) {
    // The busiest thread other than this one's main thread is the export worker.
    const main = String(process.pid);
    const busiest = Math.max(
      ...[...after].filter(([t]) => t !== main).map(([t, ms]) => ms - (before.get(t) ?? 0)),
    );
    perBatch.push(busiest / batches);
  }
}
await worker.shutdown();
receiver.close();

console.log(
  `serving thread, µs per simulated request: median ${round(median(perRequest))} (rounds ${perRequest.map((x) => round(x)).join(", ")})`,
);
console.log(
  `export worker, per batch of 512 spans: wall ${round(median(wall))} ms, worker CPU ${perBatch.length ? `${round(median(perBatch))} ms` : "n/a (no /proc)"}`,
);
