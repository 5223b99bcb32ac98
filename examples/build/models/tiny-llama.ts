// tiny-llama: a llama-architecture language model small enough to build in milliseconds and
// generate thousands of tokens per second on one thread, for tests and `npm start`. Written as
// tiny-llama.gguf with a ChatML chat template, a golden file whose text comes from the float64
// reference forward pass (examples/build/llama-model.ts), and a manifest with its sha256.
//
// bench-llama (buildBenchLlama) is the same recipe, large enough that one token takes several
// milliseconds on one thread; the LLM benchmark builds it on demand, tests never do.
import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import type { LlmGoldenFile } from "../../../src/lifecycle/text-golden.js";
import { formatJson } from "../artifacts.js";
import {
  buildLlamaGguf,
  detokenize,
  greedyReference,
  type LlamaSpec,
  tokenizeWords,
} from "../llama-model.js";

/** ChatML, with the control tokens <|im_start|> and <|im_end|> of the vocabulary. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export const WORDS = (
  "the a an and or but if then so of to in on at by for with from into over under about " +
  "model port server token stream queue thread core byte file weight layer answer question " +
  "hello world time day night light dark fast slow small large first last next one two three " +
  "red green blue cat dog bird tree river stone cloud rain snow wind sun moon star sea road " +
  "is are was be has have do does can will may must not no yes all some many few more most " +
  "run read write send wait stop start load serve check build test make take give find keep"
).split(" ");

export const TINY_LLAMA: LlamaSpec = {
  name: "tiny-llama",
  seed: 20261129,
  words: WORDS,
  embd: 32,
  heads: 4,
  kvHeads: 2,
  ff: 64,
  layers: 2,
  // Room for answers of thousands of tokens, so tests can hold a sequence busy for a while.
  contextLength: 8192,
  chatTemplate: CHATML_TEMPLATE,
  weightScale: 0.35,
};

/** Larger: ~5 ms a token on one thread of a 2-core VM (docs/PERFORMANCE.md). */
export const BENCH_LLAMA: LlamaSpec = {
  ...TINY_LLAMA,
  name: "bench-llama",
  seed: 4242,
  embd: 512,
  heads: 8,
  kvHeads: 8,
  ff: 1536,
  layers: 8,
  contextLength: 2048,
  weightScale: 0.05,
};

/** A completion prompt; the leading space makes "the" one piece (see tokenizeWords). */
export const TINY_LLAMA_GOLDEN_PROMPT = " the model will serve";
const GOLDEN_TOKENS = 12;
/** Smallest top-1 over top-2 logit gap accepted for a golden token: far above float32 rounding. */
const MIN_MARGIN = 1e-3;

export interface LlamaArtifact {
  name: string;
  gguf: Buffer;
  golden?: LlmGoldenFile;
  description: string;
}

/** tiny-llama with its golden file. @throws Error if a golden token is too close to call. */
export function buildTinyLlama(): LlamaArtifact {
  const { gguf, weights } = buildLlamaGguf(TINY_LLAMA);
  const prompt = tokenizeWords(weights.vocab, TINY_LLAMA_GOLDEN_PROMPT);
  const steps = greedyReference(TINY_LLAMA, weights, prompt, GOLDEN_TOKENS);
  const close = steps.find((s) => s.margin < MIN_MARGIN);
  if (close)
    throw new Error(
      `tiny-llama: golden token ${close.token} wins by only ${close.margin}; pick another seed`,
    );
  return {
    name: TINY_LLAMA.name,
    gguf,
    description:
      "A 2-layer llama-architecture model with random weights and a 617-piece vocabulary (word salad, fast), for tests and examples.",
    golden: {
      description: `Greedy continuation computed by the float64 reference forward pass (examples/build/llama-model.ts).`,
      prompt: TINY_LLAMA_GOLDEN_PROMPT,
      max_tokens: GOLDEN_TOKENS,
      text: detokenize(
        weights.vocab,
        steps.map((s) => s.token),
      ),
    },
  };
}

/** bench-llama, without a golden file (its reference pass would take minutes). */
export function buildBenchLlama(): LlamaArtifact {
  return {
    name: BENCH_LLAMA.name,
    gguf: buildLlamaGguf(BENCH_LLAMA).gguf,
    description: "An 8-layer, 512-wide llama-architecture model with random weights, for benchmarks.",
  };
}

/** Writes NAME.gguf, NAME.golden.json (when there is one) and NAME.manifest.json; returns the manifest. */
export async function writeLlamaArtifact(
  outDir: string,
  a: LlamaArtifact,
): Promise<{ name: string; file: string; sha256: string; bytes: number }> {
  const file = `${a.name}.gguf`;
  const manifest = {
    name: a.name,
    file,
    sha256: createHash("sha256").update(a.gguf).digest("hex"),
    bytes: a.gguf.byteLength,
    backend: "llama-cpp",
    description: a.description,
    ...(a.golden ? { golden: `${a.name}.golden.json` } : {}),
  };
  await writeFile(path.join(outDir, file), a.gguf);
  if (a.golden) await writeFile(path.join(outDir, `${a.name}.golden.json`), `${formatJson(a.golden)}\n`);
  await writeFile(path.join(outDir, `${a.name}.manifest.json`), `${formatJson(manifest)}\n`);
  return manifest;
}
