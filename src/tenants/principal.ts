// Who is calling: the named key a request was let in with. Every surface reads it (scopes,
// limits, usage, audit, payload capture); the key itself never leaves the authentication step.

/**
 * client: the models it lists and its own jobs; admin: also management and every job; metrics:
 * GET /metrics and the full /readyz body only (a Prometheus scrape key), no model at all.
 */
export type Role = "admin" | "client" | "metrics";

/** What a key may use and how much; absent limits are unlimited. */
export interface KeyLimits {
  /** Sustained requests per second (a token bucket refilled at this rate). */
  readonly requestsPerSecond?: number;
  /** The bucket's size: requests that may arrive at once after a quiet spell (default: one second's worth). */
  readonly burst?: number;
  /** Requests of this key in flight at once. */
  readonly concurrent?: number;
  /** Prompt + completion tokens per minute, language models only. */
  readonly tokensPerMinute?: number;
  /** Jobs of this key queued or running at once. */
  readonly queuedJobs?: number;
}

export interface Principal {
  /** The key's name: what usage, metrics, logs and the audit log show. */
  readonly name: string;
  readonly role: Role;
  /** Model names this key may use; undefined: every model (a metrics key's is empty). */
  readonly models?: ReadonlySet<string>;
  readonly limits: KeyLimits;
  /** True when any limit is set: the one check a request of a key without limits pays. */
  readonly limitsSet?: boolean;
}

/** The caller of a server with no key configured: anyone, as one anonymous admin-less tenant. */
export const ANONYMOUS: Principal = Object.freeze({ name: "anonymous", role: "client", limits: {} });
