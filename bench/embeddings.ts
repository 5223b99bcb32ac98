// The embeddings suite (`npm run bench:embeddings` = --suite embeddings): POST /v1/embeddings,
// one text per request, at concurrency 32 by default, against `modelport serve <models>/<model>
// --threads 1` with batching on (default settings) and with --batching off, in the same run,
// alternating which goes first per round. The bar (batching gives at least 3× the requests/s) is
// judged on bench-embed: the tiny-embed recipe at MiniLM-L6's sizes (hidden 384, feed-forward
// 1536, 6 layers), built on demand into the bench's model folder (tests never build it), so that
// a call costs real arithmetic. tiny-embed (hidden 32, the example model) is measured the same way
// as a secondary row, not judged: on it per-request costs (HTTP, tokenisation) dominate. Batch
// sizes come from the server's own /metrics; CPU per process and thread from /proc. A second bar
// (the overhead issue's) compares the server with batching on to the backend called in this
// process with batches of the size the server formed: at least 95% of its texts/s.
import path from "node:path";
import { BENCH_EMBED, writeTinyEmbed } from "../examples/build/models/tiny-embed.js";
import { TransformersBackend } from "../src/backends/transformers/transformers-backend.js";
import { runLoad } from "../src/loadgen/load.js";
import { freePort } from "../src/loadgen/serve-child.js";
import { spawnChild } from "./children.js";
import { type CpuSnapshot, cpuReport, cpuSnapshot } from "./cpu.js";
import { NOISY_OTHER_PCT } from "./report.js";
import { waitOk } from "./servers.js";
import type { SuiteContext } from "./suite.js";
import { writeResults } from "./suite.js";

const BAR = 3;
/** The server with batching on against the backend in-process with the same batch size. */
const SAME_BATCH_BAR = 0.95;
const _START_TIMEOUT_MS = 60_000;
const TEXT = "The cat likes warm milk and my dog likes the sun.";

interface Variant {
  name: string;
  flags: string[];
}

/** A model the suite measures; only the judged one decides the verdict. */
interface BenchModel {
  name: string;
  judged: boolean;
  about: string;
}

const MODELS: readonly BenchModel[] = [
  {
    name: BENCH_EMBED.name,
    judged: true,
    about: `hidden ${BENCH_EMBED.dim}, feed-forward ${BENCH_EMBED.ff}, ${BENCH_EMBED.layers} layers, built on demand`,
  },
  { name: "tiny-embed", judged: false, about: "the toy example model: hidden 32, feed-forward 64, 6 layers" },
];

interface Point {
  model: string;
  server: string;
  round: number;
  concurrency: number;
  rps: number;
  p50: number | null;
  p99: number | null;
  non2xx: number;
  errors: number;
  meanBatchRows: number | null;
  /** % of one core used by other processes during the point (null off Linux). */
  otherPct: number | null;
  /** % of one core used by the server process (all threads) and by the bench (load generator). */
  serverPct: number | null;
  benchPct: number | null;
  /** The server's busiest threads, % of one core each (main thread first when busiest). */
  serverThreads: { name: string; pct: number }[] | null;
  /**
   * Batching on: the backend in this process right after the point, called with this round's mean
   * batch (rounded), so that each round's ratio compares two measurements taken side by side.
   */
  sameBatch?: Ceiling;
}

/** Sum and count of modelport_batch_rows for the model, from /metrics. */
async function batchRows(url: string, model: string): Promise<{ sum: number; count: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const num = (name: string) => {
    const m = new RegExp(`^${name}\\{[^}]*model="${model}"[^}]*\\} (\\S+)$`, "m").exec(text);
    return m ? Number(m[1]) : 0;
  };
  return { sum: num("modelport_batch_rows_sum"), count: num("modelport_batch_rows_count") };
}

/**
 * Batch sizes of the in-process ceiling: one text per call (batching off), tiny-embed's typical
 * batch at concurrency 32, and the largest batch concurrency 32 allows.
 */
const IN_PROCESS_BATCHES = [1, 13, 32];

/**
 * The backend alone, in this process, no HTTP and no worker hop: texts per second when it is
 * called with `rows` texts at a time, for `seconds`. This is the most batching can win.
 */
