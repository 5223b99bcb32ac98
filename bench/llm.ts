// The LLM suite (`npm run bench:llm` = --suite llm): time to first token and decode tokens/s of
// bench-llama (built on demand: 8 layers × 512, ~5 ms a token on one thread) through modelport's
// streaming /v1/completions, against node-llama-cpp called in this process with the same
// settings (1 thread, the same context size, greedy, the same prompt and max_tokens), in the
// same run, strictly alternating, in back-to-back pairs. Bars (medians over the pairs):
// TTFT at most 5 ms more than in-process, decode tokens/s at least 90% of in-process.
//
// Both sides do the same work per request: a fresh sequence (history cleared), the prompt
// evaluated, greedy decoding to max_tokens. Client-side TTFT for modelport includes HTTP, JSON
// parsing, the queue and the SSE write; decode tokens/s is (tokens - 1) / (last - first chunk).
import { existsSync, writeFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { buildBenchLlama, writeLlamaArtifact } from "../examples/build/models/tiny-llama.js";
import { freePort } from "../src/loadgen/serve-child.js";
import { spawnChild } from "./children.js";
import { waitOk } from "./servers.js";
import type { SuiteContext } from "./suite.js";
import { shownPath, writeResults } from "./suite.js";

const TTFT_BAR_MS = 5;
const TPS_BAR = 0.9;
const PROMPT = " the model will serve the answer to the question of the day and the night";
const START_TIMEOUT_MS = 120_000;
const CONTEXT = 1024;
const PAUSE_MS = 100;

interface Sample {
  ttftMs: number;
  tokensPerS: number;
  tokens: number;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const r2 = (x: number) => Math.round(x * 100) / 100;

/** Sum and count of the server's own TTFT histogram (from request received to first text). */
async function serverTtft(url: string): Promise<{ sum: number; count: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const num = (name: string) =>
    Number(new RegExp(`^${name}\\{[^}]*model="bench-llama"[^}]*\\} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
  return {
    sum: num("modelport_llm_time_to_first_token_seconds_sum"),
    count: num("modelport_llm_time_to_first_token_seconds_count"),
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/**
 * One streamed completion through modelport, timed by the client: node:http on a kept-alive
 * connection (lighter than fetch, so the figure is the server's, not the client library's).
 */
function viaModelport(url: string, maxTokens: number): Promise<Sample> {
  const body = JSON.stringify({ model: "bench-llama", prompt: PROMPT, max_tokens: maxTokens, stream: true });
  return new Promise<Sample>((resolve, reject) => {
    const started = performance.now();
    let first = 0;
    let last = 0;
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
          reject(new Error(`modelport answered ${res.statusCode}`));
          res.resume();
          return;
        }
        res.setEncoding("utf8");
        res.on("data", (data: string) => {
          const now = performance.now();
          buffered += data;
          let nl = buffered.indexOf("\n\n");
          while (nl >= 0) {
            const event = buffered.slice(0, nl);
            buffered = buffered.slice(nl + 2);
            nl = buffered.indexOf("\n\n");
            if (!event.startsWith("data: {")) continue;
            const text = (JSON.parse(event.slice(6)) as { choices: { text: string }[] }).choices[0]?.text;
            if (!text) continue;
            if (chunks === 0) first = now;
            last = now;
            chunks++;
          }
        });
        res.on("end", () =>
          resolve({
            ttftMs: first - started,
            tokensPerS: ((chunks - 1) * 1000) / (last - first),
            tokens: chunks,
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

export async function runLlm(ctx: SuiteContext, commandLine: string): Promise<string> {
  const { opts, log } = ctx;
  const file = path.join(ctx.modelDir, "bench-llama.gguf");
  if (!existsSync(file)) {
    const t = performance.now();
    const m = await writeLlamaArtifact(ctx.modelDir, buildBenchLlama());
    log(
      `built bench-llama.gguf: ${(m.bytes / 2 ** 20).toFixed(1)} MiB in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
  }
  const requests = (opts.quick ? 3 : 10) * opts.rounds;
  const warmup = 2;
  const maxTokens = opts.quick ? 32 : 128;

  // In-process: node-llama-cpp straight, as modelport's backend configures it.
  const { getLlama, LlamaCompletion, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: 0, logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
  const context = await model.createContext({ contextSize: CONTEXT, sequences: 1, threads: 1 });
  const sequence = context.getSequence();
  const promptTokens = model.tokenize(PROMPT, false, "trimLeadingSpace").length + 1; // + BOS
  const completion = new LlamaCompletion({ contextSequence: sequence });
  const inProcess = async (): Promise<Sample> => {
    const started = performance.now();
    await sequence.clearHistory();
    const tokens = model.tokenize(PROMPT, false, "trimLeadingSpace");
    let first = 0;
    let last = 0;
    let chunks = 0;
    await completion.generateCompletion(tokens, {
      maxTokens,
      repeatPenalty: false,
      disableContextShift: true,
      onTextChunk: (text) => {
        if (!text) return;
        const now = performance.now();
        if (chunks === 0) first = now;
        last = now;
        chunks++;
      },
    });
    return { ttftMs: first - started, tokensPerS: ((chunks - 1) * 1000) / (last - first), tokens: chunks };
  };

  const port = await freePort();
  // The same settings as in-process: one model, 1 thread, one sequence, the same context size.
  const config = path.join(ctx.modelDir, "bench-llm.yaml");
  writeFileSync(
    config,
    // No prefix cache: the in-process side evaluates the whole prompt each time too (the cache's
    // own gain is bench/prefix-cache.ts's).
    `models:\n  - name: bench-llama\n    path: bench-llama.gguf\n    threads: 1\n    llm: { contextSize: ${CONTEXT}, sequences: 1, prefixCache: false }\n`,
  );
  const args = ["serve", "-c", config, "--port", String(port), "--log-level", "warn"];
  const command = `node bin/modelport.js ${args.join(" ").replace(config, "<models>/bench-llm.yaml")} (bench-llama: threads 1, llm.contextSize ${CONTEXT}, llm.sequences 1, llm.prefixCache false)`;
  const child = spawnChild(
    process.execPath,
    [path.join(ctx.repoRoot, "bin/modelport.js"), ...args],
    "modelport",
  );
  const url = `http://127.0.0.1:${port}`;
  const samples: { modelport: Sample[]; inProcess: Sample[] } = { modelport: [], inProcess: [] };
  let serverSide = { sum: 0, count: 0 };
  // The 1-minute load average around the measured requests: this suite uses about one core, so
  // well above 1 means other work shared the machine (and TTFT scatters).
  let loadBefore = 0;
  let loadAfter = 0;
  try {
    await waitOk(`${url}/readyz`, child, START_TIMEOUT_MS);
    const info = (await (await fetch(`${url}/v1/models/bench-llama`)).json()) as { context_length?: number };
    log(`modelport ready (context ${info.context_length}); in-process context ${context.contextSize}`);
    for (let i = 0; i < warmup; i++) {
      await viaModelport(url, maxTokens);
      await inProcess();
    }
    loadBefore = os.loadavg()[0]!;
    const before = await serverTtft(url);
    for (let i = 0; i < requests; i++) {
      // Strictly alternating, A B A B …: every request runs right after one of the other side.
      // (Swapping the order per pair, A B B A, made whichever ran second in a pair 5-7 ms slower:
      // it followed the other process, which had pushed its buffers out of the CPU caches, while
      // the first followed itself. Alternating gives every request the same conditions.)
      const order = ["modelport", "inProcess"] as const;
      for (const side of order) {
        // A short pause, as between real requests, so no request starts on the heels of the last.
        await new Promise((r) => setTimeout(r, PAUSE_MS));
        const s = side === "modelport" ? await viaModelport(url, maxTokens) : await inProcess();
        samples[side].push(s);
        log(
          `  ${String(i + 1).padStart(2)} ${side.padEnd(10)} TTFT ${r2(s.ttftMs)} ms, ${r2(s.tokensPerS)} tokens/s (${s.tokens} chunks)`,
        );
      }
    }
    const after = await serverTtft(url);
    loadAfter = os.loadavg()[0]!;
    serverSide = { sum: after.sum - before.sum, count: after.count - before.count };
  } finally {
    agent.destroy();
    await child.stop();
    await context.dispose();
    await model.dispose();
  }

  const mp = {
    ttftMs: median(samples.modelport.map((s) => s.ttftMs)),
    tps: median(samples.modelport.map((s) => s.tokensPerS)),
  };
  const ip = {
    ttftMs: median(samples.inProcess.map((s) => s.ttftMs)),
    tps: median(samples.inProcess.map((s) => s.tokensPerS)),
  };
  // Each modelport request ran right next to an in-process one (order alternating), so the
  // verdict uses the median of the paired differences and ratios: drift and other load on the
  // machine hit both members of a pair alike. The difference of the medians is shown too.
  const pairs = samples.modelport.map((m, i) => ({ m, p: samples.inProcess[i]! }));
  const ttftAdded = median(pairs.map(({ m, p }) => m.ttftMs - p.ttftMs));
  const ttftMedianDiff = mp.ttftMs - ip.ttftMs;
  const serverTtftMs = serverSide.count ? (serverSide.sum / serverSide.count) * 1000 : null;
  const tpsRatio = median(pairs.map(({ m, p }) => m.tokensPerS / p.tokensPerS));
  const pass = ttftAdded <= TTFT_BAR_MS && tpsRatio >= TPS_BAR;
  const results = {
    suite: "llm",
    date: ctx.date,
    machine: ctx.machine,
    source: ctx.source,
    command: commandLine,
    server: command,
    model: { file: "bench-llama.gguf", prompt: PROMPT, maxTokens, threads: 1 },
    requests,
    samples,
    medians: { modelport: mp, inProcess: ip },
    ttftAddedMs: ttftAdded,
    ttftMedianDifferenceMs: ttftMedianDiff,
    tokensPerSecondMedianRatio: mp.tps / ip.tps,
    serverSideTtftMeanMs: serverTtftMs,
    loadAverage: { before: loadBefore, after: loadAfter },
    tokensPerSecondRatio: tpsRatio,
    bars: { ttftAddedMs: TTFT_BAR_MS, tokensPerSecondRatio: TPS_BAR },
    pass,
  };
  const out = writeResults(ctx, "llm", results);
  const rows = [
    `| path | TTFT median (ms) | decode tokens/s median |`,
    `| --- | ---: | ---: |`,
    `| node-llama-cpp in-process | ${r2(ip.ttftMs)} | ${r2(ip.tps)} |`,
    `| modelport /v1/completions, stream | ${r2(mp.ttftMs)} | ${r2(mp.tps)} |`,
  ];
  return [
    "",
    `LLM suite: bench-llama, prompt ${promptTokens} tokens, ${maxTokens} tokens per request, ${requests} requests per side (after ${warmup} warm-up), 1 thread`,
    ...rows,
    `modelport's own TTFT (request received to first text, mean of its histogram): ${serverTtftMs === null ? "-" : r2(serverTtftMs)} ms; in-process mean ${r2(samples.inProcess.reduce((a, x) => a + x.ttftMs, 0) / samples.inProcess.length)} ms`,
    "",
    `1-minute load average: ${r2(loadBefore)} before, ${r2(loadAfter)} after the measured requests (2 cores; this suite uses ~1)`,
    `difference of the medians: TTFT +${r2(ttftMedianDiff)} ms, tokens/s ${((mp.tps / ip.tps) * 100).toFixed(1)}%`,
    `TTFT added by modelport (median of paired differences): ${r2(ttftAdded)} ms (bar <= ${TTFT_BAR_MS} ms); tokens/s (median of paired ratios): ${(tpsRatio * 100).toFixed(1)}% (bar >= ${TPS_BAR * 100}%): ${pass ? "PASS" : "FAIL"}`,
    `server: ${command}`,
    `results: ${shownPath(out)}`,
    "",
  ].join("\n");
}
