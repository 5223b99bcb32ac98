// Which jobs may be retried: only a failed or canceled one goes back to the queue. The HTTP route
// and the CLI refuse the others with one code, rather than answer as if something happened.
import { ModelportError } from "../errors.js";
import type { JobSummary } from "./job-store.js";

/** MP_ERR_JOB_RETRY_REFUSED for a job that is not failed or canceled; undefined when it may be retried. */
export function retryRefusal(job: Pick<JobSummary, "id" | "status">): ModelportError | undefined {
  if (job.status === "failed" || job.status === "canceled") return undefined;
  const what =
    job.status === "succeeded"
      ? `it succeeded; its result is at GET /v1/jobs/${job.id}/result. Submit a new job to run it again`
      : `it is ${job.status}; only a failed or canceled job is retried. Wait for it with GET /v1/jobs/${job.id}?wait=30`;
  return new ModelportError("MP_ERR_JOB_RETRY_REFUSED", `job '${job.id}' was not retried: ${what}`, {
    status: job.status,
  });
}
