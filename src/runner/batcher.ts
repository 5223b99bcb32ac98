// One model's request queue: admits work within its limits (503 with Retry-After beyond them),
// drops work whose deadline can no longer be met (504) or whose client left, joins requests
// into batches by the adaptive policy, and hands each caller its own rows back.
import { ModelportError } from "../errors.js";
import type { TensorMap } from "../tensor.js";
import { ArrivalRate, type BatchSettings, CostModel, decide } from "./batch-policy.js";
import type { CancelHandle } from "./cancel.js";
import { concatBatch, sliceRows, splitBatch } from "./tensor-batch.js";

export interface SubmitOptions {
  /** Absolute deadline on the batcher's clock (ms); Infinity for none. */
  deadline?: number;
  /** Canceled when the client goes away: queued work is removed. */
  cancel?: CancelHandle;
  /** Background work (jobs) waits behind every synchronous request in the queue. */
  background?: boolean;
  /** The request's id, passed on when the work is forwarded to a runner process (API tier). */
  requestId?: string;
}

export interface BatcherObserver {
  batch(rows: number, requests: number, ms: number): void;
  queueWait(ms: number): void;
  queueDepth(rows: number): void;
  rejected(reason: "overloaded" | "deadline" | "canceled"): void;
}

export interface BatcherOptions extends BatchSettings {
  /** Rows allowed to wait in the queue; more is refused with 503. */
  maxQueueRows: number;
  /** Whether requests may be joined (dim 0 is the batch for every input and output). */
  batchable: boolean;
  clock?: () => number;
  observer?: BatcherObserver;
}

interface Item {
  inputs: TensorMap;
  rows: number;
  enqueuedAt: number;
  deadline: number;
  resolve(outputs: TensorMap): void;
  reject(err: Error): void;
  done: boolean;
  background: boolean;
  detach?: () => void;
}

/** Estimates are inflated by this factor when judging deadlines, so "accepted" means "will make it". */
const DEADLINE_SAFETY = 1.25;

const noopObserver: BatcherObserver = { batch() {}, queueWait() {}, queueDepth() {}, rejected() {} };

/** Rows in a request: dim 0 of its first tensor (a non-batchable request counts as one). */
function rowCount(inputs: TensorMap, batchable: boolean): number {
  if (!batchable) return 1;
  const first = Object.values(inputs)[0];
  return first?.shape[0] ?? 1;
}

export class Batcher {
  private readonly queue: Item[] = [];
  private queuedRows = 0;
  private minDeadline = Number.POSITIVE_INFINITY;
  private minDeadlineStale = false;
  private backgroundQueued = 0;
  private inFlight = 0;
  /** While paused nothing is dispatched (the runner is being replaced); see pause(). */
  private paused = false;
  private readonly idleWaiters: (() => void)[] = [];
  /** Batches on the runner now, to estimate when queued work can start. */
  private readonly running = new Set<{ rows: number; started: number }>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private readonly cost = new CostModel();
  private readonly arrivals = new ArrivalRate();
  /** Completed rows per ms, for Retry-After. */
  private readonly drain = new ArrivalRate(1000);
  private readonly clock: () => number;
  private readonly observer: BatcherObserver;
  private readonly settings: BatchSettings;

  constructor(
    private readonly run: (inputs: TensorMap) => Promise<TensorMap>,
    private readonly options: BatcherOptions,
  ) {
    this.clock = options.clock ?? (() => performance.now());
    this.observer = options.observer ?? noopObserver;
    // A model that cannot be batched takes one request per call.
    this.settings = options.batchable
      ? options
      : { ...options, maxBatchRows: 1, adaptive: false, maxDelayMs: 0 };
  }

  get depth(): { queuedRows: number; inFlight: number } {
    return { queuedRows: this.queuedRows, inFlight: this.inFlight };
  }

