// A key's limits applied to one request: requests per second (a token bucket with burst),
// concurrent requests (leases), tokens per minute for language models (checked before, charged
// after, so one long answer may take the bucket below zero and the key waits it out). Over a
// limit: 429 MP_ERR_RATE_LIMITED with when to retry and the IETF RateLimit headers
// (draft-ietf-httpapi-ratelimit-headers: RateLimit-Policy and RateLimit). Keys without limits
// cost nothing. When the shared store cannot be reached, requests are let through and that is
// logged (at most once a minute): a limit must not take the service down with it.
import type { Logger } from "pino";
import { ModelportError } from "../errors.js";
import type { Bucket, LimitStore } from "./limit-store.js";
import type { Principal } from "./principal.js";

/** Longest a concurrency lease is held by a process that died without releasing it. */
const LEASE_TTL_MS = 15 * 60_000;
const STORE_WARN_EVERY_MS = 60_000;

export type LimitName = "requestsPerSecond" | "concurrent" | "tokensPerMinute";

export interface Admission {
  /** Response headers: RateLimit-Policy and RateLimit of the limits that apply. */
  readonly headers: Record<string, string>;
  /** Frees the concurrency slot; idempotent. */
  release(): void;
}

const REFUSAL_HEADERS = new WeakMap<Error, Record<string, string>>();

/** The RateLimit headers to send with a refusal that admit() threw (none for other errors). */
export function refusalHeaders(err: unknown): Record<string, string> | undefined {
  return err instanceof Error ? REFUSAL_HEADERS.get(err) : undefined;
}

const NOTHING: Admission = Object.freeze({ headers: {}, release: () => {} });

function requestBucket(l: Principal["limits"]): Bucket | undefined {
  const rps = l.requestsPerSecond;
  return rps ? { capacity: l.burst ?? Math.max(1, Math.ceil(rps)), perSecond: rps } : undefined;
}

function tokenBucket(l: Principal["limits"]): Bucket | undefined {
  const tpm = l.tokensPerMinute;
  return tpm ? { capacity: tpm, perSecond: tpm / 60 } : undefined;
}

/** A policy item: quota q over window w seconds (the bucket's capacity and its time to refill). */
const policy = (name: string, b: Bucket) =>
  `"${name}";q=${b.capacity};w=${Math.max(1, Math.ceil(b.capacity / b.perSecond))}`;
/** A limit item: r remaining, t seconds until the bucket is full again. */
const remaining = (name: string, b: Bucket, tokens: number) =>
  `"${name}";r=${Math.max(0, Math.floor(tokens))};t=${Math.max(0, Math.ceil((b.capacity - tokens) / b.perSecond))}`;

export class KeyLimiter {
  #lease = 0;
  #warnedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly store: LimitStore,
    private readonly instance: string,
    private readonly log: Logger,
    private readonly onRefused: (key: string, limit: LimitName) => void = () => {},
  ) {}

  /**
   * Admits a request of `principal` (a language-model request checks its tokens per minute too).
   * @throws ModelportError MP_ERR_RATE_LIMITED (retryAfterSeconds in its details; refusalHeaders()
   * gives the RateLimit fields to send with it).
   */
  async admit(principal: Principal, languageModel: boolean): Promise<Admission> {
    const l = principal.limits;
    const requests = requestBucket(l);
    const tokens = languageModel ? tokenBucket(l) : undefined;
    if (!requests && !tokens && !l.concurrent) return NOTHING;
    const policies: string[] = [];
    const states: string[] = [];
    let leased: string | undefined;
    const release = () => {
      if (leased === undefined) return;
      const lease = leased;
      leased = undefined;
      this.store.release(principal.name, lease).catch((err) => this.#storeDown(err));
    };
    try {
      if (requests) {
        const r = await this.store.bucket(`${principal.name}:rps`, requests, 1, "take");
        policies.push(policy("requests", requests));
        states.push(remaining("requests", requests, r.tokens));
        if (!r.allowed) this.#refuse(principal, "requestsPerSecond", r.retryAfterMs, policies, states);
      }
      if (l.concurrent) {
        const lease = `${this.instance}:${++this.#lease}`;
        if (!(await this.store.acquire(principal.name, l.concurrent, lease, LEASE_TTL_MS)))
          this.#refuse(principal, "concurrent", 1000, policies, states);
        leased = lease;
      }
      if (tokens) {
        const r = await this.store.bucket(`${principal.name}:tpm`, tokens, 0, "peek");
        policies.push(policy("tokens", tokens));
        states.push(remaining("tokens", tokens, r.tokens));
        if (!r.allowed) this.#refuse(principal, "tokensPerMinute", r.retryAfterMs, policies, states);
      }
    } catch (err) {
      if (err instanceof ModelportError) {
        release();
        throw err;
      }
      this.#storeDown(err);
      return { headers: {}, release };
    }
    const headers: Record<string, string> = {};
    if (policies.length) {
      headers["ratelimit-policy"] = policies.join(", ");
      headers.ratelimit = states.join(", ");
    }
    return { headers, release };
  }

  /** Takes a finished language-model request's tokens from its key's tokens-per-minute bucket. */
  charge(principal: Principal, tokenCount: number): void {
    const tokens = tokenBucket(principal.limits);
    if (!tokens || tokenCount <= 0) return;
    this.store
      .bucket(`${principal.name}:tpm`, tokens, tokenCount, "charge")
      .catch((err) => this.#storeDown(err));
  }

  #refuse(
    principal: Principal,
    limit: LimitName,
    retryAfterMs: number,
    policies: string[],
    states: string[],
  ): never {
    this.onRefused(principal.name, limit);
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
    const what = {
      requestsPerSecond: `${principal.limits.requestsPerSecond} requests per second (burst ${requestBucket(principal.limits)?.capacity})`,
      concurrent: `${principal.limits.concurrent} requests at once`,
      tokensPerMinute: `${principal.limits.tokensPerMinute} tokens per minute`,
    }[limit];
    const err = new ModelportError(
      "MP_ERR_RATE_LIMITED",
      `key '${principal.name}' is over its limit of ${what}; retry in ${seconds} s`,
      { limit, retryAfterSeconds: seconds },
    );
    if (policies.length)
      REFUSAL_HEADERS.set(err, { "ratelimit-policy": policies.join(", "), ratelimit: states.join(", ") });
    throw err;
  }

  #storeDown(err: unknown): void {
    const now = Date.now();
    if (now - this.#warnedAt < STORE_WARN_EVERY_MS) return;
    this.#warnedAt = now;
    this.log.warn(
      `limits: the limit store cannot be reached, so limits are not enforced now: ${(err as Error).message}`,
    );
  }
}
