// Whether a GBNF grammar can be used: every rule must be able to finish, and none may refer to
// itself before writing anything (llama.cpp refuses left recursion). Pure: rule bodies in, a
// reason (or undefined) out; schema-grammar.ts asks it about each grammar it builds.

/**
 * Why the grammar could not be used: a rule that can never finish (a recursion with no way
 * out: no finite value satisfies the schema), or one that refers to itself before writing
 * anything (llama.cpp refuses left recursion). Undefined when it can.
 */
export function grammarProblem(rules: ReadonlyMap<string, string>): string | undefined {
  type Item = { kind: "t" } | { kind: "ref"; name: string } | { kind: "group"; alts: Item[][]; min: number };
  const parseBody = (text: string): Item[][] => {
    let i = 0;
    const alts = (): Item[][] => {
      const out: Item[][] = [[]];
      while (i < text.length) {
        const c = text[i]!;
        if (c === " ") i++;
        else if (c === "|") {
          i++;
          out.push([]);
        } else if (c === ")") break;
        else {
          let item: Item;
          if (c === '"') {
            i++;
            while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
            i++;
            item = { kind: "t" };
          } else if (c === "[") {
            i++;
            while (text[i] !== "]") i += text[i] === "\\" ? 2 : 1;
            i++;
            item = { kind: "t" };
          } else if (c === "(") {
            i++;
            const inner = alts();
            i++;
            item = { kind: "group", alts: inner, min: 1 };
          } else {
            const m = /^[a-zA-Z0-9-]+/.exec(text.slice(i))!;
            i += m[0].length;
            item = { kind: "ref", name: m[0] };
          }
          const q = /^(\?|\*|\+|\{(\d+)(,\d*)?\})/.exec(text.slice(i));
          if (q) {
            i += q[0].length;
            const min = q[0] === "?" || q[0] === "*" ? 0 : q[0] === "+" ? 1 : Number(q[2]);
            item = { kind: "group", alts: [[item]], min };
          }
          out.at(-1)!.push(item);
        }
      }
      return out;
    };
    return alts();
  };
  const parsed = new Map([...rules].map(([name, body]) => [name, parseBody(body)]));
  /**
   * The rules for which `holds` is true, by fixed point: a terminal counts as `terminal`, a
   * reference as its rule, and a group as true when it may repeat zero times or one of its
   * alternatives holds throughout. @returns the set and the item predicate over it.
   */
  const fixedPoint = (terminal: boolean) => {
    const set = new Set<string>();
    const holds = (item: Item): boolean =>
      item.kind === "t"
        ? terminal
        : item.kind === "ref"
          ? set.has(item.name)
          : item.min === 0 || item.alts.some((seq) => seq.every(holds));
    for (let changed = true; changed; ) {
      changed = false;
      for (const [name, alts] of parsed)
        if (!set.has(name) && alts.some((seq) => seq.every(holds))) {
          set.add(name);
          changed = true;
        }
    }
    return { set, holds };
  };
  // Rules that can finish (derive a finite text).
  if (!fixedPoint(true).set.has("root"))
    return "a recursion with no way out (no finite value satisfies the schema)";
  // Rules that can write nothing; then the rules each can start with.
  const nothing = fixedPoint(false).holds;
  const starts = new Map<string, Set<string>>();
  const collect = (seq: Item[], out: Set<string>) => {
    for (const item of seq) {
      if (item.kind === "ref") out.add(item.name);
      else if (item.kind === "group") for (const inner of item.alts) collect(inner, out);
      if (!nothing(item)) break;
    }
  };
  for (const [name, alts] of parsed) {
    const out = new Set<string>();
    for (const seq of alts) collect(seq, out);
    starts.set(name, out);
  }
  const state = new Map<string, 1 | 2>();
  const cyclic = (name: string): boolean => {
    if (state.get(name) === 2) return false;
    if (state.get(name) === 1) return true;
    state.set(name, 1);
    for (const next of starts.get(name) ?? []) if (cyclic(next)) return true;
    state.set(name, 2);
    return false;
  };
  for (const name of parsed.keys())
    if (cyclic(name)) return "a reference that comes back to itself before writing anything (left recursion)";
  return undefined;
}
