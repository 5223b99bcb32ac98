// The grammars a llama-cpp model generates structured answers under (src/llm/structured-output.ts
// plans them): node-llama-cpp turns a JSON Schema into GBNF, and the number rules are narrowed
// here so every number parses to a finite value that keeps its digits (node-llama-cpp allows
// 16-digit exponents, which JSON.parse reads as Infinity, and "integers" with exponents).
// Built once per schema and kept, a bounded number of them.
import type { Llama, LlamaGrammar } from "node-llama-cpp";
import { ModelportError } from "../../errors.js";

const MAX_GRAMMARS = 64;

/** Integers within ±(10^15 − 1), exact in a double; other numbers with at most a 2-digit exponent. */
const NUMBER_RULES: Record<string, string> = {
  "integer-number-rule": '"-"? ("0" | [1-9] [0-9]{0,14})',
  "fractional-number-rule": '"-"? ("0" | [1-9] [0-9]{0,14}) ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})?',
};

/** `gbnf` with node-llama-cpp's number rules narrowed. */
export function boundedNumbers(gbnf: string): string {
  return gbnf
    .split("\n")
    .map((line) => {
      const name = line.slice(0, line.indexOf(" ::= "));
      const rule = NUMBER_RULES[name];
      return rule === undefined ? line : `${name} ::= ${rule}`;
    })
    .join("\n");
}

export class Grammars {
  private readonly cache = new Map<string, Promise<LlamaGrammar>>();

  constructor(private readonly llama: Llama) {}

  /**
   * The grammar for `schema` (a schema of the subset json-schema-subset.ts produces).
   * @throws ModelportError MP_ERR_REQUEST_INVALID (with `param`) when llama.cpp cannot build it.
   */
  async for(schema: Record<string, unknown>, param: string): Promise<LlamaGrammar> {
    const key = JSON.stringify(schema);
    let grammar = this.cache.get(key);
    if (!grammar) {
      grammar = this.build(schema);
      grammar.catch(() => this.cache.delete(key));
      this.cache.set(key, grammar);
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

  private async build(schema: Record<string, unknown>): Promise<LlamaGrammar> {
    const base = await this.llama.createGrammarForJsonSchema(
      schema as Parameters<Llama["createGrammarForJsonSchema"]>[0],
    );
    return this.llama.createGrammar({
      grammar: boundedNumbers(base.grammar),
      stopGenerationTriggers: base.stopGenerationTriggers,
      trimWhitespaceSuffix: base.trimWhitespaceSuffix,
      rootRuleName: base.rootRuleName,
    });
  }
}