async function inProcess(
  name: string,
  folder: string,
  rows: number,
  seconds: number,
  cores: number,
): Promise<{ rows: number; textsPerS: number; usPerCall: number; otherPct: number | null }> {
  const model = await new TransformersBackend().load({
    name,
    path: folder,
    threads: 1,
    options: {},
  });
  try {
    const inputs = {
      text: { datatype: "BYTES" as const, shape: [rows], data: Array<string>(rows).fill(TEXT) },
    };
    // Warm-up: 50 calls or 1 s, whichever ends first (a 32-text call on bench-embed is slow).
    const warm = performance.now();
    for (let i = 0; i < 50 && performance.now() - warm < 1000; i++) await model.predict(inputs);
    let calls = 0;
    const cpuStart = cpuSnapshot(process.pid);
    const started = performance.now();
    while (performance.now() - started < seconds * 1000) {
      await model.predict(inputs);
      calls++;
    }
    const ms = performance.now() - started;
    // The model runs in this process: everything else busy on the machine is other load.
    const cpu = cpuReport(cpuStart, cpuSnapshot(process.pid), cores);
    const otherPct =
      cpu.machineBusyPct === null ? null : Math.max(0, Math.round(cpu.machineBusyPct * cores - cpu.benchPct));
    return {
      rows,
      textsPerS: Math.round((calls * rows * 1000) / ms),
      usPerCall: Math.round((ms * 1000) / calls),
      otherPct,
    };
  } finally {
    await model.close();
  }
}

/** A point measured while other processes used more than NOISY_OTHER_PCT of a core. */
function noisy(p: Point): boolean {
  return p.otherPct !== null && p.otherPct > NOISY_OTHER_PCT;
}

type Ceiling = Awaited<ReturnType<typeof inProcess>>;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : 0;
};

/** Every round of batching on and off for one model. */
async function measureModel(
  ctx: SuiteContext,
  model: BenchModel,
  variants: readonly Variant[],
  commands: Map<string, string>,
): Promise<Point[]> {
  const { opts, log } = ctx;
  const folder = path.join(ctx.modelDir, model.name);
  const bin = path.join(ctx.repoRoot, "bin/modelport.js");
  const points: Point[] = [];
  /** This round's batching-on point, to pair with the backend in-process once its server has stopped. */
  let pair: Point | undefined;
  for (let round = 1; round <= opts.rounds; round++) {
    const order = round % 2 === 1 ? variants : [...variants].reverse();
    for (const c of opts.concurrency) {
      for (const v of order) {
        const port = await freePort();
        const args = [
          "serve",
          folder,
          "--port",
          String(port),
          "--log-level",
          "warn",
          "--threads",
          "1",
          ...v.flags,
        ];
        commands.set(
          `${model.name} ${v.name}`,
          `node bin/modelport.js ${args.join(" ").replace(folder, `<models>/${model.name}`)}`,
        );
        const child = spawnChild(process.execPath, [bin, ...args], `${model.name}-${v.name}`);
        const url = `http://127.0.0.1:${port}`;
        try {
          await waitOk(`${url}/readyz`, child);
          const before = await batchRows(url, model.name);
          // One text per request (autocannon sends one body); the texts only differ in length anyway.
          const body = JSON.stringify({ model: model.name, input: TEXT });
          let cpuStart: CpuSnapshot | undefined;
          const r = await runLoad(
            {
              url: `${url}/v1/embeddings`,
              method: "POST",
              headers: { "content-type": "application/json" },
              body,
            },
            {
              concurrency: c,
              durationS: opts.durationS,
              warmupS: opts.warmupS,
              onMeasureStart: () => {
                cpuStart = cpuSnapshot(child.pid);
              },
            },
          );
          const cpu = cpuStart ? cpuReport(cpuStart, cpuSnapshot(child.pid), ctx.machine.cpus) : null;
          const after = await batchRows(url, model.name);
          const batches = after.count - before.count;
          const p: Point = {
            model: model.name,
            server: v.name,
            round,
            concurrency: c,
            rps: r.rps,
            p50: r.latencyMs.p50,
            p99: r.latencyMs.p99,
            non2xx: r.non2xx,
            errors: r.errors + r.timeouts,
            meanBatchRows: batches > 0 ? Math.round(((after.sum - before.sum) / batches) * 10) / 10 : null,
            otherPct: cpu?.otherPct ?? null,
            serverPct: cpu?.serverPct ?? null,
            benchPct: cpu?.benchPct ?? null,
            serverThreads: cpu?.serverThreads?.map((t) => ({ name: t.name, pct: t.pct })) ?? null,
          };
          points.push(p);
          if (v.name === "batching-on" && p.meanBatchRows !== null) pair = p;
          const threads = (p.serverThreads ?? [])
            .slice(0, 3)
            .map((t) => `${t.name} ${t.pct}`)
            .join(", ");
          log(
            `  ${model.name} round ${round} ${v.name.padEnd(13)} c=${c}: ${p.rps} req/s, p50 ${p.p50} ms, p99 ${p.p99} ms, ` +
              `mean batch ${p.meanBatchRows ?? "-"} rows, non-2xx ${p.non2xx}, errors ${p.errors}; % of a core: ` +
              `server ${p.serverPct ?? "-"} (${threads || "-"}), bench ${p.benchPct ?? "-"}, ` +
              `other ${p.otherPct ?? "-"}${noisy(p) ? " (NOISY)" : ""}`,
          );
        } finally {
          await child.stop();
        }
        // The same batches in-process, once the server has stopped: the round's pair.
        if (pair) {
          const p = pair;
          pair = undefined;
          p.sameBatch = await inProcess(
            model.name,
            folder,
            Math.max(1, Math.round(p.meanBatchRows!)),
            opts.inProcessS,
            ctx.machine.cpus,
          );
          log(
            `  ${model.name} round ${round} in-process, the server's mean batch (${p.sameBatch.rows} texts): ` +
              `${p.sameBatch.textsPerS} texts/s; batching on = ${((p.rps / p.sameBatch.textsPerS) * 100).toFixed(1)}% of it`,
          );
        }
      }
    }
  }
  return points;
}

