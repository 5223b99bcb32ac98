// Admission for language models: a fixed set of slots (llama.cpp sequences, upstream
// connections) handed out first come, first served, with a bounded wait line. Beyond the line
// a request is refused at once with a retryable 503, so a burst never piles up unbounded work;
// a waiter whose client leaves, or whose deadline passes, leaves the line at once. Background
// work (jobs) waits behind every interactive request: a freed slot goes to the longest-waiting
// interactive request, and to background work only when none waits. Background waiters are
// bounded by their callers (a model's job workers), so they take no place in the line.
import type { CancelHandle } from "../cancel.js";
import { ModelportError } from "../errors.js";

interface Waiter<T> {
  background: boolean;
  resolve(slot: T): void;
  reject(err: ModelportError): void;
  cleanup(): void;
}

export interface SlotQueueOptions {
  /** Model name, for messages. */
  name: string;
  /** Requests allowed to wait for a slot; more are refused with MP_ERR_MODEL_OVERLOADED. */
  maxWaiting: number;
  /** Longest wait for a slot (ms), after which MP_ERR_DEADLINE_EXCEEDED; default: none. */
  maxWaitMs?: number;
}

export class SlotQueue<T> {
  private readonly free: T[];
  private readonly waiters: Waiter<T>[] = [];
  /** Waiters that are background work. */
  private backgroundWaiting = 0;
  private readonly limit: number;
  private closed = false;
  /** Smoothed seconds a slot stays taken, for Retry-After. */
  private holdSeconds = 1;
  private readonly takenAt = new Map<T, number>();

  constructor(
    slots: readonly T[],
    private readonly options: SlotQueueOptions,
  ) {
    this.free = [...slots];
    this.limit = slots.length;
  }

  get active(): number {
    return this.limit - this.free.length;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  get capacity(): number {
    return this.limit;
  }

  /**
   * A free slot, now or when one is released; among free ones, the one `score` rates highest
   * (a waiter gets whichever is released first). `background` work gets a released slot only
   * when no interactive request waits for it.
   * @throws ModelportError MP_ERR_MODEL_OVERLOADED (line full), MP_ERR_REQUEST_CANCELED (canceled
   * by the client), MP_ERR_DEADLINE_EXCEEDED (waited maxWaitMs), MP_ERR_SERVER_SHUTTING_DOWN (closed).
   */
  acquire(cancel?: CancelHandle, score?: (slot: T) => number, background = false): Promise<T> {
    if (this.closed) return Promise.reject(this.closedError());
    if (cancel?.canceled) return Promise.reject(canceled());
    const slot = this.take(score);
    if (slot !== undefined) {
      this.takenAt.set(slot, performance.now());
      return Promise.resolve(slot);
    }
    if (!background && this.waiters.length - this.backgroundWaiting >= this.options.maxWaiting) {
      const retryAfterSeconds = this.retryAfterSeconds();
      return Promise.reject(
        new ModelportError(
          "MP_ERR_MODEL_OVERLOADED",
          `model '${this.options.name}' is busy: ${this.limit} generating and ${this.waiters.length} waiting (llm.maxWaiting ${this.options.maxWaiting}); retry in about ${retryAfterSeconds} s`,
          { retryAfterSeconds, active: this.limit, waiting: this.waiters.length },
        ),
      );
    }
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let detach: (() => void) | undefined;
      const onAbort = () => {
        this.remove(waiter);
        reject(canceled());
      };
      const waiter: Waiter<T> = {
        background,
        resolve,
        reject,
        cleanup: () => {
          if (timer) clearTimeout(timer);
          detach?.();
        },
      };
      detach = cancel?.onCancel(onAbort);
      // Background work is bounded by its own timeout (a job's), which cancels it.
      if (this.options.maxWaitMs !== undefined && !background) {
        timer = setTimeout(() => {
          this.remove(waiter);
          reject(
            new ModelportError(
              "MP_ERR_DEADLINE_EXCEEDED",
              `waited ${this.options.maxWaitMs} ms for a free sequence of model '${this.options.name}' (limits.timeoutMs)`,
            ),
          );
        }, this.options.maxWaitMs);
      }
      this.waiters.push(waiter);
      if (background) this.backgroundWaiting++;
    });
  }

  /** A free slot: the one `score` rates highest (ties: the most recently freed), else the most recently freed. */
  private take(score?: (slot: T) => number): T | undefined {
    if (!score || this.free.length < 2) return this.free.pop();
    let best = this.free.length - 1;
    let bestScore = score(this.free[best]!);
    for (let i = best - 1; i >= 0; i--) {
      const s = score(this.free[i]!);
      if (s > bestScore) {
        best = i;
        bestScore = s;
      }
    }
    return this.free.splice(best, 1)[0];
  }

  /** Gives `slot` back: to the longest interactive waiter, else the longest background one, else to the free list. */
  release(slot: T): void {
    const started = this.takenAt.get(slot);
    if (started !== undefined) {
      const seconds = (performance.now() - started) / 1000;
      this.holdSeconds = 0.8 * this.holdSeconds + 0.2 * seconds;
    }
    const next = this.next();
    if (next && !this.closed) {
      next.cleanup();
      this.takenAt.set(slot, performance.now());
      next.resolve(slot);
      return;
    }
    this.takenAt.delete(slot);
    this.free.push(slot);
  }

  /** Refuses every waiter and every later acquire with MP_ERR_SERVER_SHUTTING_DOWN. */
  close(): void {
    this.closed = true;
    this.backgroundWaiting = 0;
    for (const w of this.waiters.splice(0)) {
      w.cleanup();
      w.reject(this.closedError());
    }
  }

  /** Takes the waiter a released slot goes to out of the line. */
  private next(): Waiter<T> | undefined {
    const i = this.backgroundWaiting === 0 ? 0 : this.waiters.findIndex((w) => !w.background);
    const waiter = this.waiters.splice(Math.max(i, 0), 1)[0];
    if (waiter?.background) this.backgroundWaiting--;
    return waiter;
  }

  private remove(waiter: Waiter<T>): void {
    const i = this.waiters.indexOf(waiter);
    if (i >= 0) {
      this.waiters.splice(i, 1);
      if (waiter.background) this.backgroundWaiting--;
    }
    waiter.cleanup();
  }

  /** When the line will have moved by one place, from how long slots have been held lately. */
  private retryAfterSeconds(): number {
    const seconds = (this.holdSeconds * (this.waiters.length + 1)) / this.limit;
    return Math.min(60, Math.max(1, Math.ceil(seconds)));
  }

  private closedError(): ModelportError {
    return new ModelportError("MP_ERR_SERVER_SHUTTING_DOWN", `model '${this.options.name}' is closing`);
  }
}

function canceled(): ModelportError {
  return new ModelportError("MP_ERR_REQUEST_CANCELED", "the client closed the connection");
}
