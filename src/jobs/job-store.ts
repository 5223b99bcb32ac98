// The JobStore interface: durable job records with leases. Every implementation (SQLite today,
// Redis next) passes test/conformance/job-store.conformance.ts. All methods are atomic with
// respect to each other, including across processes sharing the store.
import type { FinishedJob, Job, JobError, JobStatus, NewJob } from "./job.js";

export interface CreateResult {
  job: Job;
  /** false when the idempotency key matched an existing job with the same request. */
  created: boolean;
}

export interface ListQuery {
  status?: JobStatus;
  model?: string;
  /** Only the jobs this key name submitted. */
  owner?: string;
  /** Opaque cursor from a previous page. */
  cursor?: string;
  /** 1..1000, default 100. */
  limit?: number;
}

/** A job without its input and result: what a list holds, so a page stays small. */
export type JobSummary = Omit<Job, "input" | "result">;

/** What changes whenever anything about a job changes: enough to tell whether to re-read it. */
export interface JobState {
  status: JobStatus;
  updatedAt: number;
}

export interface ListPage {
  /** Summaries: no input or result (GET one job, or its result, for those). */
  jobs: JobSummary[];
  /** Present when there are more jobs. */
  nextCursor?: string;
}

export interface CompleteResult {
  result?: string;
  resultKey?: string;
  resultBytes: number;
}

export interface JobStore {
  /**
   * Creates a queued job. With an idempotency key still in force: the same requestHash returns the
   * existing job (created: false); another requestHash throws MP_ERR_JOB_IDEMPOTENCY_CONFLICT.
   */
  create(job: NewJob, now: number): Promise<CreateResult>;
  /**
   * Records work already done as a succeeded job (created, started and finished at `now`, one
   * attempt, the result inline); it is never claimed. @throws MP_ERR_SERVER_INTERNAL when the id exists.
   */
  record(job: FinishedJob, now: number): Promise<Job>;
  /**
   * Deletes a final job (succeeded, failed or canceled) with its idempotency key, at once;
   * @returns the job deleted (its result blob can go too), undefined when there is no such job
   * or it is queued or running (those are canceled, not deleted) and nothing changed.
   */
  remove(id: string): Promise<Job | undefined>;
  get(id: string): Promise<Job | undefined>;
  /** The job's status and updatedAt alone (a cheap read for pollers); undefined when unknown. */
  state(id: string): Promise<JobState | undefined>;
  /** Jobs of `model` with status queued (including those waiting out a retry backoff). */
  queuedCount(model: string): Promise<number>;
  /** Jobs queued or running that the key name `owner` submitted (its queuedJobs limit). */
  activeCount(owner: string): Promise<number>;
  /** Newest first, cursor-paginated; summaries without input or result. */
  list(query: ListQuery): Promise<ListPage>;
  /**
   * Leases the next runnable job of one of `models` to `worker` for `leaseMs`: the highest
   * priority, then the oldest, among queued jobs whose runAt has come and running jobs whose lease
   * lapsed (their worker died). Increments attempts and sets status running.
   */
  claim(worker: string, models: readonly string[], leaseMs: number, now: number): Promise<Job | undefined>;
  /** Extends the lease; false when `worker` no longer holds it (the job was reclaimed or ended). */
  renew(id: string, worker: string, leaseMs: number, now: number): Promise<boolean>;
  /** Records the one final result; false (and no change) when `worker` no longer holds the lease. */
  complete(id: string, worker: string, result: CompleteResult, now: number): Promise<boolean>;
  /**
   * Records a failed attempt: back to queued with runAt = retryAt when given, else failed with
   * the error. false when `worker` no longer holds the lease.
   */
  fail(
    id: string,
    worker: string,
    error: JobError,
    retryAt: number | undefined,
    now: number,
  ): Promise<boolean>;
  /** Gives a running job back to the queue without counting the attempt (graceful shutdown). */
  release(id: string, worker: string, now: number): Promise<boolean>;
  /**
   * Cancels: a queued job ends canceled at once; a running one gets cancelRequested (its worker
   * finishes it as canceled). Returns the job after the change; final jobs are returned unchanged.
   */
  cancel(id: string, now: number): Promise<Job | undefined>;
  /** Ends a running job as canceled (the worker saw cancelRequested). */
  markCanceled(id: string, worker: string, now: number): Promise<boolean>;
  /** Puts a failed or canceled job back in the queue with fresh attempts. */
  retry(id: string, now: number): Promise<Job | undefined>;
  /** Records a webhook delivery attempt. */
  recordWebhook(id: string, state: NonNullable<Job["webhook"]>): Promise<void>;
  /** Deletes final jobs that finished before `before`; returns them so their blobs can go too. */
  purge(before: number): Promise<Job[]>;
  /** Jobs per status, for metrics and readiness. */
  counts(): Promise<Record<JobStatus, number>>;
  /** Idempotent. */
  close(): Promise<void>;
}
