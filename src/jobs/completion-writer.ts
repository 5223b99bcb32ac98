// Group commit of job results: completions that arrive while the store is busy writing, or within
// one event-loop turn, are written together in one completeMany (one SQLite transaction or one
// Redis script), so a model answering a batch of jobs costs one store write, not one per job.
// Each caller still gets its own answer (done false: its lease was no longer held) and the time
// the result was written with (its finishedAt).
import type { Completion, JobStore } from "./job-store.js";

/** Most completions written in one store call; more wait for the next. */
const MAX_GROUP = 512;

/** What the store answered for one completion, and the time its group was written at. */
export interface Written {
  done: boolean;
  at: number;
}

interface Pending {
  completion: Completion;
  resolve: (answer: Written) => void;
  reject: (err: unknown) => void;
}

export class CompletionWriter {
  private pending: Pending[] = [];
  private scheduled = false;
  private writing = false;

  constructor(
    private readonly store: Pick<JobStore, "completeMany">,
    private readonly clock: () => number,
  ) {}

  /**
   * Records one job's result with the next group. @returns the store's answer for it; rejects
   * when the group's write failed (nothing of it was written: the caller may try again).
   */
  complete(completion: Completion): Promise<Written> {
    return new Promise((resolve, reject) => {
      this.pending.push({ completion, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    // While a group is being written, the next one fills up; it goes as soon as that write ends.
    if (this.scheduled || this.writing) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.writing || this.pending.length === 0) return;
    this.writing = true;
    const group = this.pending.splice(0, MAX_GROUP);
    try {
      const at = this.clock();
      const answers = await this.store.completeMany(
        group.map((p) => p.completion),
        at,
      );
      for (const [i, p] of group.entries()) p.resolve({ done: answers[i] === true, at });
    } catch (err) {
      for (const p of group) p.reject(err);
    } finally {
      this.writing = false;
      if (this.pending.length > 0) this.schedule();
    }
  }
}
