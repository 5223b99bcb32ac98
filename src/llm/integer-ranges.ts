// Integer and decimal ranges as grammar rules: a JSON number between two bounds written digit by
// digit, as llama.cpp's JSON-schema grammars do for integers, so `minimum`/`maximum` hold while
// the number is generated instead of being checked afterwards. Numbers stay within ±(10^15 − 1),
// which a double holds exactly.

/** The largest magnitude a generated integer part may have. */
export const INTEGER_LIMIT = 10 ** 15 - 1;

const DIGITS = "[0-9]";

function digits(n: number): string {
  return n === 0 ? "" : n === 1 ? DIGITS : `${DIGITS}{${n}}`;
}

function digitClass(lo: string, hi: string): string {
  return lo === hi ? `"${lo}"` : `[${lo}-${hi}]`;
}

/** Decimal strings of the same length from `x` to `y` (x ≤ y), no sign. */
function sameLength(x: string, y: string): string {
  const n = x.length;
  if (n === 1) return digitClass(x, y);
  if (x[0] === y[0]) return `"${x[0]}" ${sameLength(x.slice(1), y.slice(1))}`;
  const restZeros = /^0*$/.test(x.slice(1));
  const restNines = /^9*$/.test(y.slice(1));
  const alts: string[] = [];
  if (!restZeros) alts.push(`"${x[0]}" ( ${sameLength(x.slice(1), "9".repeat(n - 1))} )`);
  const low = restZeros ? Number(x[0]) : Number(x[0]) + 1;
  const high = restNines ? Number(y[0]) : Number(y[0]) - 1;
  if (low <= high) alts.push(`${digitClass(String(low), String(high))} ${digits(n - 1)}`);
  if (!restNines) alts.push(`"${y[0]}" ( ${sameLength("0".repeat(n - 1), y.slice(1))} )`);
  return alts.length === 1 ? alts[0]! : `( ${alts.join(" | ")} )`;
}

/** Non-negative integers from `a` to `b` (0 ≤ a ≤ b), without leading zeros. */
function nonNegative(a: number, b: number): string {
  const alts: string[] = [];
  for (let len = String(a).length; len <= String(b).length; len++) {
    const lo = Math.max(a, len === 1 ? 0 : 10 ** (len - 1));
    const hi = Math.min(b, 10 ** len - 1);
    if (lo <= hi) alts.push(sameLength(String(lo), String(hi)));
  }
  return alts.length === 1 ? alts[0]! : `( ${alts.join(" | ")} )`;
}

/**
 * GBNF for the integers from `lo` to `hi`, both included and within ±INTEGER_LIMIT; undefined
 * when the range is empty.
 */
export function integerRange(lo: number, hi: number): string | undefined {
  if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || lo > hi) return undefined;
  const alts: string[] = [];
  if (lo < 0) alts.push(`"-" ${nonNegative(Math.max(1, -Math.min(hi, -1)), -lo)}`);
  if (hi >= 0) alts.push(nonNegative(Math.max(lo, 0), hi));
  return alts.length === 1 ? alts[0]! : `( ${alts.join(" | ")} )`;
}

/** The digits after a decimal point. */
const FRACTION = `"." ${DIGITS}{1,15}`;

/**
 * GBNF for JSON numbers from `lo` to `hi` (both included, within ±INTEGER_LIMIT): integers in
 * the range, and decimals whose integer part keeps the whole number inside it. Decimals between
 * two integers next to a fractional bound (0.5 to 0.9) are not all generated; undefined when
 * nothing would be.
 */
export function decimalRange(lo: number, hi: number): string | undefined {
  if (!(lo <= hi)) return undefined;
  const alts: string[] = [];
  const ints = integerRange(Math.ceil(lo), Math.floor(hi));
  if (ints) alts.push(`${ints} ( "." "0"{1,15} )?`);
  // k.f with k ≥ 0: k ≥ lo and k + 1 ≤ hi keep it inside.
  const pos = integerRange(Math.max(0, Math.ceil(lo)), Math.floor(hi) - 1);
  if (pos) alts.push(`${pos} ${FRACTION}`);
  // −k.f: k + 1 ≤ −lo keeps it above lo; below hi when hi ≥ 0, or k ≥ −hi.
  const neg = integerRange(hi >= 0 ? 0 : Math.ceil(-hi), Math.floor(-lo) - 1);
  if (neg) alts.push(`"-" ${neg} ${FRACTION}`);
  if (alts.length === 0) return undefined;
  return alts.length === 1 ? alts[0]! : `( ${alts.join(" | ")} )`;
}
