// A JSON Schema `pattern` (an ECMAScript regular expression) as a grammar for the JSON string
// that holds a match, so a string keeps to its pattern while it is generated. The subset is
// what schemas use: literals and escapes, `.`, classes with ranges and \d \w \s, groups (plain,
// non-capturing, named), alternation, the quantifiers * + ? {n} {n,} {n,m} (lazy ones too: the
// set of matches is the same), and ^ / $ at the ends (without one, anything may come before or
// after, as JSON Schema's patterns search). Lookarounds, backreferences, word boundaries and
// Unicode property escapes cannot be written as a grammar: they are refused by name.
import { type CharClass, charClass, literal, type Needs } from "./gbnf.js";

/** A pattern feature no grammar can hold; `feature` names it. */
export class UnsupportedPattern extends Error {
  constructor(readonly feature: string) {
    super(feature);
    this.name = "UnsupportedPattern";
  }
}

/** The most repetitions a quantifier may ask for (each one is a grammar rule). */
const MAX_REPEAT = 1000;

type Node =
  | { kind: "chars"; cls: CharClass }
  | { kind: "seq"; items: Node[] }
  | { kind: "alt"; options: Node[] }
  | { kind: "repeat"; item: Node; min: number; max: number | undefined };

const range = (lo: number, hi: number): [number, number] => [lo, hi];
const DIGIT: [number, number][] = [range(48, 57)];
const WORD: [number, number][] = [range(48, 57), range(65, 90), range(95, 95), range(97, 122)];
const SPACE: [number, number][] = [range(9, 13), range(32, 32), range(0xa0, 0xa0), range(0x2028, 0x2029)];
/** `.`: anything but line terminators. */
const DOT: CharClass = { ranges: [range(10, 10), range(13, 13), range(0x2028, 0x2029)], negated: true };

class Parser {
  private i = 0;
  constructor(private readonly src: string) {}

  parse(): { node: Node; start: boolean; end: boolean } {
    const start = this.src.startsWith("^");
    if (start) this.i = 1;
    const node = this.alternation();
    let end = false;
    if (this.src[this.i] === "$" && this.i === this.src.length - 1) {
      end = true;
      this.i++;
    }
    if (this.i < this.src.length) throw new UnsupportedPattern(`'${this.src[this.i]}' at ${this.i}`);
    return { node, start, end };
  }

  private alternation(): Node {
    const options = [this.sequence()];
    while (this.src[this.i] === "|") {
      this.i++;
      options.push(this.sequence());
    }
    return options.length === 1 ? options[0]! : { kind: "alt", options };
  }

  private sequence(): Node {
    const items: Node[] = [];
    while (this.i < this.src.length) {
      const c = this.src[this.i]!;
      if (c === "|" || c === ")") break;
      if (c === "$" && this.i === this.src.length - 1) break;
      if (c === "^" || c === "$") throw new UnsupportedPattern(`an anchor '${c}' inside the pattern`);
      items.push(this.quantified(this.atom()));
    }
    return items.length === 1 ? items[0]! : { kind: "seq", items };
  }

