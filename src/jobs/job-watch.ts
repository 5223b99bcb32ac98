// Finds changes that another process sharing the job store made to the jobs someone here waits on
// (long-polls, event streams, WebSockets): one status read for all of them together at a steady
// pace, never one per waiter, and a whole-job read only for a job whose status or updatedAt moved,
// published as an event like an in-process change. Changes made in this process arrive as events
// at once and keep what is known current, so they are never read back.
import type { Logger } from "pino";
import type { Job, JobStatus } from "./job.js";
import type { JobEvents } from "./job-events.js";
import type { JobState, JobStore } from "./job-store.js";

interface Followed {
  status: JobStatus;
  updatedAt: number;
  /** Followers: how many; and those told when the job cannot be followed (see follow()). */
  refs: number;
  lost: Set<(err?: unknown) => void>;
}

export class JobWatch {
  private readonly followed = new Map<string, Followed>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(
    private readonly store: Pick<JobStore, "states" | "get">,
    private readonly events: JobEvents,
    private readonly log: Logger,
    private readonly everyMs = 1000,
  ) {
    events.subscribe("*", (job) => {
      const f = this.followed.get(job.id);
      if (f) {
        f.status = job.status;
        f.updatedAt = job.updatedAt;
      }
    });
  }

  /** Jobs followed now (each counted once however many follow it). */
  get size(): number {
    return this.followed.size;
  }

  /**
   * Follows `job` (as the caller saw it) until the returned function is called: its changes by
   * other processes are published on the events. `onLost` hears that it left the store (no
   * argument) or that reading the store failed (the error; the watch goes on trying).
   */
  follow(job: { id: string } & JobState, onLost?: (err?: unknown) => void): () => void {
    let f = this.followed.get(job.id);
    if (!f) {
      f = { status: job.status, updatedAt: job.updatedAt, refs: 0, lost: new Set() };
      this.followed.set(job.id, f);
    }
    const entry = f;
    entry.refs++;
    if (onLost) entry.lost.add(onLost);
    if (!this.timer) {
      this.timer = setInterval(() => void this.poll(), this.everyMs);
      this.timer.unref();
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      entry.refs--;
      if (onLost) entry.lost.delete(onLost);
      if (entry.refs === 0 && this.followed.get(job.id) === entry) this.followed.delete(job.id);
      if (this.followed.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** One round: every followed job's state in one store call; one round at a time, however slow the store. */
  private async poll(): Promise<void> {
    if (this.polling || this.followed.size === 0) return;
    this.polling = true;
    const ids = [...this.followed.keys()];
    try {
      const states = await this.store.states(ids);
      for (const id of ids) {
        const f = this.followed.get(id);
        const state = states.get(id);
        if (!f || (state && state.status === f.status && state.updatedAt === f.updatedAt)) continue;
        const job: Job | undefined = state ? await this.store.get(id) : undefined;
        if (job) this.events.publish(job);
        else for (const lost of [...f.lost]) lost();
      }
    } catch (err) {
      // The next round tries again; a follower that must answer now (a long-poll, an event
      // stream) hears of the failure.
      this.log.warn({ err }, "reading the states of followed jobs failed; trying again");
      for (const id of ids) for (const lost of [...(this.followed.get(id)?.lost ?? [])]) lost(err);
    } finally {
      this.polling = false;
    }
  }
}
