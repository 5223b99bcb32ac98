// The latency samples and rounding now live with the shared load generator (src/loadgen/).
export { round, Samples } from "../src/loadgen/stats.js";

/** The median of a non-empty list (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}