  /**
   * Stops dispatching: new and queued requests wait (admission limits and deadlines still
   * apply) until resume(). Used while the runner is replaced under a ready model.
   */
  pause(): void {
    this.paused = true;
    this.schedule();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.schedule();
  }

  /** Resolves once no batch is in flight (at once if none is). Paired with pause() to drain. */
  whenIdle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Queues `inputs` and resolves to their outputs. A request larger than a batch is split
   * and its pieces reassembled in order.
   * @throws ModelportError MP_ERR_MODEL_OVERLOADED, MP_ERR_DEADLINE_EXCEEDED, MP_ERR_REQUEST_CANCELED.
   */
  submit(inputs: TensorMap, opts: SubmitOptions = {}): Promise<TensorMap> {
    const rows = rowCount(inputs, this.options.batchable);
    const max = this.settings.maxBatchRows;
    const now = this.clock();
    const deadline = opts.deadline ?? Number.POSITIVE_INFINITY;
    if (this.queuedRows + rows > this.options.maxQueueRows) {
      this.observer.rejected("overloaded");
      return Promise.reject(this.overloaded(rows, now));
    }
    if (this.expectedDone(now, rows) > deadline) {
      // Feasible on an idle model but not behind this backlog: that is overload, say when to retry.
      const idleFeasible = now + this.safeCost(Math.min(rows, max)) <= deadline;
      this.observer.rejected(idleFeasible ? "overloaded" : "deadline");
      return Promise.reject(idleFeasible ? this.overloaded(rows, now) : deadlineError(deadline - now));
    }
    if (rows <= max) return this.enqueue(inputs, rows, now, deadline, opts.cancel, opts.background);
    const pieces: Promise<TensorMap>[] = [];
    for (let from = 0; from < rows; from += max) {
      const to = Math.min(rows, from + max);
      pieces.push(
        this.enqueue(sliceRows(inputs, from, to), to - from, now, deadline, opts.cancel, opts.background),
      );
    }
    return Promise.all(pieces).then(concatBatch);
  }

  private enqueue(
    inputs: TensorMap,
    rows: number,
    now: number,
    deadline: number,
    cancel?: CancelHandle,
    background = false,
  ): Promise<TensorMap> {
    return new Promise<TensorMap>((resolve, reject) => {
      const item: Item = {
        inputs,
        rows,
        enqueuedAt: now,
        deadline,
        resolve,
        reject,
        done: false,
        background,
      };
      if (cancel) {
        if (cancel.canceled) {
          this.observer.rejected("canceled");
          reject(canceledError());
          return;
        }
        item.detach = cancel.onCancel(() => this.cancel(item));
      }
      // Synchronous requests go ahead of queued background work (backgroundQueued counts
      // background items not yet settled: a hint that saves the scan when there are none).
      const firstBackground =
        !background && this.backgroundQueued > 0 ? this.queue.findIndex((i) => i.background) : -1;
      if (firstBackground >= 0) this.queue.splice(firstBackground, 0, item);
      else this.queue.push(item);
      if (background) this.backgroundQueued++;
      if (deadline < this.minDeadline) this.minDeadline = deadline;
      this.queuedRows += rows;
      this.arrivals.observe(rows, now);
      this.observer.queueDepth(this.queuedRows);
      this.schedule();
    });
  }

  /** Predicted batch time with a safety margin: deadlines are promises, estimates are not. */
  private safeCost(rows: number): number {
    return this.cost.estimate(rows) * DEADLINE_SAFETY;
  }

  /**
   * When `rows` arriving now would be answered if queued: after the batches running now and
   * the rows queued ahead of them, in batches of at most maxBatchRows.
   */
  private expectedDone(now: number, rows: number): number {
    let start = this.runnerFreeAt(now);
    const max = this.settings.maxBatchRows;
    for (let ahead = this.queuedRows; ahead > 0; ahead -= max) start += this.safeCost(Math.min(ahead, max));
    return start + this.safeCost(Math.min(rows, max));
  }

