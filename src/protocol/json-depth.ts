// A nesting-depth check for JSON text, run before any parser or recursive code sees it, so a
// deeply nested body is a 400 and not a stack overflow.

/** The characters that change depth or start a string; everything between them is skipped natively. */
const STRUCTURAL = /[[\]{}"]/g;

/**
 * True when arrays and objects in `text` nest deeper than `max`. Jumps from one bracket or quote
 * to the next (a regex search and indexOf, not a loop over every character: numbers are most of a
 * tensor body), skipping string contents; no allocation. Not a validator: malformed JSON is left
 * to JSON.parse.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  // Nesting deeper than `max` needs more than `max` opening brackets: most bodies (rows of
  // numbers) have far fewer, counted by native searches.
  if (text.length <= max || openings(text, max) <= max) return false;
  const re = STRUCTURAL;
  re.lastIndex = 0;
  let depth = 0;
  // test() with the g flag moves lastIndex past each match without building a match array.
  while (re.test(text)) {
    const i = re.lastIndex - 1;
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const end = closingQuote(text, i);
      if (end < 0) return false; // an unterminated string: nothing after it counts
      re.lastIndex = end + 1;
    } else if (c === 0x5b || c === 0x7b) {
      // [ {
      if (++depth > max) return true;
    } else depth--; // ] }
  }
  return false;
}

/** Opening brackets in `text`, counted up to just past `max` (quoted ones too: an upper bound). */
function openings(text: string, max: number): number {
  let n = 0;
  for (let i = text.indexOf("["); i >= 0 && n <= max; i = text.indexOf("[", i + 1)) n++;
  for (let i = text.indexOf("{"); i >= 0 && n <= max; i = text.indexOf("{", i + 1)) n++;
  return n;
}

/** The index of the quote that closes the string opened at `open` (one preceded by an even run of backslashes), or -1. */
function closingQuote(text: string, open: number): number {
  for (let j = text.indexOf('"', open + 1); j >= 0; j = text.indexOf('"', j + 1)) {
    let slashes = 0;
    for (let k = j - 1; k > open && text.charCodeAt(k) === 0x5c; k--) slashes++;
    if ((slashes & 1) === 0) return j;
  }
  return -1;
}