/** Paired on / off ratio per round at concurrency c, quiet rounds preferred, and its median. */
function verdict(points: readonly Point[], rounds: number, c: number) {
  // Paired per round (the two servers ran back to back), then the median: a round disturbed by
  // other work on the machine moves one ratio, not the verdict.
  const paired: number[] = [];
  const noisyPairs: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const at = (server: string) =>
      points.find((p) => p.server === server && p.concurrency === c && p.round === round);
    const on = at("batching-on");
    const off = at("batching-off");
    if (on && off && off.rps > 0) (noisy(on) || noisy(off) ? noisyPairs : paired).push(on.rps / off.rps);
  }
  // Rounds disturbed by other work on this shared machine are left out while quiet ones exist.
  const usedNoisy = paired.length === 0;
  if (usedNoisy) paired.push(...noisyPairs);
  const ratio = median(paired);
  const detail =
    `median of ${paired.length} paired round(s): ${paired.map((r) => r.toFixed(2)).join(", ")}` +
    (usedNoisy ? ", all noisy" : noisyPairs.length ? `; ${noisyPairs.length} noisy round(s) left out` : "");
  return { ratio, detail };
}

export async function runEmbeddings(ctx: SuiteContext, commandLine: string): Promise<string> {
  const { opts, log } = ctx;
  const variants: Variant[] = [
    { name: "batching-on", flags: [] },
    { name: "batching-off", flags: ["--batching", "off"] },
  ];
  const built = performance.now();
  const benchEmbed = await writeTinyEmbed(ctx.modelDir, BENCH_EMBED);
  log(
    `built ${BENCH_EMBED.name} (hidden ${BENCH_EMBED.dim}, ff ${BENCH_EMBED.ff}, ${BENCH_EMBED.layers} layers): ` +
      `onnx/model.onnx ${benchEmbed.bytes} bytes in ${Math.round(performance.now() - built)} ms`,
  );
  const ceilings = new Map<string, Ceiling[]>();
  const points: Point[] = [];
  const commands = new Map<string, string>();
  for (const model of MODELS) {
    const ceiling: Ceiling[] = [];
    for (const rows of IN_PROCESS_BATCHES) {
      const folder = path.join(ctx.modelDir, model.name);
      const r = await inProcess(model.name, folder, rows, opts.inProcessS, ctx.machine.cpus);
      log(
        `${model.name} in-process: ${rows} text(s) per call: ${r.textsPerS} texts/s, ${r.usPerCall} µs per call; ` +
          `other load ${r.otherPct ?? "-"}% of a core${r.otherPct !== null && r.otherPct > NOISY_OTHER_PCT ? " (NOISY)" : ""}`,
      );
      ceiling.push(r);
    }
    ceilings.set(model.name, ceiling);
    const measured = await measureModel(ctx, model, variants, commands);
    points.push(...measured);
  }

  const lines: string[] = [];
  lines.push("", `## Embeddings: batching on vs off (${ctx.date.slice(0, 10)})`, "");
  lines.push(
    `Machine: ${ctx.machine.cpus} cores (${ctx.machine.cpuModel}), Node ${ctx.machine.node}. Command: \`${commandLine}\`.`,
    "",
  );
  lines.push(
    `Models: ${MODELS.map((m) => `${m.name} (${m.about}${m.judged ? "; the bar is judged on it" : "; not judged"})`).join("; ")}.`,
    "",
  );
  lines.push(
    `Medians of ${opts.rounds} round(s), each starting both servers afresh; non-2xx and errors are totals; ` +
      "CPU in % of one core (server: all its threads; bench: the load generator).",
    "",
  );
  lines.push(
    "| model | concurrency | server | req/s | p50 ms | p99 ms | mean batch rows | non-2xx | errors | server CPU | server µs/req | bench CPU | other load |",
  );
  lines.push("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  const verdicts: string[] = [];
  let pass = true;
  for (const model of MODELS) {
    const mine = points.filter((p) => p.model === model.name);
    for (const c of opts.concurrency) {
      for (const v of variants) {
        const ps = mine.filter((p) => p.server === v.name && p.concurrency === c);
        const med = (f: (p: Point) => number | null) => {
          const xs = ps.map(f).filter((x): x is number => x !== null);
          return xs.length ? median(xs) : "-";
        };
        const total = (f: (p: Point) => number) => ps.reduce((n, p) => n + f(p), 0);
        const usPerReq = (p: Point) =>
          p.serverPct !== null && p.rps > 0 ? Math.round((p.serverPct / 100) * (1e6 / p.rps)) : null;
        lines.push(
          `| ${model.name} | ${c} | ${v.name} | ${med((p) => p.rps)} | ${med((p) => p.p50)} | ${med((p) => p.p99)} | ` +
            `${med((p) => p.meanBatchRows)} | ${total((p) => p.non2xx)} | ${total((p) => p.errors)} | ` +
            `${med((p) => p.serverPct)} | ${med(usPerReq)} | ${med((p) => p.benchPct)} | ${med((p) => p.otherPct)} |`,
        );
      }
      const { ratio, detail } = verdict(mine, opts.rounds, c);
      const ok = ratio >= BAR;
      if (model.judged && !ok) pass = false;
      verdicts.push(
        `${model.name} c=${c}: batching on / off = ${ratio.toFixed(2)}× (${detail}; bar ≥ ${BAR}×): ` +
          (model.judged ? (ok ? "PASS" : "FAIL") : "not judged (toy model)"),
      );
      const pairs = mine.filter(
        (p) => p.server === "batching-on" && p.concurrency === c && p.sameBatch !== undefined,
      );
      if (pairs.length > 0) {
        const shares = pairs.map((p) => p.rps / p.sameBatch!.textsPerS);
        const share = median(shares);
        if (model.judged && share < SAME_BATCH_BAR) pass = false;
        verdicts.push(
          `${model.name} c=${c}: batching on = ${(share * 100).toFixed(1)}% of the backend in-process with the same ` +
            `batches (median of ${pairs.length} round(s), each against the in-process run right after it: ` +
            pairs
              .map(
                (p, i) =>
                  `${p.rps} / ${p.sameBatch!.textsPerS} texts/s at ${p.sameBatch!.rows} = ${(shares[i]! * 100).toFixed(1)}%`,
              )
              .join("; ") +
            `; bar ≥ ${SAME_BATCH_BAR * 100}%): ` +
            (model.judged ? (share >= SAME_BATCH_BAR ? "PASS" : "FAIL") : "not judged (toy model)"),
        );
      }
    }
  }
  lines.push("", ...verdicts.map((v) => `- ${v}`), "");
  for (const model of MODELS) {
    const ceiling = ceilings.get(model.name)!;
    const best = Math.max(...ceiling.map((c) => c.textsPerS));
    lines.push(
      `${model.name} in-process ceiling (the backend called directly, no HTTP, no worker hop, 1 thread): ` +
        ceiling
          .map(
            (c) =>
              `${c.rows} text(s) per call: ${c.textsPerS} texts/s (${c.usPerCall} µs per call, other load ${c.otherPct ?? "-"}%)`,
          )
          .join("; ") +
        `; ${(best / ceiling[0]!.textsPerS).toFixed(2)}× from batching alone.`,
      "",
    );
  }
  lines.push(`Servers: ${[...commands.entries()].map(([n, cmd]) => `${n}: \`${cmd}\``).join("; ")}.`, "");
  const file = writeResults(ctx, "embeddings", {
    models: MODELS,
    points,
    ceilings: Object.fromEntries(ceilings),
    verdicts,
    pass,
    commandLine,
  });
  lines.push(`Results: ${file}`, "");
  return lines.join("\n");
}
