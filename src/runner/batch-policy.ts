// The adaptive batching policy, as pure functions of state and a clock, so it is unit-tested
// without timers. Batch cost is fitted as a·rows + b over recent batches (as BentoML does); the
// batcher waits for more rows only while the queue is still growing, a bigger batch is worth
// it, and every queued request's latency budget still allows.

/** Least-squares fit of batch time = a·rows + b over the most recent batches. */
export class CostModel {
  private readonly rows: number[] = [];
  private readonly ms: number[] = [];
  private a = 0;
  private b = 0;

  constructor(
    private readonly window = 64,
    initial: { a: number; b: number } = { a: 0.01, b: 0.1 },
  ) {
    this.a = initial.a;
    this.b = initial.b;
  }

  /** Records one batch of `rows` that took `ms`, and refits. */
  observe(rows: number, ms: number): void {
    this.rows.push(rows);
    this.ms.push(ms);
    if (this.rows.length > this.window) {
      this.rows.shift();
      this.ms.shift();
    }
    this.fit();
  }

  /** Predicted milliseconds for a batch of `rows`. */
  estimate(rows: number): number {
    return this.a * rows + this.b;
  }

  /** Batches the fit is drawn from (at most the window). */
  get samples(): number {
    return this.rows.length;
  }

  get coefficients(): { a: number; b: number } {
    return { a: this.a, b: this.b };
  }

  private fit(): void {
    const n = this.rows.length;
    let sx = 0;
    let sy = 0;
    for (let i = 0; i < n; i++) {
      sx += this.rows[i]!;
      sy += this.ms[i]!;
    }
    const mx = sx / n;
    const my = sy / n;
    let sxx = 0;
    let sxy = 0;
    for (let i = 0; i < n; i++) {
      const dx = this.rows[i]! - mx;
      sxx += dx * dx;
      sxy += dx * (this.ms[i]! - my);
    }
    if (sxx > 0) {
      // Costs never fall with more rows, and a batch always costs something.
      this.a = Math.max(0, sxy / sxx);
      this.b = Math.max(0, my - this.a * mx);
    } else {
      // All batches the same size: keep the slope, move the intercept.
      this.b = Math.max(0, my - this.a * mx);
    }
  }
}

/** Exponentially weighted arrival rate, in rows per millisecond. */
export class ArrivalRate {
  private rate = 0;
  private last = Number.NaN;

  constructor(private readonly halfLifeMs = 50) {}

  /** Records `rows` arriving at `now` (ms). */
  observe(rows: number, now: number): void {
    if (Number.isNaN(this.last)) {
      this.last = now;
      return;
    }
    const dt = Math.max(now - this.last, 0.001);
    const w = 0.5 ** (dt / this.halfLifeMs);
    this.rate = w * this.rate + (1 - w) * (rows / dt);
    this.last = now;
  }

  /** Rows per ms, decayed to `now`. */
  at(now: number): number {
    if (Number.isNaN(this.last)) return 0;
    return this.rate * 0.5 ** (Math.max(0, now - this.last) / this.halfLifeMs);
  }
}

export interface BatchState {
  now: number;
  queuedRows: number;
  /** When the oldest queued request arrived (ms). */
  oldestAt: number;
  /** When the newest queued request arrived (ms). */
  newestAt: number;
  /** The earliest deadline among queued requests (ms); Infinity when none. */
  earliestDeadline: number;
  /** Batches sent to the runner and not yet answered. */
  inFlight: number;
}

export interface BatchSettings {
  maxBatchRows: number;
  /**
   * Most bytes of input in one batch: requests are joined until the next would pass it (a single
   * request is never refused for it). A batch is one concatenated copy of its requests' inputs, so
   * rows alone do not bound its memory. Default: no limit.
   */
  maxBatchBytes?: number;
  /** Longest any request waits for company (Triton's max_queue_delay, BentoML's max_latency share). */
  maxDelayMs: number;
  /** Batches in flight at once: 2 lets the next batch travel while one computes. */
  maxInFlight: number;
  /** false: classic batching (wait until full or maxDelayMs); true: adaptive. */
  adaptive: boolean;
}

export type Decision =
  | { kind: "idle" }
  | { kind: "busy" }
  | { kind: "dispatch"; rows: number; why: string }
  | { kind: "wait"; until: number };

/**
 * What to do now. `cost(rows)` predicts a batch's time; `arrival` is rows per ms.
 * Pure: the same inputs always give the same decision.
 */
export function decide(
  s: BatchState,
  cfg: BatchSettings,
  cost: (rows: number) => number,
  arrival: number,
): Decision {
  if (s.queuedRows === 0) return { kind: "idle" };
  if (s.inFlight >= cfg.maxInFlight) return { kind: "busy" };
  const rows = Math.min(s.queuedRows, cfg.maxBatchRows);
  if (s.queuedRows >= cfg.maxBatchRows) return { kind: "dispatch", rows, why: "full" };
  const waitLimit = s.oldestAt + cfg.maxDelayMs;
  if (s.now >= waitLimit) return { kind: "dispatch", rows, why: "max delay" };
  // Leave enough time to compute a full batch before the earliest deadline.
  const deadlineLimit = s.earliestDeadline - cost(cfg.maxBatchRows);
  if (s.now >= deadlineLimit) return { kind: "dispatch", rows, why: "deadline" };
  if (!cfg.adaptive) return { kind: "wait", until: Math.min(waitLimit, deadlineLimit) };

  // A batch is worth growing while rows arrive faster than they are served: the batch size
  // that keeps up with arrivals is n* = λ·cost(n*) = λb / (1 − λa).
  const { aPerRow, fixed } = split(cost);
  const keepUp = arrival * aPerRow >= 1 ? cfg.maxBatchRows : (arrival * fixed) / (1 - arrival * aPerRow);
  // Whole rows; the epsilon keeps float noise in a and b from asking for one row too many.
  const target = Math.min(cfg.maxBatchRows, Math.ceil(keepUp - 1e-6));
  if (target < 2 || s.queuedRows >= target) return { kind: "dispatch", rows, why: "target" };
  // Rows still arriving? Expect the next within ~1/λ; if twice that passed, the queue stopped growing.
  const gap = 1 / arrival;
  const stall = s.newestAt + 2 * gap;
  if (s.now >= stall) return { kind: "dispatch", rows, why: "stalled" };
  return { kind: "wait", until: Math.min(stall, waitLimit, deadlineLimit) };
}

function split(cost: (rows: number) => number): { aPerRow: number; fixed: number } {
  const fixed = cost(0);
  return { aPerRow: Math.max(0, cost(1) - fixed), fixed: Math.max(0, fixed) };
}
