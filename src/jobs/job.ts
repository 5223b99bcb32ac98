// What a job is: the durable record of one asynchronous prediction, from acceptance to its one
// final result. Stores persist it; the queue and workers move it through its states.
import type { WebhookState } from "../notify/webhook.js";
import type { TraceHeaders } from "../telemetry/propagation.js";

export type JobStatus = "queued" | "running" | "succeeded" | "failed" | "canceled";

export const FINAL_STATUSES: readonly JobStatus[] = ["succeeded", "failed", "canceled"];

export interface JobError {
  code: string;
  message: string;
}

export interface Job {
  id: string;
  /** The model's name (never `name@version`): every worker of the model may claim the job. */
  model: string;
  /**
   * The version the job was pinned to (`name@version`, `/versions/{v}/predict`, `?version=`): the
   * worker runs exactly that version. Absent: whichever version is current when the job runs.
   */
  version?: string;
  status: JobStatus;
  /** Higher runs first; synchronous traffic is served before any job (jobs only use idle capacity). */
  priority: number;
  /** The predict body as submitted (JSON text), validated at submission. */
  input: string;
  /** Client metadata, returned as given. */
  metadata?: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
  startedAt?: number;
  finishedAt?: number;
  /** Executions started, including the current one. */
  attempts: number;
  maxAttempts: number;
  /** Not before this time (ms since epoch): retries wait out their backoff. */
  runAt: number;
  /** Per-attempt limit in ms. */
  timeoutMs: number;
  lastError?: JobError;
  /** The worker holding the lease while running, and when the lease lapses. */
  leaseOwner?: string;
  leaseExpiresAt?: number;
  /** Set by DELETE on a running job: the worker aborts where the backend allows, and the job ends canceled. */
  cancelRequested?: boolean;
  /** Inline result (JSON text) when small enough. */
  result?: string;
  /** Blob key of the result when it was stored outside. */
  resultKey?: string;
  resultBytes?: number;
  idempotencyKey?: string;
  /** sha256 of (model, body): the same key with another body is a conflict. */
  requestHash?: string;
  /** When the idempotency key stops protecting (ms since epoch). */
  idempotencyExpiresAt?: number;
  webhook?: WebhookState;
  /** The name of the key that submitted it: a client key sees and changes only its own jobs. */
  owner?: string;
  /**
   * The submitting request's place in a trace (W3C traceparent/tracestate): each attempt's span
   * links to it. Absent on jobs submitted untraced, and on records written before it existed.
   */
  trace?: TraceHeaders;
}

export interface NewJob {
  id: string;
  model: string;
  version?: string;
  input: string;
  priority?: number;
  metadata?: Record<string, unknown>;
  maxAttempts: number;
  timeoutMs: number;
  callbackUrl?: string;
  idempotencyKey?: string;
  requestHash?: string;
  idempotencyTtlMs?: number;
  owner?: string;
  trace?: TraceHeaders;
}

/**
 * A record of work already done elsewhere (a stored /v1/responses answer): kept as a succeeded
 * job with its result, so it is read, listed, owned and purged after the retention time as jobs
 * are; no worker ever runs it.
 */
export interface FinishedJob {
  id: string;
  model: string;
  version?: string;
  /** The request (JSON text). */
  input: string;
  /** The answer (JSON text), kept inline. */
  result: string;
  metadata?: Record<string, unknown>;
  owner?: string;
  trace?: TraceHeaders;
}
