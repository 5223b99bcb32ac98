// bpe-llama and sparse-llama: tiny-llama's recipe (2 layers, 32 wide, random weights, ChatML) on
// byte-level BPE vocabularies as GPT-2 and Llama 3 have them (examples/build/bpe-vocabulary.ts),
// so structured output and tool calls are tested on more than one kind of tokenizer. In
// sparse-llama `{`, `}` and `"` have no token of their own: they exist only inside longer
// tokens (`{"`, `":`, `"}`…), so a grammar can reach states no token continues. Built by the
// tests and the structured-output benchmark, without golden files (their text is not checked;
// tiny-llama's golden check covers the forward pass).
import type { LlamaSpec } from "../llama-model.js";
import { buildLlamaGguf } from "../llama-model.js";
import { type LlamaArtifact, TINY_LLAMA } from "./tiny-llama.js";

export const BPE_LLAMA: LlamaSpec = {
  ...TINY_LLAMA,
  name: "bpe-llama",
  seed: 7331,
  tokenizer: { kind: "bpe" },
};

export const SPARSE_LLAMA: LlamaSpec = {
  ...TINY_LLAMA,
  name: "sparse-llama",
  seed: 9113,
  tokenizer: { kind: "bpe", withoutSingle: '{}"' },
};

function artifact(spec: LlamaSpec, description: string): LlamaArtifact {
  return { name: spec.name, gguf: buildLlamaGguf(spec).gguf, description };
}

/** The byte-level BPE test models (no golden files). */
export function buildBpeLlamas(): LlamaArtifact[] {
  return [
    artifact(
      BPE_LLAMA,
      "tiny-llama's recipe on a byte-level BPE vocabulary (GPT-2's byte-to-unicode map, merges), for tests.",
    ),
    artifact(
      SPARSE_LLAMA,
      "tiny-llama's recipe on a byte-level BPE vocabulary where `{`, `}` and `\"` exist only inside longer tokens, for tests.",
    ),
  ];
}
