// `npm run bench:llm-concurrency`: aggregate decode throughput with 1, 4 and 8 concurrent streams.
// For each level N: one `modelport serve` with bench-llama (llm.sequences N, the same threads),
// N streamed /v1/completions at once, against node-llama-cpp called in this process with one
// context of N sequences and N generations at once (the ceiling: the same library, no HTTP). Both
// sides decode greedily to the same max_tokens from the same N prompts (one per stream, distinct
// so that no prefix is shared); the prefix cache is off, as in bench/llm.ts. A round is one
// burst on each side, strictly alternating; aggregate tokens/s = tokens received / the burst's
// wall time. The verdict per level is the median of the paired ratios (drift and other load hit
// both members of a pair alike). The bar: modelport ≥ 90% of in-process at every level.
// Not a test: numbers for docs/PERFORMANCE.md.
// Usage: node dist/bench/llm-concurrency.js [--rounds N] [--levels 1,4,8] [--tokens M] [--threads T]
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { buildBenchLlama, writeLlamaArtifact } from "../examples/build/models/tiny-llama.js";
import { machine } from "./report.js";
import { startModelportWithConfig } from "./servers.js";
import { round } from "./stats.js";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    levels: { type: "string", default: "1,4,8" },
    tokens: { type: "string", default: "64" },
    threads: { type: "string", default: "2" },
  },
});
const ROUNDS = Number(values.rounds);
const LEVELS = values.levels.split(",").map(Number);
const MAX_TOKENS = Number(values.tokens);
const THREADS = Number(values.threads);
const CONTEXT = 1024;
const BAR = 0.9;
const WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split(" ");

/** Stream i's prompt: its own first word, so that no two streams share a prefix. */
const prompt = (i: number) =>
  `${WORDS[i % WORDS.length]} ${i} the model will serve the answer to the question`;

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** One streamed completion through modelport; resolves with the text chunks received. */
function streamed(url: string, agent: http.Agent, text: string): Promise<number> {
  const body = JSON.stringify({ model: "bench-llama", prompt: text, max_tokens: MAX_TOKENS, stream: true });
  return new Promise<number>((resolve, reject) => {
    let chunks = 0;
    let buffered = "";
    const req = http.request(
      `${url}/v1/completions`,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`modelport answered ${res.statusCode}`));
          return;
        }
        res.setEncoding("utf8");
        res.on("data", (data: string) => {
          buffered += data;
          let nl = buffered.indexOf("\n\n");
          while (nl >= 0) {
            const event = buffered.slice(0, nl);
            buffered = buffered.slice(nl + 2);
            nl = buffered.indexOf("\n\n");
            if (!event.startsWith("data: {")) continue;
            const t = (JSON.parse(event.slice(6)) as { choices: { text: string }[] }).choices[0]?.text;
            if (t) chunks++;
          }
        });
        res.on("end", () => resolve(chunks));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Tokens per second of one burst of `n` generations started together. */
async function burst(
  n: number,
  one: (i: number) => Promise<number>,
): Promise<{ tps: number; tokens: number }> {
  const started = performance.now();
  const counts = await Promise.all(Array.from({ length: n }, (_, i) => one(i)));
  const seconds = (performance.now() - started) / 1000;
  const tokens = counts.reduce((a, b) => a + b, 0);
  return { tps: tokens / seconds, tokens };
}

async function main(): Promise<void> {
  const dir = path.join(tmpdir(), "modelport-bench-models");
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, "bench-llama.gguf");
  if (!existsSync(file)) await writeLlamaArtifact(dir, buildBenchLlama());
  const { getLlama, LlamaCompletion, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: 0, logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
  const rows: Record<string, unknown>[] = [];
  try {
    for (const n of LEVELS) {
      // In-process: node-llama-cpp as modelport's backend sets it up (one context, n sequences).
      const context = await model.createContext({
        contextSize: Math.min(CONTEXT, model.trainContextSize),
        sequences: n,
        threads: THREADS,
      });
      const slots = Array.from({ length: n }, () => {
        const sequence = context.getSequence();
        return { sequence, completion: new LlamaCompletion({ contextSequence: sequence }) };
      });
      const inProcess = async (i: number) => {
        const slot = slots[i]!;
        await slot.sequence.clearHistory();
        let chunks = 0;
        await slot.completion.generateCompletion(model.tokenize(prompt(i), false, "trimLeadingSpace"), {
          maxTokens: MAX_TOKENS,
          repeatPenalty: false,
          disableContextShift: true,
          onTextChunk: (t) => {
            if (t) chunks++;
          },
        });
        return chunks;
      };
      const configFile = path.join(dir, `llm-concurrency-${n}.yaml`);
      writeFileSync(
        configFile,
        [
          "server: {allowOversubscription: true}",
          "models:",
          `  - {name: bench-llama, path: ${file}, threads: ${THREADS}, llm: {sequences: ${n}, contextSize: ${CONTEXT}, prefixCache: false, maxWaiting: ${n}}}`,
          "",
        ].join("\n"),
      );
      const server = await startModelportWithConfig({
        name: "modelport",
        configFile,
        shownConfigFile: `<tmp>/llm-concurrency-${n}.yaml`,
        modelName: "bench-llama",
        logLevel: "warn",
      });
      const agent = new http.Agent({ keepAlive: true, maxSockets: n });
      const viaModelport = (i: number) => streamed(server.url, agent, prompt(i));
      const ratios: number[] = [];
      const mp: number[] = [];
      const ip: number[] = [];
      try {
        await burst(n, viaModelport);
        await burst(n, inProcess);
        for (let r = 0; r < ROUNDS; r++) {
          const a = await burst(n, viaModelport);
          const b = await burst(n, inProcess);
          mp.push(a.tps);
          ip.push(b.tps);
          ratios.push(a.tps / b.tps);
          console.log(
            `  N=${n} round ${r + 1}: modelport ${round(a.tps)} tokens/s (${a.tokens}), in-process ${round(b.tps)} tokens/s (${b.tokens})`,
          );
        }
      } finally {
        agent.destroy();
        await server.child.stop(2000);
        await context.dispose();
      }
      const ratio = median(ratios);
      const row = {
        streams: n,
        modelportTokensPerS: round(median(mp)),
        inProcessTokensPerS: round(median(ip)),
        ratio: round(ratio),
        pass: ratio >= BAR,
        command: server.command,
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
  } finally {
    await model.dispose();
  }
  console.log(
    JSON.stringify({
      bar: BAR,
      pass: rows.every((r) => r["pass"]),
      rounds: ROUNDS,
      maxTokens: MAX_TOKENS,
      threads: THREADS,
      loadAverage1m: round(os.loadavg()[0]!),
      date: new Date().toISOString(),
      machine: machine(),
    }),
  );
}

await main();