  /** When the runner will have finished the batches it holds: it runs them one after another. */
  private runnerFreeAt(now: number): number {
    let free = Number.NEGATIVE_INFINITY;
    for (const r of this.running) free = Math.max(r.started, free) + this.safeCost(r.rows);
    return Math.max(now, free);
  }

  private cancel(item: Item): void {
    const i = this.queue.indexOf(item);
    if (i < 0) return; // already running: the result is simply not sent
    this.queue.splice(i, 1);
    this.minDeadlineStale = true;
    this.queuedRows -= item.rows;
    this.observer.queueDepth(this.queuedRows);
    this.observer.rejected("canceled");
    this.settle(item, undefined, canceledError());
  }

  private schedule(): void {
    const now = this.clock();
    if (this.paused) {
      this.expireWhilePaused(now);
      return;
    }
    const decision = decide(
      {
        now,
        queuedRows: this.queuedRows,
        oldestAt: this.queue[0]?.enqueuedAt ?? now,
        newestAt: this.queue.at(-1)?.enqueuedAt ?? now,
        earliestDeadline: this.earliestDeadline(),
        inFlight: this.inFlight,
      },
      this.settings,
      (rows) => this.cost.estimate(rows),
      this.arrivals.at(now),
    );
    if (decision.kind === "dispatch") {
      this.clearTimer();
      this.dispatch(decision.rows, now);
      // Several batches may be allowed in flight.
      if (this.queue.length > 0) this.schedule();
    } else if (decision.kind === "wait") {
      this.armTimer(decision.until, now);
    } else this.clearTimer();
  }

  /**
   * While paused nothing is dispatched, so nothing else would notice a deadline passing: drop
   * the requests that can no longer be met (504, as at dispatch) and wake up for the next one.
   */
  private expireWhilePaused(now: number): void {
    let dropped = false;
    for (let i = 0; i < this.queue.length; ) {
      const item = this.queue[i]!;
      if (now + this.cost.estimate(item.rows) > item.deadline) {
        this.queue.splice(i, 1);
        this.minDeadlineStale = true;
        this.queuedRows -= item.rows;
        this.observer.rejected("deadline");
        this.settle(item, undefined, deadlineError(item.deadline - item.enqueuedAt));
        dropped = true;
      } else i++;
    }
    if (dropped) this.observer.queueDepth(this.queuedRows);
    let next = Number.POSITIVE_INFINITY;
    for (const item of this.queue) next = Math.min(next, item.deadline - this.cost.estimate(item.rows));
    if (next === Number.POSITIVE_INFINITY) this.clearTimer();
    else this.armTimer(next, now);
  }

  /** The earliest deadline in the queue; rescanned only after removals, not on every arrival. */
  private earliestDeadline(): number {
    if (this.minDeadlineStale) {
      let d = Number.POSITIVE_INFINITY;
      for (const item of this.queue) if (item.deadline < d) d = item.deadline;
      this.minDeadline = d;
      this.minDeadlineStale = false;
    }
    return this.minDeadline;
  }

