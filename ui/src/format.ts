// The number formats the dashboard shows (counts, seconds, dollars, bytes, milliseconds): pure
// functions without DOM or Preact, so unit tests import them as the page does.

/**
 * `n` with at most `digits` decimals, trailing decimal zeros dropped ("1.5", "10", "330");
 * a non-zero value too small for `digits` in exponent form; "–" for undefined, NaN or ±Infinity.
 */
export function fmt(n: number | undefined, digits = 2): string {
  if (n === undefined || !Number.isFinite(n)) return "–";
  if (n !== 0 && Math.abs(n) < 10 ** -digits) return n.toExponential(1);
  const fixed = n.toFixed(digits);
  // Only zeros after a decimal point are dropped: a whole number keeps its own ("10", not "1").
  const text = fixed.includes(".") ? fixed.replace(/\.?0+$/, "") : fixed;
  return text === "-0" ? "0" : text;
}

/** A byte count in B, KiB, MiB or GiB with one decimal at most. */
export function fmtBytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${fmt(v, 1)} ${units[i]}`;
}

/** Milliseconds as "12.5 ms", or seconds from 1,000 ms on ("1.5 s"). */
export const fmtMs = (ms: number | undefined): string =>
  ms === undefined || !Number.isFinite(ms) ? "–" : ms >= 1000 ? `${fmt(ms / 1000, 2)} s` : `${fmt(ms, 1)} ms`;
