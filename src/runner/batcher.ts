// One model's request queue: admits work within its limits (503 with Retry-After beyond them),
// drops work whose deadline can no longer be met (504) or whose client left, joins requests
// into batches by the adaptive policy, and hands each caller its own rows back.
import { ModelportError } from "../errors.js";
import type { TensorMap } from "../tensor.js";
import { ArrivalRate, type BatchSettings, CostModel, decide } from "./batch-policy.js";
import { concatBatch, sliceRows, splitBatch } from "./tensor-batch.js";

export interface SubmitOptions {
  /** Absolute deadline on the batcher's clock (ms); Infinity for none. */
  deadline?: number;
  /** Aborted when the client goes away: queued work is removed. */
  signal?: AbortSignal;
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
  detach?: () => void;
}

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
  private inFlight = 0;
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
    if (now + this.cost.estimate(Math.min(rows, max)) > deadline) {
      this.observer.rejected("deadline");
      return Promise.reject(deadlineError(deadline - now));
    }
    if (rows <= max) return this.enqueue(inputs, rows, now, deadline, opts.signal);
    const pieces: Promise<TensorMap>[] = [];
    for (let from = 0; from < rows; from += max) {
      const to = Math.min(rows, from + max);
      pieces.push(this.enqueue(sliceRows(inputs, from, to), to - from, now, deadline, opts.signal));
    }
    return Promise.all(pieces).then(concatBatch);
  }

  private enqueue(
    inputs: TensorMap,
    rows: number,
    now: number,
    deadline: number,
    signal?: AbortSignal,
  ): Promise<TensorMap> {
    return new Promise<TensorMap>((resolve, reject) => {
      const item: Item = { inputs, rows, enqueuedAt: now, deadline, resolve, reject, done: false };
      if (signal) {
        if (signal.aborted) {
          this.observer.rejected("canceled");
          reject(canceledError());
          return;
        }
        const onAbort = () => this.cancel(item);
        signal.addEventListener("abort", onAbort, { once: true });
        item.detach = () => signal.removeEventListener("abort", onAbort);
      }
      this.queue.push(item);
      this.queuedRows += rows;
      this.arrivals.observe(rows, now);
      this.observer.queueDepth(this.queuedRows);
      this.schedule();
    });
  }

  private cancel(item: Item): void {
    const i = this.queue.indexOf(item);
    if (i < 0) return; // already running: the result is simply not sent
    this.queue.splice(i, 1);
    this.queuedRows -= item.rows;
    this.observer.queueDepth(this.queuedRows);
    this.observer.rejected("canceled");
    this.settle(item, undefined, canceledError());
  }

  private schedule(): void {
    const now = this.clock();
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

  private earliestDeadline(): number {
    let d = Number.POSITIVE_INFINITY;
    for (const item of this.queue) if (item.deadline < d) d = item.deadline;
    return d;
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
    while (this.queue.length > 0 && taken + this.queue[0]!.rows <= rows) {
      const item = this.queue.shift()!;
      this.queuedRows -= item.rows;
      if (now + this.cost.estimate(taken + item.rows) > item.deadline) {
        this.observer.rejected("deadline");
        this.settle(item, undefined, deadlineError(item.deadline - item.enqueuedAt));
        continue;
      }
      batch.push(item);
      taken += item.rows;
      this.observer.queueWait(now - item.enqueuedAt);
    }
    this.observer.queueDepth(this.queuedRows);
    if (batch.length === 0) return;
    this.inFlight++;
    const started = this.clock();
    this.execute(batch).finally(() => {
      const ms = this.clock() - started;
      this.inFlight--;
      this.cost.observe(taken, ms);
      this.drain.observe(taken, this.clock());
      this.observer.batch(taken, batch.length, ms);
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
      `the model's queue is full (${this.queuedRows} rows waiting, limit ${this.options.maxQueueRows}); retry in about ${retryAfter} s`,
      { retryAfterSeconds: retryAfter, queuedRows: this.queuedRows, rows },
    );
  }

  /** Rejects everything still queued (shutdown or runner loss). */
  failQueued(err: Error): void {
    this.clearTimer();
    for (const item of this.queue.splice(0)) this.settle(item, undefined, err);
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
