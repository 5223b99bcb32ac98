// Writing an attempt's outcome to the job store after the work was done: a failing store is
// retried with backoff for up to one lease, since the work itself need not run again. Also what an
// outcome is, and the job a recorded result leaves (published without reading it back).
import type { Logger } from "pino";
import type { Job } from "./job.js";
import type { CompleteResult } from "./job-store.js";

/** A store write that failed after the work was done is retried at this pace, within the lease. */
const RECORD_RETRY_FIRST_MS = 100;
const RECORD_RETRY_MAX_MS = 2000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Writes an attempt's outcome, retrying a failing store with backoff until `giveUpAt` (one lease).
 * @returns the store's answer, or undefined when it never answered (the job stays running
 * under a lease nobody renews, so it is claimed again once the lease lapses).
 */
export async function recordOutcome(
  job: Job,
  what: string,
  write: () => Promise<boolean>,
  how: { giveUpAt: number; clock: () => number; stopping: () => boolean; log: Logger },
): Promise<boolean | undefined> {
  let wait = RECORD_RETRY_FIRST_MS;
  for (;;) {
    try {
      return await write();
    } catch (err) {
      if (how.stopping() || how.clock() + wait > how.giveUpAt) {
        how.log.error({ err, jobId: job.id }, `${what} failed; the job runs again once its lease lapses`);
        return undefined;
      }
      how.log.warn({ err, jobId: job.id }, `${what} failed; retrying`);
      await sleep(wait);
      wait = Math.min(wait * 2, RECORD_RETRY_MAX_MS);
    }
  }
}

/** How an attempt ends in the store; `succeeded` gives the job as its result left it (no read back). */
export interface Outcome {
  what: string;
  write: () => Promise<boolean>;
  final: boolean;
  succeeded?: () => Job;
}

/** `job` (as claimed) once its result was written at `at`: what the store now holds for it. */
export function succeededJob(job: Job, stored: CompleteResult, at: number): Job {
  const { leaseOwner: _owner, leaseExpiresAt: _expires, result: _r, resultKey: _k, ...rest } = job;
  return {
    ...rest,
    status: "succeeded",
    ...(stored.result !== undefined ? { result: stored.result } : {}),
    ...(stored.resultKey !== undefined ? { resultKey: stored.resultKey } : {}),
    resultBytes: stored.resultBytes,
    finishedAt: at,
    updatedAt: at,
  };
}