  private quantified(item: Node): Node {
    const c = this.src[this.i];
    let min: number;
    let max: number | undefined;
    if (c === "*" || c === "+" || c === "?") {
      this.i++;
      [min, max] = c === "*" ? [0, undefined] : c === "+" ? [1, undefined] : [0, 1];
    } else if (c === "{" && /^\{\d+(,\d*)?\}/.test(this.src.slice(this.i))) {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.i))!;
      this.i += m[0].length;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === "" ? undefined : Number(m[3]);
      if (max !== undefined && max < min) throw new UnsupportedPattern(`the quantifier ${m[0]}`);
      if (min > MAX_REPEAT || (max ?? 0) > MAX_REPEAT)
        throw new UnsupportedPattern(`the quantifier ${m[0]} (at most ${MAX_REPEAT})`);
    } else return item;
    if (this.src[this.i] === "?") this.i++; // lazy: the same matches
    if (this.src[this.i] === "+" || this.src[this.i] === "*" || this.src[this.i] === "{")
      throw new UnsupportedPattern(`a quantifier after a quantifier at ${this.i}`);
    return { kind: "repeat", item, min, max };
  }

  private atom(): Node {
    const c = this.src[this.i]!;
    if (c === "(") {
      this.i++;
      if (this.src[this.i] === "?") {
        const head = this.src.slice(this.i, this.i + 3);
        if (head.startsWith("?:")) this.i += 2;
        else if (head.startsWith("?<") && head !== "?<=" && head !== "?<!") {
          const close = this.src.indexOf(">", this.i);
          if (close < 0) throw new UnsupportedPattern("an unclosed group name");
          this.i = close + 1;
        } else throw new UnsupportedPattern(`the group '(${head}' (lookaround)`);
      }
      const inner = this.alternation();
      if (this.src[this.i] !== ")") throw new UnsupportedPattern("an unclosed group");
      this.i++;
      return inner;
    }
    if (c === "[") return { kind: "chars", cls: this.bracket() };
    if (c === ".") {
      this.i++;
      return { kind: "chars", cls: DOT };
    }
    if (c === "\\") return { kind: "chars", cls: this.escape(false) };
    if (c === "*" || c === "+" || c === "?" || c === ")") throw new UnsupportedPattern(`'${c}' at ${this.i}`);
    const cp = this.src.codePointAt(this.i)!;
    this.i += cp > 0xffff ? 2 : 1;
    return { kind: "chars", cls: { ranges: [range(cp, cp)], negated: false } };
  }

  /** After a backslash: one character, or a class for \d \w \s (\D \W \S negated outside brackets). */
  private escape(inBracket: boolean): CharClass {
    this.i++;
    const c = this.src[this.i];
    if (c === undefined) throw new UnsupportedPattern("a trailing backslash");
    this.i++;
    const one = (cp: number): CharClass => ({ ranges: [range(cp, cp)], negated: false });
    switch (c) {
      case "d":
        return { ranges: DIGIT, negated: false };
      case "w":
        return { ranges: WORD, negated: false };
      case "s":
        return { ranges: SPACE, negated: false };
      case "D":
      case "W":
      case "S":
        if (inBracket) throw new UnsupportedPattern(`\\${c} inside a class`);
        return { ranges: c === "D" ? DIGIT : c === "W" ? WORD : SPACE, negated: true };
      case "n":
        return one(10);
      case "t":
        return one(9);
      case "r":
        return one(13);
      case "f":
        return one(12);
      case "v":
        return one(11);
      case "0":
        return one(0);
      case "x": {
        const hex = /^[0-9a-fA-F]{2}/.exec(this.src.slice(this.i));
        if (!hex) throw new UnsupportedPattern("a malformed \\x escape");
        this.i += 2;
        return one(Number.parseInt(hex[0], 16));
      }
      case "u": {
        const hex = /^([0-9a-fA-F]{4}|\{[0-9a-fA-F]{1,6}\})/.exec(this.src.slice(this.i));
        if (!hex) throw new UnsupportedPattern("a malformed \\u escape");
        this.i += hex[0].length;
        return one(Number.parseInt(hex[0].replace(/[{}]/g, ""), 16));
      }
      case "b":
        if (inBracket) return one(8);
        throw new UnsupportedPattern("a word boundary \\b");
      case "B":
        throw new UnsupportedPattern("\\B");
      case "p":
      case "P":
        throw new UnsupportedPattern(`a Unicode property escape \\${c}`);
      case "k":
        throw new UnsupportedPattern("a named backreference \\k");
      default:
        if (/[1-9]/.test(c)) throw new UnsupportedPattern(`a backreference \\${c}`);
        if (/[A-Za-z]/.test(c)) throw new UnsupportedPattern(`the escape \\${c}`);
        return one(c.codePointAt(0)!);
    }
  }

  private bracket(): CharClass {
    this.i++;
    const negated = this.src[this.i] === "^";
    if (negated) this.i++;
    const ranges: [number, number][] = [];
    let first = true;
    while (this.i < this.src.length && (this.src[this.i] !== "]" || first)) {
      first = false;
      const lo = this.classAtom();
      if (lo.ranges.length !== 1 || lo.ranges[0]![0] !== lo.ranges[0]![1]) {
        ranges.push(...(lo.ranges as [number, number][]));
        continue;
      }
      const from = lo.ranges[0]![0];
      if (this.src[this.i] === "-" && this.src[this.i + 1] !== "]" && this.i + 1 < this.src.length) {
        this.i++;
        const hi = this.classAtom();
        if (hi.ranges.length !== 1 || hi.ranges[0]![0] !== hi.ranges[0]![1])
          throw new UnsupportedPattern("a class range ending in a class escape");
        const to = hi.ranges[0]![0];
        if (to < from) throw new UnsupportedPattern("a class range out of order");
        ranges.push(range(from, to));
      } else ranges.push(range(from, from));
    }
    if (this.src[this.i] !== "]") throw new UnsupportedPattern("an unclosed class");
    this.i++;
    return { ranges, negated };
  }

  private classAtom(): CharClass {
    if (this.src[this.i] === "\\") return this.escape(true);
    if (this.src.startsWith("[:", this.i)) throw new UnsupportedPattern("a POSIX class");
    const cp = this.src.codePointAt(this.i)!;
    this.i += cp > 0xffff ? 2 : 1;
    return { ranges: [range(cp, cp)], negated: false };
  }
}

