// What both job stores share: a Job rebuilt from its stored fields (Redis keeps a hash with text
// values under the Job's own field names; SQLite a row with snake_case columns), the summary a
// list page carries, the list-size limits, the list cursor and the default idempotency window.
// Each store keeps only its own encoding.
import { ModelportError } from "../../errors.js";
import type { Job, JobError, JobStatus } from "../job.js";
import type { JobSummary, ListQuery } from "../job-store.js";

/** Used when a NewJob carries an idempotency key but no TTL (jobs.idempotencyTtlMs default). */
export const DEFAULT_IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** Jobs deleted per purge step (one script call or one transaction). */
export const PURGE_BATCH = 500;

/** A list page's size: the query's limit (default 100) within 1..1000. */
export function listLimit(query: ListQuery): number {
  const asked = Number.isFinite(query.limit) ? Math.floor(query.limit!) : 100;
  return Math.min(1000, Math.max(1, asked));
}

/** A list cursor: the last listed job's (createdAt, id), opaque to clients. */
export function encodeCursor(createdAt: number, id: string): string {
  return Buffer.from(JSON.stringify([createdAt, id])).toString("base64url");
}

/** The (createdAt, id) a cursor from encodeCursor holds; 400 for anything else. */
export function decodeCursor(cursor: string): [number, string] {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      Number.isSafeInteger(value[0]) &&
      (value[0] as number) >= 0 &&
      typeof value[1] === "string"
    ) {
      return [value[0] as number, value[1]];
    }
  } catch {
    // reported below
  }
  throw new ModelportError(
    "MP_ERR_REQUEST_INVALID",
    "the cursor is not one this server issued; pass nextCursor from the previous page as it was returned",
  );
}

/** One stored field by the Job's field name: a number, its text, or absent (null or undefined). */
export type StoredField = (name: string) => string | number | null | undefined;

/** The Job whose stored fields `field` reads; metadata, lastError and webhook are JSON text. */
export function jobFromFields(field: StoredField): Job {
  const num = (k: string) => Number(field(k));
  const has = (k: string) => field(k) !== null && field(k) !== undefined;
  const json = <T>(k: string) => JSON.parse(String(field(k))) as T;
  const job: Job = {
    id: String(field("id")),
    model: String(field("model")),
    status: field("status") as JobStatus,
    priority: num("priority"),
    input: String(field("input") ?? ""),
    createdAt: num("createdAt"),
    updatedAt: num("updatedAt"),
    attempts: num("attempts"),
    maxAttempts: num("maxAttempts"),
    runAt: num("runAt"),
    timeoutMs: num("timeoutMs"),
  };
  if (has("version")) job.version = String(field("version"));
  if (has("metadata")) job.metadata = json<Record<string, unknown>>("metadata");
  if (has("startedAt")) job.startedAt = num("startedAt");
  if (has("finishedAt")) job.finishedAt = num("finishedAt");
  if (has("lastError")) job.lastError = json<JobError>("lastError");
  if (has("leaseOwner")) job.leaseOwner = String(field("leaseOwner"));
  if (has("leaseExpiresAt")) job.leaseExpiresAt = num("leaseExpiresAt");
  if (num("cancelRequested") === 1) job.cancelRequested = true;
  if (has("result")) job.result = String(field("result"));
  if (has("resultKey")) job.resultKey = String(field("resultKey"));
  if (has("resultBytes")) job.resultBytes = num("resultBytes");
  if (has("idempotencyKey")) job.idempotencyKey = String(field("idempotencyKey"));
  if (has("requestHash")) job.requestHash = String(field("requestHash"));
  if (has("idempotencyExpiresAt")) job.idempotencyExpiresAt = num("idempotencyExpiresAt");
  if (has("owner")) job.owner = String(field("owner"));
  if (has("webhook")) job.webhook = json<NonNullable<Job["webhook"]>>("webhook");
  if (has("trace")) job.trace = json<NonNullable<Job["trace"]>>("trace");
  return job;
}

/** A listed job: everything but its input and result. */
export function summaryOf(job: Job): JobSummary {
  const { input: _input, result: _result, ...summary } = job;
  return summary;
}
