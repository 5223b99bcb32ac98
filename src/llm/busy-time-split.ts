// Splits a language model's busy time among the generations that shared it, for cost per
// request (docs/Cost.md#llamacpp-models). llama.cpp evaluates the tokens of every running
// sequence in the same decode steps, so wall time alone would bill each of N concurrent requests
// for the whole machine. Rule: time is cut into intervals at each start and end of a generation;
// an interval's time goes to the generations running in it in proportion to the tokens each had
// evaluated in it (prompt tokens when it starts, each generated token as it comes), equally when
// none were. Time with nothing running belongs to no one. The sum over generations is the
// model's busy time. Pure: state and an injected clock (`now` on every call), no timers.

interface Open {
  /** Tokens evaluated since the last cut. */
  tokens: number;
  /** Time given to it so far, ms. */
  ms: number;
}

export class BusyTimeSplit {
  private readonly open = new Map<number, Open>();
  private nextId = 1;
  /** When the current interval began (meaningful while something runs). */
  private since = 0;
  private busy = 0;

  /**
   * A generation starts at `now` with `tokens` to evaluate first (its prompt, less a cached
   * prefix). @returns its id for progress() and end().
   */
  begin(now: number, tokens = 0): number {
    this.cut(now);
    const id = this.nextId++;
    this.open.set(id, { tokens, ms: 0 });
    return id;
  }

  /** `tokens` more were evaluated for generation `id` (unknown or ended ids are ignored). */
  progress(id: number, tokens: number): void {
    const o = this.open.get(id);
    if (o) o.tokens += tokens;
  }

  /** Generation `id` ends at `now`. @returns its machine time in ms (0 for an unknown id). */
  end(id: number, now: number): number {
    if (!this.open.has(id)) return 0;
    this.cut(now);
    const o = this.open.get(id)!;
    this.open.delete(id);
    return o.ms;
  }

  /** Generations running now. */
  get running(): number {
    return this.open.size;
  }

  /** Total time with at least one generation running, ms (what the shares add up to). */
  get busyMs(): number {
    return this.busy;
  }

  /** Gives the time since the last cut to the generations running in it, and starts a new interval. */
  private cut(now: number): void {
    const ms = Math.max(0, now - this.since);
    this.since = now;
    const n = this.open.size;
    if (n === 0) return;
    this.busy += ms;
    let tokens = 0;
    for (const o of this.open.values()) tokens += o.tokens;
    // The last one gets what the others left, so the shares add up to the interval exactly.
    let left = ms;
    let i = 0;
    for (const o of this.open.values()) {
      const share = ++i === n ? left : tokens > 0 ? (ms * o.tokens) / tokens : ms / n;
      o.ms += share;
      left -= share;
      o.tokens = 0;
    }
  }
}
