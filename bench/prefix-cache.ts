// `npm run bench:prefix-cache`: time to first token with a long shared system prompt, on a cache
// miss and a cache hit. One `modelport serve` with bench-llama (8 layers, 512 wide), one sequence.
// Each round: a chat whose ~1,000-token system prompt is new (its first word changes: nothing to
// reuse) — a miss — then the same system prompt with another question — a hit, which evaluates
// only what follows the shared prefix. The same pair against the same model with
// `llm.prefixCache: false` shows what every request cost before. TTFT is the first streamed
// chunk's arrival; medians over ROUNDS. The bar: hit ≤ 25% of miss.
// Not a test: numbers for docs/PERFORMANCE.md.
// Usage: node dist/bench/prefix-cache.js [--rounds N]
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { buildBenchLlama, writeLlamaArtifact } from "../examples/build/models/tiny-llama.js";
import { machine } from "./report.js";
import { startModelportWithConfig } from "./servers.js";
import { round, Samples } from "./stats.js";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "7" } } });
const rounds = Number(values.rounds);

const WORDS = "the model will serve a request and load check build test run read write send wait".split(" ");

/** About `n` words of system prompt, starting with `first`. */
function systemPrompt(first: string, n: number): string {
  const words = [first];
  for (let i = 1; i < n; i++) words.push(WORDS[(i * 7) % WORDS.length]!);
  return words.join(" ");
}

/** Milliseconds to the first streamed chunk, and the prompt's token counts. */
async function ttft(url: string, model: string, system: string, question: string) {
  const started = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages: [
        { role: "system", content: system },
        { role: "user", content: question },
      ],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  const reader = res.body!.getReader();
  let first = 0;
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const chunk = Buffer.from(value).toString("utf8");
    if (!first && chunk.includes('"delta"')) first = performance.now();
    text += chunk;
  }
  const prompt = /"usage":\{"prompt_tokens":(\d+)/.exec(text)?.[1];
  const cached = /"cached_tokens":(\d+)/.exec(text)?.[1];
  return { ms: first - started, prompt: Number(prompt ?? 0), cached: Number(cached ?? 0) };
}

async function main(): Promise<void> {
  const dir = path.join(tmpdir(), "modelport-bench-models");
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, "bench-llama.gguf");
  if (!existsSync(file)) await writeLlamaArtifact(dir, buildBenchLlama());
  const configFile = path.join(dir, "prefix-cache.yaml");
  const entry = (name: string, cache: boolean) =>
    `  - {name: ${name}, path: ${file}, llm: {sequences: 1, contextSize: 2048, prefixCache: ${cache}}}`;
  writeFileSync(
    configFile,
    [
      "server: {allowOversubscription: true}",
      "models:",
      entry("cached", true),
      entry("fresh", false),
      "",
    ].join("\n"),
  );
  const server = await startModelportWithConfig({
    name: "modelport",
    configFile,
    shownConfigFile: "<tmp>/prefix-cache.yaml",
    modelName: "cached",
    logLevel: "warn",
  });
  try {
    const results: Record<string, Samples> = {};
    let tokens = { prompt: 0, cached: 0 };
    for (const model of ["cached", "fresh"]) {
      const miss = new Samples();
      const hit = new Samples();
      // A warm-up pair, then the rounds.
      for (let r = -1; r < rounds; r++) {
        const system = systemPrompt(`${model}${r + 2}`, 700);
        const a = await ttft(server.url, model, system, "what is the first thing?");
        const b = await ttft(server.url, model, system, "and the second one, please?");
        if (r < 0) continue;
        miss.add(a.ms);
        hit.add(b.ms);
        if (model === "cached") tokens = { prompt: b.prompt, cached: b.cached };
      }
      results[`${model} miss`] = miss;
      results[`${model} hit`] = hit;
    }
    const p50 = (k: string) => round(results[k]!.percentiles([50])[0]!);
    const rows = ["cached miss", "cached hit", "fresh miss", "fresh hit"].map((k) => ({
      case: k,
      ttftP50Ms: p50(k),
    }));
    for (const r of rows) console.log(JSON.stringify(r));
    console.log(
      JSON.stringify({
        promptTokens: tokens.prompt,
        cachedTokensOnHit: tokens.cached,
        hitOverMiss: round(p50("cached hit") / p50("cached miss")),
        date: new Date().toISOString(),
        machine: machine(),
        command: server.command,
      }),
    );
  } finally {
    await server.child.stop(2000);
  }
}

await main();
