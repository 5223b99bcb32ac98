// A nesting-depth check for JSON text, run before any parser or recursive code sees it, so a
// deeply nested body is a 400 and not a stack overflow.

/**
 * True when arrays and objects in `text` nest deeper than `max`. One pass over the text,
 * skipping string contents; no allocation. Not a validator: malformed JSON is left to JSON.parse.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  // Nesting deeper than `max` needs more than `max` opening brackets.
  if (text.length <= max) return false;
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x5b || c === 0x7b) {
      // [ {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      // ] }
      depth--;
    } else if (c === 0x22) {
      // a string: skip to its closing quote, stepping over escapes
      for (i++; i < n; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c) i++;
        else if (s === 0x22) break;
      }
    }
  }
  return false;
}
