// GBNF, llama.cpp's grammar notation, written from TypeScript: literals and character classes
// escaped so any text survives, and a record of the characters each grammar may need the model
// to write alone. That record lets the engine check a grammar against a model's vocabulary
// before generating under it: a grammar that needs a character no single token writes can
// reach a point where no token continues it, and llama.cpp fails the generation there
// (docs/LLM.md#structured-output).

/** Ranges of code points, inclusive; `negated`: every character outside them. */
export interface CharClass {
  readonly ranges: readonly (readonly [number, number])[];
  readonly negated: boolean;
}

/** A code point as GBNF writes it inside a literal or a class. */
function escapeCodePoint(cp: number, inClass: boolean): string {
  const ch = String.fromCodePoint(cp);
  const plain = /[A-Za-z0-9 ]/.test(ch) || (!inClass && /[!#$%&'()*+,./:;<=>?@[\]^_`{|}~-]/.test(ch));
  if (plain) return ch;
  if (cp < 0x80) return `\\x${cp.toString(16).padStart(2, "0")}`;
  if (cp <= 0xffff) return `\\u${cp.toString(16).padStart(4, "0")}`;
  return `\\U${cp.toString(16).padStart(8, "0")}`;
}

/** `text` as a GBNF literal. */
export function literal(text: string): string {
  let out = '"';
  for (const ch of text) out += escapeCodePoint(ch.codePointAt(0)!, false);
  return `${out}"`;
}

/** `cls` as a GBNF character class. @throws Error for an empty class (it would match nothing). */
export function charClass(cls: CharClass): string {
  if (cls.ranges.length === 0 && !cls.negated) throw new Error("an empty character class");
  let out = cls.negated ? "[^" : "[";
  for (const [lo, hi] of cls.ranges)
    out +=
      lo === hi ? escapeCodePoint(lo, true) : `${escapeCodePoint(lo, true)}-${escapeCodePoint(hi, true)}`;
  return `${out}]`;
}

/** Whether `cp` is in `cls`. */
export function inClass(cls: CharClass, cp: number): boolean {
  const hit = cls.ranges.some(([lo, hi]) => cp >= lo && cp <= hi);
  return cls.negated ? !hit : hit;
}

/** `item` repeated min…max times (max undefined: no bound) with `sep` between, as GBNF. */
export function repetition(item: string, min: number, max: number | undefined, sep?: string): string {
  if (max === 0) return "";
  if (!sep) {
    if (max === undefined) return min === 0 ? `${item}*` : min === 1 ? `${item}+` : `${item}{${min},}`;
    if (min === 0 && max === 1) return `${item}?`;
    return min === max ? `${item}{${min}}` : `${item}{${min},${max}}`;
  }
  const rest = repetition(
    `( ${sep} ${item} )`,
    Math.max(0, min - 1),
    max === undefined ? undefined : max - 1,
  );
  const one = rest ? `${item} ${rest}` : item;
  return min === 0 ? `( ${one} )?` : one;
}

/**
 * What a grammar needs a model to write: each literal's characters, and for each class one
 * character of it. Classes are checked by membership, so a class with any writable member is
 * enough.
 */
export class Needs {
  readonly chars = new Set<string>();
  readonly classes: CharClass[] = [];
  text(text: string): void {
    for (const ch of text) this.chars.add(ch);
  }
  cls(cls: CharClass): void {
    this.classes.push(cls);
  }
  /** The needs no token of `writable` (a set of single characters) meets; ASCII only, others assumed writable. */
  unmet(writable: ReadonlySet<string>): string[] {
    const out = [...this.chars].filter((c) => c.codePointAt(0)! < 0x80 && !writable.has(c));
    for (const cls of this.classes) {
      let ok = false;
      let ascii = false;
      for (let cp = 0; cp < 0x80 && !ok; cp++) {
        if (!inClass(cls, cp)) continue;
        ascii = true;
        ok = writable.has(String.fromCharCode(cp));
      }
      if (ascii && !ok) out.push(charClass(cls));
    }
    return [...new Set(out)];
  }
}