/** What a JSON string must not hold as itself: the quote, the backslash, control characters. */
const UNWRITABLE: [number, number][] = [range(0, 0x1f), range(0x22, 0x22), range(0x5c, 0x5c)];
const ESCAPES: Record<number, string> = {
  34: '\\"',
  92: "\\\\",
  10: "\\n",
  9: "\\t",
  13: "\\r",
  12: "\\f",
  8: "\\b",
};

function contains(cls: CharClass, cp: number): boolean {
  const hit = cls.ranges.some(([lo, hi]) => cp >= lo && cp <= hi);
  return cls.negated ? !hit : hit;
}

/** `ranges` minus `cut`, both sorted or not. */
function subtract(
  ranges: readonly (readonly [number, number])[],
  cut: readonly [number, number][],
): [number, number][] {
  let out: [number, number][] = ranges.map(([a, b]) => [a, b]);
  for (const [c0, c1] of cut) {
    const next: [number, number][] = [];
    for (const [a, b] of out) {
      if (b < c0 || a > c1) next.push([a, b]);
      else {
        if (a < c0) next.push([a, c0 - 1]);
        if (b > c1) next.push([c1 + 1, b]);
      }
    }
    out = next;
  }
  return out;
}

/** One character of `cls` as JSON writes it inside a string. */
function jsonChar(cls: CharClass, needs: Needs): string {
  const alts: string[] = [];
  const plain: CharClass = cls.negated
    ? { ranges: [...cls.ranges, ...UNWRITABLE], negated: true }
    : { ranges: subtract(cls.ranges, UNWRITABLE), negated: false };
  if (plain.negated || plain.ranges.length > 0) {
    alts.push(charClass(plain));
    needs.cls(plain);
  }
  for (const [cp, text] of Object.entries(ESCAPES)) {
    if (!contains(cls, Number(cp))) continue;
    alts.push(literal(text));
  }
  if (alts.length === 0) throw new UnsupportedPattern("a character JSON cannot hold unescaped");
  return alts.length === 1 ? alts[0]! : `( ${alts.join(" | ")} )`;
}

function emit(node: Node, needs: Needs): string {
  switch (node.kind) {
    case "chars": {
      const [only] = node.cls.ranges;
      if (
        !node.cls.negated &&
        node.cls.ranges.length === 1 &&
        only![0] === only![1] &&
        ESCAPES[only![0]] === undefined &&
        only![0] >= 0x20
      ) {
        const ch = String.fromCodePoint(only![0]);
        needs.text(ch);
        return literal(ch);
      }
      return jsonChar(node.cls, needs);
    }
    case "seq":
      return node.items.length === 0 ? '""' : node.items.map((n) => emit(n, needs)).join(" ");
    case "alt":
      return `( ${node.options.map((n) => emit(n, needs)).join(" | ")} )`;
    case "repeat": {
      const item = `( ${emit(node.item, needs)} )`;
      const { min, max } = node;
      if (max === undefined) return min === 0 ? `${item}*` : min === 1 ? `${item}+` : `${item}{${min},}`;
      if (min === 0 && max === 1) return `${item}?`;
      return min === max ? `${item}{${min}}` : `${item}{${min},${max}}`;
    }
  }
}

/**
 * The GBNF of a JSON string (quotes included) whose value matches `pattern`; `anyChar` is the
 * rule of one JSON string character, for what an unanchored end allows.
 * @throws UnsupportedPattern naming a feature a grammar cannot hold.
 */
export function patternGrammar(pattern: string, anyChar: string, needs: Needs): string {
  try {
    new RegExp(pattern, "u");
  } catch (err) {
    throw new UnsupportedPattern(`an invalid regular expression (${(err as Error).message})`);
  }
  const { node, start, end } = new Parser(pattern).parse();
  const body = emit(node, needs);
  return ['"\\""', start ? "" : `${anyChar}*`, `( ${body} )`, end ? "" : `${anyChar}*`, '"\\""']
    .filter(Boolean)
    .join(" ");
}
