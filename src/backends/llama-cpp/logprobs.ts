// Log probabilities of the tokens a generation produced (OpenAI's logprobs and top_logprobs), by
// scoring them once the generation ended: the sequence is rewound to just before the answer and
// the answer's tokens are evaluated again in batches, each step returning the model's whole
// next-token distribution (node-llama-cpp's controlledEvaluate). So the figures are the model's
// own distribution (temperature 1, before penalties, bias and grammar), as in OpenAI's API, and
// cost one batched pass over the answer, paid only by requests that ask for them.
import type { LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import type { TokenLogprob } from "../../llm/language-model.js";

/** Tokens scored per evaluation batch (each step's distribution is read, then dropped). */
const CHUNK = 32;
/** OpenAI's figure for a probability too small to show. */
const FLOOR = -9999;

/**
 * The log probability of each of `generated` after `prompt` (the sequence's tokens before the
 * answer, BOS included) and the `top` likeliest alternatives at each step; the sequence is left
 * holding the prompt and the answer's tokens but the last.
 */
export async function scoreTokens(
  model: LlamaModel,
  sequence: LlamaContextSequence,
  prompt: readonly Token[],
  generated: readonly Token[],
  top: number,
): Promise<TokenLogprob[]> {
  if (generated.length === 0 || prompt.length === 0) return [];
  await sequence.eraseContextTokenRanges([{ start: prompt.length - 1, end: sequence.nextTokenIndex }]);
  const inputs = [prompt[prompt.length - 1]!, ...generated.slice(0, -1)];
  const context = [...prompt.slice(-4)];
  const out: TokenLogprob[] = [];
  for (let at = 0; at < inputs.length; at += CHUNK) {
    const chunk = inputs.slice(at, at + CHUNK);
    const results = await sequence.controlledEvaluate(
      chunk.map((t) => [t, { generateNext: { probabilities: true } }] as const),
    );
    chunk.forEach((_, i) => {
      const token = generated[at + i]!;
      const probabilities = results[i]?.next.probabilities ?? new Map<Token, number>();
      const entry = describe(model, token, probabilities.get(token), context);
      const alternatives: TokenLogprob["top"][number][] = [];
      // The distribution comes likeliest first.
      for (const [t, p] of probabilities) {
        if (alternatives.length >= top) break;
        alternatives.push(describe(model, t, p, context));
      }
      out.push({ ...entry, top: alternatives });
      context.push(token);
      if (context.length > 4) context.shift();
    });
  }
  return out;
}

function describe(
  model: LlamaModel,
  token: Token,
  probability: number | undefined,
  context: readonly Token[],
): { token: string; logprob: number; bytes: number[] } {
  const text = model.detokenize([token], false, [...context]);
  return {
    token: text,
    logprob: probability && probability > 0 ? Math.max(FLOOR, Math.log(probability)) : FLOOR,
    bytes: [...Buffer.from(text, "utf8")],
  };
}

/** The entries whose text lies within the answer's first `length` characters (a stop string cut the rest). */
export function withinText(logprobs: readonly TokenLogprob[], length: number): TokenLogprob[] {
  const out: TokenLogprob[] = [];
  let chars = 0;
  for (const l of logprobs) {
    if (chars >= length) break;
    out.push(l);
    chars += l.token.length;
  }
  return out;
}
