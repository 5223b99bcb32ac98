// The grammars a llama-cpp model generates structured answers under: the GBNF text that
// src/llm/schema-grammar.ts writes from a request's schema, parsed by llama.cpp once and kept
// (a bounded number of them), and the check of a grammar against the model's vocabulary.
import type { Llama, LlamaGrammar, LlamaModel } from "node-llama-cpp";
import { ModelportError } from "../../errors.js";

const MAX_GRAMMARS = 64;

export class Grammars {
  private readonly cache = new Map<string, Promise<LlamaGrammar>>();

  constructor(private readonly llama: Llama) {}

  /**
   * The grammar for `gbnf` (root rule `root`).
   * @throws ModelportError MP_ERR_REQUEST_INVALID (with `param`) when llama.cpp cannot parse it.
   */
  async for(gbnf: string, param: string): Promise<LlamaGrammar> {
    let grammar = this.cache.get(gbnf);
    if (!grammar) {
      grammar = this.llama.createGrammar({ grammar: gbnf });
      grammar.catch(() => this.cache.delete(gbnf));
      this.cache.set(gbnf, grammar);
      if (this.cache.size > MAX_GRAMMARS) this.cache.delete(this.cache.keys().next().value!);
    }
    try {
      return await grammar;
    } catch (err) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `the schema cannot be turned into a grammar: ${(err as Error).message}`,
        { param },
      );
    }
  }
}

/**
 * The ASCII characters `model` can write as one token of their own (a plain token or a byte
 * token). A grammar that needs a character outside this set can reach a point where no token
 * continues it; llama.cpp then fails the generation (and node-llama-cpp leaves the failure
 * unhandled), so such a grammar is not used on this model.
 */
export function writableCharacters(model: LlamaModel): Set<string> {
  const out = new Set<string>();
  // After "a" too: SentencePiece writes a space or a newline alone only after something.
  const before = model.tokenize("a", false, "trimLeadingSpace");
  for (let cp = 9; cp < 127; cp++) {
    const c = String.fromCharCode(cp);
    const alone = model.tokenize(c, false, "trimLeadingSpace");
    if (alone.length === 1 && model.detokenize(alone) === c) {
      out.add(c);
      continue;
    }
    const after = model.tokenize(`a${c}`, false, "trimLeadingSpace");
    const last = after.slice(before.length);
    if (
      last.length === 1 &&
      after.slice(0, before.length).every((t, i) => t === before[i]) &&
      model.detokenize(last, false, before) === c
    )
      out.add(c);
  }
  return out;
}