  private armTimer(at: number, now: number): void {
    if (this.timer && this.timerAt <= at) return;
    this.clearTimer();
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Number.POSITIVE_INFINITY;
        this.schedule();
      },
      Math.max(0, at - now),
    );
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  /** Takes whole requests, oldest first, up to `rows`; drops those whose deadline cannot be met. */
  private dispatch(rows: number, now: number): void {
    const batch: Item[] = [];
    let taken = 0;
    let batchDeadline = Number.POSITIVE_INFINITY;
    // With batches already on the runner, this one starts when they finish.
    const startAt = this.runnerFreeAt(now);
    while (this.queue.length > 0 && taken + this.queue[0]!.rows <= rows) {
      const item = this.queue[0]!;
      if (startAt + this.safeCost(item.rows) > item.deadline) {
        // Too late even alone: drop it before it costs any compute.
        this.queue.shift();
        this.minDeadlineStale = true;
        this.queuedRows -= item.rows;
        this.observer.rejected("deadline");
        this.settle(item, undefined, deadlineError(item.deadline - item.enqueuedAt));
        continue;
      }
      // A bigger batch takes longer: stop before it would make anyone in it late.
      const deadline = Math.min(batchDeadline, item.deadline);
      if (batch.length > 0 && startAt + this.safeCost(taken + item.rows) > deadline) break;
      this.queue.shift();
      this.minDeadlineStale = true;
      this.queuedRows -= item.rows;
      batchDeadline = deadline;
      batch.push(item);
      taken += item.rows;
      this.observer.queueWait(now - item.enqueuedAt);
    }
    this.observer.queueDepth(this.queuedRows);
    if (batch.length === 0) return;
    this.inFlight++;
    const started = this.clock();
    const running = { rows: taken, started };
    this.running.add(running);
    this.execute(batch).finally(() => {
      const ms = this.clock() - started;
      this.inFlight--;
      this.running.delete(running);
      this.cost.observe(taken, ms);
      this.drain.observe(taken, this.clock());
      this.observer.batch(taken, batch.length, ms);
      if (this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake();
      this.schedule();
    });
  }

  private async execute(batch: Item[]): Promise<void> {
    const inputs = this.options.batchable ? concatBatch(batch.map((i) => i.inputs)) : batch[0]!.inputs;
    try {
      const outputs = await this.run(inputs);
      const pieces = splitBatch(
        outputs,
        batch.map((i) => i.rows),
      );
      for (let k = 0; k < batch.length; k++) this.settle(batch[k]!, pieces[k]);
    } catch (err) {
      // One request's bad rows must not fail its neighbours: retry each alone.
      if (batch.length > 1 && err instanceof ModelportError && !err.retryable) {
        await Promise.all(
          batch.map((item) =>
            this.run(item.inputs).then(
              (out) => this.settle(item, out),
              (e: Error) => this.settle(item, undefined, e),
            ),
          ),
        );
        return;
      }
      for (const item of batch) this.settle(item, undefined, err as Error);
    }
  }

  private settle(item: Item, outputs: TensorMap | undefined, err?: Error): void {
    if (item.done) return;
    item.done = true;
    if (item.background) this.backgroundQueued--;
    item.detach?.();
    if (err) item.reject(err);
    else item.resolve(outputs!);
  }

  private overloaded(rows: number, now: number): ModelportError {
    const rate = this.drain.at(now); // rows per ms
    const seconds = rate > 0 ? Math.ceil(this.queuedRows / rate / 1000) : 1;
    const retryAfter = Math.min(60, Math.max(1, seconds));
    return new ModelportError(
      "MP_ERR_MODEL_OVERLOADED",
      `the model is overloaded (${this.queuedRows} rows waiting, limit ${this.options.maxQueueRows}; the backlog would outlast the deadline); retry in about ${retryAfter} s`,
      { retryAfterSeconds: retryAfter, queuedRows: this.queuedRows, rows },
    );
  }

  /** Rejects everything still queued (shutdown or runner loss). */
  failQueued(err: Error): void {
    this.clearTimer();
    for (const item of this.queue.splice(0)) this.settle(item, undefined, err);
    this.minDeadlineStale = true;
    this.queuedRows = 0;
    this.observer.queueDepth(0);
  }
}

function deadlineError(budgetMs: number): ModelportError {
  return new ModelportError(
    "MP_ERR_DEADLINE_EXCEEDED",
    `the request's deadline (${Math.max(0, Math.round(budgetMs))} ms) cannot be met; it was dropped before inference. Raise X-Request-Timeout-Ms or retry when the model is less busy`,
  );
}

function canceledError(): ModelportError {
  return new ModelportError(
    "MP_ERR_REQUEST_CANCELED",
    "the client closed the connection; its queued work was removed",
  );
}
