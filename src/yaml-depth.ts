// The nesting depth of a YAML text (a config file, a key file), measured on yaml's concrete
// syntax tree (built without recursion) before the text is composed into values: yaml's composer
// recurses once per level, and a file nested thousands deep overflows the stack there, or worse,
// ends the process (V8 cannot compile a regular expression near the stack's end).
import { type CST, Parser } from "yaml";

/** Deepest nesting of collections a config or key file may have; real ones nest under ten. */
export const MAX_CONFIG_DEPTH = 64;

/**
 * True when collections (block or flow, keys included) in `text` nest deeper than `max`. yaml's
 * parser recurses once per level only when many block levels close at once; a stack overflow
 * there (it uses no regular expressions) is caught and counts as too deep.
 */
export function yamlDepthExceeds(text: string, max: number): boolean {
  // Nesting deeper than `max` takes more than `max` characters.
  if (text.length <= max) return false;
  let tokens: CST.Token[];
  try {
    tokens = [...new Parser().parse(text)];
  } catch (err) {
    if (err instanceof RangeError) return true;
    throw err;
  }
  const stack: [CST.Token, number][] = [];
  for (const token of tokens) {
    if (token.type === "document" && token.value) stack.push([token.value, 0]);
    while (stack.length > 0) {
      const [t, depth] = stack.pop()!;
      if (t.type !== "block-map" && t.type !== "block-seq" && t.type !== "flow-collection") continue;
      if (depth + 1 > max) return true;
      for (const item of t.items) {
        if ("key" in item && item.key) stack.push([item.key, depth + 1]);
        if (item.value) stack.push([item.value, depth + 1]);
      }
    }
  }
  return false;
}
