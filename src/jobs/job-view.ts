// The public JSON form of a job, as every route and the CLI show it.
import type { JobSummary } from "./job-store.js";

export interface JobLinks {
  self: string;
  result: string;
  events: string;
}

export function jobLinks(id: string): JobLinks {
  return { self: `/v1/jobs/${id}`, result: `/v1/jobs/${id}/result`, events: `/v1/jobs/${id}/events` };
}

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** The job as clients see it: snake_case, ISO times, no input or internal lease fields. */
export function jobView(job: JobSummary): Record<string, unknown> {
  return {
    id: job.id,
    model: job.model,
    // Present only on a job pinned to a version: the version that runs it.
    version: job.version,
    status: job.status,
    priority: job.priority,
    created_at: iso(job.createdAt),
    updated_at: iso(job.updatedAt),
    started_at: iso(job.startedAt),
    finished_at: iso(job.finishedAt),
    attempts: job.attempts,
    max_attempts: job.maxAttempts,
    last_error: job.lastError,
    cancel_requested: job.cancelRequested || undefined,
    metadata: job.metadata,
    owner: job.owner,
    result_bytes: job.resultBytes,
    webhook: job.webhook
      ? {
          url: job.webhook.url,
          attempts: job.webhook.attempts,
          last_status: job.webhook.lastStatus,
          last_error: job.webhook.lastError,
          delivered_at: iso(job.webhook.deliveredAt),
        }
      : undefined,
    links: jobLinks(job.id),
  };
}
