// Where per-key limits keep their counts: token buckets (requests per second, tokens per minute)
// and concurrency leases. In memory for one process; in Redis (redis-limit-store.ts) so every
// process and tier sharing it enforces one limit. Both run test/conformance/limit-store.conformance.ts.
//
// What the contract leaves out: fairness between callers waiting on the same bucket (a refused
// call is refused, not queued), and exactness across a Redis failover (counts may reset).

/** How a bucket call treats the tokens it finds. */
export type BucketMode =
  /** Take `cost` tokens when that many are there; otherwise refuse and take none. */
  | "take"
  /** Take `cost` tokens even when that leaves the bucket below zero (usage known after the fact). */
  | "charge"
  /** Take nothing; allowed while the bucket holds more than zero tokens. */
  | "peek";

export interface Bucket {
  /** Tokens the bucket holds when full. */
  readonly capacity: number;
  /** Tokens added per second, up to capacity. */
  readonly perSecond: number;
}

export interface BucketResult {
  allowed: boolean;
  /** Tokens left after this call (negative after a charge beyond them). */
  tokens: number;
  /** When refused: how long until the call would be allowed (ms). */
  retryAfterMs: number;
}

export interface LimitStore {
  /** One atomic step of the token bucket `key` (a full bucket when first seen). */
  bucket(key: string, bucket: Bucket, cost: number, mode: BucketMode): Promise<BucketResult>;
  /**
   * Holds one of `max` slots of `key` under `lease` for at most `ttlMs` (a holder that dies frees
   * its slot then). @returns false, holding nothing, when all `max` are held.
   */
  acquire(key: string, max: number, lease: string, ttlMs: number): Promise<boolean>;
  /** Frees the slot `lease` holds; nothing when it holds none. */
  release(key: string, lease: string): Promise<void>;
  close(): Promise<void>;
}

/** The refill and decision of one bucket step, shared by the in-memory store and the tests. */
export function stepBucket(
  state: { tokens: number; at: number } | undefined,
  bucket: Bucket,
  cost: number,
  mode: BucketMode,
  now: number,
): { state: { tokens: number; at: number }; result: BucketResult } {
  let tokens = state
    ? Math.min(bucket.capacity, state.tokens + (Math.max(0, now - state.at) * bucket.perSecond) / 1000)
    : bucket.capacity;
  let allowed = true;
  if (mode === "take") {
    if (tokens >= cost) tokens -= cost;
    else allowed = false;
  } else if (mode === "charge") tokens -= cost;
  else allowed = tokens > 0;
  const missing = mode === "take" ? cost - tokens : 1e-9 - tokens;
  const retryAfterMs = allowed ? 0 : Math.ceil((Math.max(0, missing) * 1000) / bucket.perSecond);
  return { state: { tokens, at: now }, result: { allowed, tokens, retryAfterMs } };
}

export class MemoryLimitStore implements LimitStore {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #leases = new Map<string, Map<string, number>>();
  readonly #clock: () => number;

  constructor(clock: () => number = Date.now) {
    this.#clock = clock;
  }

  async bucket(key: string, bucket: Bucket, cost: number, mode: BucketMode): Promise<BucketResult> {
    const { state, result } = stepBucket(this.#buckets.get(key), bucket, cost, mode, this.#clock());
    // A full bucket is the state of a key never seen: forget it, so the map holds active keys only.
    if (state.tokens >= bucket.capacity) this.#buckets.delete(key);
    else this.#buckets.set(key, state);
    return result;
  }

  async acquire(key: string, max: number, lease: string, ttlMs: number): Promise<boolean> {
    const now = this.#clock();
    let held = this.#leases.get(key);
    if (!held) {
      held = new Map();
      this.#leases.set(key, held);
    }
    for (const [id, until] of held) if (until <= now) held.delete(id);
    if (held.size >= max) return false;
    held.set(lease, now + ttlMs);
    return true;
  }

  async release(key: string, lease: string): Promise<void> {
    const held = this.#leases.get(key);
    if (!held) return;
    held.delete(lease);
    if (held.size === 0) this.#leases.delete(key);
  }

  async close(): Promise<void> {
    this.#buckets.clear();
    this.#leases.clear();
  }
}
