// Writing an attempt's outcome to the job store after the work was done: a failing store is
// retried with backoff for up to one lease, since the work itself need not run again.
import type { Logger } from "pino";
import type { Job } from "./job.js";

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
