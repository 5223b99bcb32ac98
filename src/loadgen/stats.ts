// Latency samples in milliseconds, kept exactly (a growable Float64Array) so sub-millisecond
// percentiles are not rounded away, as autocannon's integer-millisecond histogram does.
export class Samples {
  private data = new Float64Array(1 << 16);
  private n = 0;

  add(ms: number): void {
    if (this.n === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.n++] = ms;
  }

  get count(): number {
    return this.n;
  }

  /** Nearest-rank percentiles, e.g. percentiles([50, 99]). NaN when empty. */
  percentiles(ps: readonly number[]): number[] {
    if (this.n === 0) return ps.map(() => Number.NaN);
    const sorted = this.data.slice(0, this.n).sort();
    return ps.map((p) => sorted[Math.min(this.n - 1, Math.max(0, Math.ceil((p / 100) * this.n) - 1))]!);
  }

  mean(): number {
    let sum = 0;
    for (let i = 0; i < this.n; i++) sum += this.data[i]!;
    return this.n === 0 ? Number.NaN : sum / this.n;
  }
}

/** Rounds for display and JSON: 3 significant decimals below 10, 2 below 100, else 1. */
export function round(x: number): number {
  if (!Number.isFinite(x)) return x;
  const digits = Math.abs(x) < 10 ? 3 : Math.abs(x) < 100 ? 2 : 1;
  return Number(x.toFixed(digits));
}
