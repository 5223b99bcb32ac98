// In-process notifications of job changes, for long-polls, SSE and WebSocket subscribers.
// Changes made by another process sharing the store are picked up by the subscribers' polling.
import { EventEmitter } from "node:events";
import type { Job } from "./job.js";

export class JobEvents {
  private readonly emitter = new EventEmitter();

  constructor() {
    // Every long-poll and stream subscribes: no listener limit.
    this.emitter.setMaxListeners(0);
  }

  publish(job: Job): void {
    this.emitter.emit(job.id, job);
    this.emitter.emit("*", job);
  }

  /** Listeners now registered for job `id`, or for every id together when none is given. */
  listenerCount(id?: string): number {
    if (id !== undefined) return this.emitter.listenerCount(id);
    return this.emitter.eventNames().reduce((n, name) => n + this.emitter.listenerCount(name), 0);
  }

  /** Calls `fn` on each change of job `id` ("*" for all jobs); returns the unsubscribe function. */
  subscribe(id: string, fn: (job: Job) => void): () => void {
    this.emitter.on(id, fn);
    return () => this.emitter.off(id, fn);
  }
}
