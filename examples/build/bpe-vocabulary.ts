// Byte-level BPE vocabularies as GPT-2 and Llama 3 write theirs into GGUF files
// (tokenizer.ggml.model "gpt2"): every byte is a character of GPT-2's byte-to-unicode map (a
// space is "Ġ", a newline "Ċ"), tokens are strings of those characters, and a merge list says
// how neighbouring symbols join. Test models built on them show that structured output does not
// depend on the SentencePiece vocabulary the other test models have: JSON's punctuation comes
// as multi-character tokens ("{\"", "\":", "ĠĠĠ"…) as real vocabularies have them, and a variant
// drops the single-character tokens of some symbols altogether, so `{` and `"` exist only inside
// longer tokens.

/** GPT-2's map from a byte to the printable character that stands for it in tokens and merges. */
export const BYTE_TO_UNICODE: readonly string[] = (() => {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const map: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) map[b] = String.fromCodePoint(printable.includes(b) ? b : 256 + extra++);
  return map;
})();

/** `text` (UTF-8) as byte-level BPE characters: "a b" → "aĠb". */
export function toByteLevel(text: string): string {
  return [...Buffer.from(text, "utf8")].map((b) => BYTE_TO_UNICODE[b]).join("");
}

/** The text that byte-level characters stand for ("ĠĠ{" → "  {"). */
export function fromByteLevel(chars: string): string {
  const back = new Map(BYTE_TO_UNICODE.map((c, b) => [c, b]));
  return Buffer.from([...chars].map((c) => back.get(c) ?? 0x3f)).toString("utf8");
}

/**
 * Multi-character tokens of JSON's punctuation and whitespace, as real byte-level vocabularies
 * hold them (GPT-2's and Llama 3's have each of these): a model can write `{"` or `":` as one
 * token, and indentation as one token.
 */
export const JSON_PIECES: readonly string[] = [
  '{"',
  '":',
  '",',
  '"}',
  '":"',
  '":Ġ"',
  '",Ġ"',
  '"]',
  '["',
  '"],',
  "{}",
  "[]",
  "},",
  "}]",
  "Ġ{",
  'Ġ"',
  "Ġ[",
  "ĠĠ",
  "ĠĠĠ",
  "ĠĠĠĠ",
  "ĊĠĠ",
  "ĊĠĠĠĠ",
  "ĊĊ",
  "true",
  "false",
  "null",
  "00",
  "000",
  "ĠĠĠĠĠĠĠĠ",
  '""',
];

export interface BpeVocabularyOptions {
  /** Characters whose single-character token is left out (they appear only inside longer tokens). */
  withoutSingle?: string;
}

export interface BpeVocabulary {
  /** Tokens in byte-level characters; ids are the indices. */
  tokens: string[];
  /** "left right" pairs, highest priority first. */
  merges: string[];
}

/**
 * `specials` first (ids 0…), then the 256 byte characters (minus `withoutSingle`), then each
 * left prefix of each JSON piece and of "Ġword" for every word, with the merges that build them
 * one character at a time from the left. A prompt may not always tokenize into the longest
 * pieces (merges of the JSON pieces come first and can split a word); generation may use any
 * token, which is what these vocabularies are for.
 */
export function buildBpeVocabulary(
  specials: readonly string[],
  words: readonly string[],
  options: BpeVocabularyOptions = {},
): BpeVocabulary {
  const missing = new Set([...(options.withoutSingle ?? "")].map((c) => toByteLevel(c)));
  const tokens: string[] = [...specials];
  const seen = new Set(tokens);
  const merges: string[] = [];
  const add = (t: string) => {
    if (seen.has(t)) return false;
    seen.add(t);
    tokens.push(t);
    return true;
  };
  for (const c of BYTE_TO_UNICODE) if (!missing.has(c)) add(c);
  const pieces = [...JSON_PIECES, ...words.map((w) => `Ġ${toByteLevel(w)}`)];
  const merged = new Set<string>();
  for (const piece of pieces) {
    const chars = [...piece];
    for (let n = 2; n <= chars.length; n++) {
      const left = chars.slice(0, n - 1).join("");
      const merge = `${left} ${chars[n - 1]}`;
      if (!merged.has(merge)) {
        merged.add(merge);
        merges.push(merge);
      }
      add(left + chars[n - 1]);
    }
  }
  return { tokens, merges };
}
