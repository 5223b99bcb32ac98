// One model's request queue: admits work within its limits (503 with Retry-After beyond them),
// drops work whose deadline can no longer be met (504) or whose client left, joins requests
// of the same layout into batches by the adaptive policy, and hands each caller its own rows
// back. A deadline bounds the whole wait, the runner call included: a request still computing
// at its deadline is answered 504 at once (its rows are discarded when they come back), and a
// batch on the runner longer than the hard limit is reported (onStuck) so the runner can be
// replaced. Nothing in the batch path can escape as an unhandled rejection: every failure
// becomes an error for the requests it concerns. A request that finds the process idle (no other
// request in progress, of any model) and whose model computes it in well under a millisecond, by
// measurement, goes straight to the in-thread copy when there is one (inline-lane.ts): no batching
// wait, no thread hop.

import type { CancelHandle } from "../cancel.js";
import { ModelportError } from "../errors.js";
import type { TraceParent } from "../telemetry/propagation.js";
import {
  ATTR,
  type Attributes,
  endSpan,
  parentOf,
  SPAN,
  type Span,
  stage,
  startSpan,
  tracing,
} from "../telemetry/spans.js";
import type { TensorMap } from "../tensor.js";
import { ArrivalRate, type BatchSettings, CostModel, decide } from "./batch-policy.js";
import { checkOutputs, concatBatch, joinable, sliceRows, splitBatch } from "./tensor-batch.js";

export interface SubmitOptions {
  /** Absolute deadline on the batcher's clock (ms); Infinity for none. */
  deadline?: number;
  /** Canceled when the client goes away: queued work is removed. */
  cancel?: CancelHandle;
  /** Background work (jobs) waits behind every synchronous request in the queue. */
  background?: boolean;
  /** The request's id, passed on when the work is forwarded to a runner process (API tier). */
  requestId?: string;
  /** Hears the request's share of the machine time of each batch it was in (ms, by its rows). */
  onCompute?: (ms: number) => void;
  /** The request's place in a trace: its queue span is a child, and its batch links to it. */
  trace?: TraceParent | undefined;
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
  /** A batch on the runner longer than this (ms) is stuck: onStuck is called once for it. Default: never. */
  hardTimeoutMs?: number;
  /** Called once per batch that has been on the runner longer than hardTimeoutMs. */
  onStuck?: (elapsedMs: number, rows: number) => void;
  /** Called with a failure of the batcher's own bookkeeping (a bug), which is contained, not thrown. */
  onInternalError?: (err: unknown) => void;
  /**
   * A copy of the model in this thread (inline-lane.ts) and the longest predicted time (ms) of a
   * call it may take: a request to an idle model whose predicted time is within it runs there.
   */
  inline?: { predict(inputs: TensorMap): Promise<TensorMap>; maxMs: number };
  /** Inline calls took INLINE_SLOW_FACTOR × maxMs or more, often enough to drop the lane (INLINE_SLOW_CALLS). */
  onInlineSlow?: (ms: number, rows: number) => void;
  /** The model's name, for span attributes (tracing on). */
  model?: string;
}

interface Item {
  inputs: TensorMap;
  rows: number;
  /** Input bytes, for maxBatchBytes. */
  bytes: number;
  enqueuedAt: number;
  deadline: number;
  resolve(outputs: TensorMap): void;
  reject(err: Error): void;
  done: boolean;
  background: boolean;
  detach?: () => void;
  onCompute: ((ms: number) => void) | undefined;
  /** The request's place in a trace, and (tracing on) when it was queued, performance.now(). */
  trace: TraceParent | undefined;
  tracedAt: number | undefined;
}

/** A batch sent to the runner and not yet answered. */
interface Running {
  rows: number;
  started: number;
  items: Item[];
  /** onStuck was called for it. */
  stuck: boolean;
}

/** Estimates are inflated by this factor when judging deadlines, so "accepted" means "will make it". */
const DEADLINE_SAFETY = 1.25;

/**
 * Requests (pieces of a split one each) queued or running in any batcher of this process: counted
 * where they are queued or start in-thread, and uncounted where they are settled, so that a
 * request costs no promise for it. The in-thread copy of one model must not take the HTTP thread
 * while another model's requests wait for it: with many models each idle in turn, inline calls
 * would otherwise move all inference onto that thread.
 */
let unanswered = 0;

/** Batches measured before the inline lane is trusted with a request: its use is decided on measurements. */
export const INLINE_MIN_SAMPLES = 8;

/**
 * An inline call this many times over the lane's maxMs is slow. INLINE_SLOW_CALLS of them, and at
 * least 1% of the inline calls, mean the cost is not what the measurements predict (data-dependent
 * work): the lane is dropped, so the HTTP thread does not keep blocking. One slow call alone may be
 * the machine (a descheduled thread, a GC pause), not the model.
 */
export const INLINE_SLOW_FACTOR = 5;
export const INLINE_SLOW_CALLS = 3;

/**
 * After an in-thread call that other requests arrived during, requests go to the runner for this
 * long. Under concurrent load the process is idle only between one batch's answers and the next
 * request's arrival; an in-thread call there takes the HTTP thread, the busiest one, while the
 * runner's core is idle, and the requests arriving meanwhile wait for it (at concurrency 64 on
 * churn-tree: 4-7 us of the HTTP thread a request, docs/PERFORMANCE.md). Requests that come one
 * at a time never overlap a call, so they keep the lane.
 */
export const INLINE_CROWDED_MS = 100;

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
  private readonly running = new Set<Running>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  /** One timer for everything that can happen while batches are on the runner: deadlines and the hard limit. */
  private watchTimer: NodeJS.Timeout | undefined;
  private watchAt = Number.POSITIVE_INFINITY;
  private readonly hardTimeoutMs: number;
  private readonly cost = new CostModel();
  private readonly arrivals = new ArrivalRate();
  /** Completed rows per ms, for Retry-After. */
  private readonly drain = new ArrivalRate(1000);
  private readonly clock: () => number;
  private readonly observer: BatcherObserver;
  private readonly settings: BatchSettings;
  private inline: BatcherOptions["inline"];
  private inlineCalls = 0;
  private inlineSlowCalls = 0;
  /** No in-thread call before this time (INLINE_CROWDED_MS). */
  private inlineCrowdedUntil = Number.NEGATIVE_INFINITY;
  /**
   * The model's own compute time per batch (the runner's report, and inline calls): what an
   * inline call would cost. The batch times of `cost` include the hop and a sleeping worker's
   * wake-up, which are exactly what the inline lane saves.
   */
  private readonly compute = new CostModel();
  /** Time with at least one batch on the runner, up to busySince (when one is on it now). */
  private busyMs = 0;
  private busySince = 0;

  constructor(
    private readonly run: (inputs: TensorMap) => Promise<TensorMap>,
    private readonly options: BatcherOptions,
  ) {
    this.clock = options.clock ?? (() => performance.now());
    this.observer = options.observer ?? noopObserver;
    this.hardTimeoutMs = options.hardTimeoutMs ?? Number.POSITIVE_INFINITY;
    this.inline = options.inline;
    // A model that cannot be batched takes one request per call.
    this.settings = options.batchable
      ? options
      : { ...options, maxBatchRows: 1, adaptive: false, maxDelayMs: 0 };
  }

  get depth(): { queuedRows: number; inFlight: number } {
    return { queuedRows: this.queuedRows, inFlight: this.inFlight };
  }

  /** Milliseconds, since this batcher started, during which the runner held at least one batch. */
  get runnerBusyMs(): number {
    return this.busyMs + (this.running.size > 0 ? this.clock() - this.busySince : 0);
  }

  /** A batch's compute time as its runner measured it (Runner.onComputed): what inline admission goes by. */
  observeCompute(outputs: TensorMap, ms: number): void {
    // Only a batcher with an in-thread copy decides anything by it.
    if (this.inline) this.compute.observe(rowCount(outputs, this.options.batchable), ms);
  }

  /** Whether the in-thread copy is in use, and the requests it has answered. */
  get inlineStatus(): { active: boolean; calls: number } {
    return { active: this.inline !== undefined, calls: this.inlineCalls };
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
   * @throws ModelportError MP_ERR_MODEL_OVERLOADED, MP_ERR_DEADLINE_EXCEEDED, MP_ERR_DEADLINE_TOO_SHORT, MP_ERR_REQUEST_CANCELED.
   */
  submit(inputs: TensorMap, opts: SubmitOptions = {}): Promise<TensorMap> {
    try {
      return this.admit(inputs, opts);
    } catch (err) {
      return Promise.reject(asError(err));
    }
  }

  private admit(inputs: TensorMap, opts: SubmitOptions): Promise<TensorMap> {
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
      return Promise.reject(
        idleFeasible
          ? this.overloaded(rows, now)
          : deadline <= now
            ? deadlineError(deadline - now)
            : tooShortError(deadline - now, this.safeCost(Math.min(rows, max))),
      );
    }
    if (rows <= max && this.inlineAdmits(rows, now)) return this.runInline(inputs, rows, now, opts);
    if (rows <= max) return this.enqueue(inputs, rows, now, deadline, opts);
    const pieces: Promise<TensorMap>[] = [];
    try {
      for (let from = 0; from < rows; from += max) {
        const to = Math.min(rows, from + max);
        pieces.push(this.enqueue(sliceRows(inputs, from, to), to - from, now, deadline, opts));
      }
    } catch (err) {
      // Pieces already queued still run; their answers are dropped with this rejection.
      for (const p of pieces) p.catch(() => {});
      return Promise.reject(err);
    }
    return Promise.all(pieces).then(concatBatch);
  }

  /**
   * The in-thread copy takes a request when it is the only request in the process (so this model
   * is idle too: nothing queued or running, not paused), no recent in-thread call was crowded
   * (INLINE_CROWDED_MS), and enough batches have been measured to predict it finishes within the
   * lane's maxMs.
   */
  private inlineAdmits(rows: number, now: number): boolean {
    const lane = this.inline;
    return (
      lane !== undefined &&
      unanswered === 0 &&
      now >= this.inlineCrowdedUntil &&
      this.inFlight === 0 &&
      this.queue.length === 0 &&
      !this.paused &&
      this.compute.samples >= INLINE_MIN_SAMPLES &&
      this.compute.estimate(rows) <= lane.maxMs
    );
  }

  /**
   * Scores one request on the in-thread copy. It counts as a batch in flight, so requests arriving
   * meanwhile queue behind it for the runner, and it teaches the cost model like any batch.
   */
  private async runInline(
    inputs: TensorMap,
    rows: number,
    now: number,
    opts: SubmitOptions,
  ): Promise<TensorMap> {
    if (opts.cancel?.canceled) {
      this.observer.rejected("canceled");
      throw canceledError();
    }
    const lane = this.inline!;
    unanswered++;
    this.inFlight++;
    this.inlineCalls++;
    this.arrivals.observe(rows, now);
    this.observer.queueWait(0);
    const started = this.clock();
    let ok = false;
    const span = tracing.on
      ? startSpan(SPAN.infer, opts.trace, this.spanAttributes({ [ATTR.rows]: rows, [ATTR.inline]: true }))
      : undefined;
    try {
      const outputs = checkOutputs(await lane.predict(inputs));
      ok = true;
      span?.end();
      return outputs;
    } catch (err) {
      if (span) endSpan(span, err);
      throw asError(err);
    } finally {
      this.inFlight--;
      try {
        const end = this.clock();
        const ms = end - started;
        // The call spans the event loop turn that runs it (onnxruntime-node runs a session in a
        // setImmediate callback), so requests that arrived meanwhile were read and parsed within
        // `ms`. Only a call that stayed the process's one request measures the model: under a
        // burst, the others' time would otherwise count as the model's and drop the lane for good.
        const alone = unanswered === 1;
        unanswered--;
        if (!alone) this.inlineCrowdedUntil = end + INLINE_CROWDED_MS;
        if (ok) {
          if (alone) {
            this.cost.observe(rows, ms);
            this.compute.observe(rows, ms);
          }
          this.drain.observe(rows, end);
          opts.onCompute?.(ms);
        }
        this.observer.batch(rows, 1, ms);
        if (alone && ms >= lane.maxMs * INLINE_SLOW_FACTOR && this.inline === lane) {
          this.inlineSlowCalls++;
          if (this.inlineSlowCalls >= INLINE_SLOW_CALLS && this.inlineSlowCalls * 100 >= this.inlineCalls) {
            this.inline = undefined;
            this.options.onInlineSlow?.(ms, rows);
          }
        }
        if (this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake();
        this.schedule();
      } catch (err) {
        this.options.onInternalError?.(err);
      }
    }
  }

  private enqueue(
    inputs: TensorMap,
    rows: number,
    now: number,
    deadline: number,
    { cancel, background = false, onCompute, trace }: SubmitOptions,
  ): Promise<TensorMap> {
    return new Promise<TensorMap>((resolve, reject) => {
      const item: Item = {
        inputs,
        rows,
        bytes: inputBytes(inputs),
        enqueuedAt: now,
        deadline,
        resolve,
        reject,
        done: false,
        background,
        onCompute,
        trace,
        tracedAt: tracing.on ? performance.now() : undefined,
      };
      if (cancel) {
        if (cancel.canceled) {
          this.observer.rejected("canceled");
          reject(canceledError());
          return;
        }
        item.detach = cancel.onCancel(() => this.cancel(item));
      }
      unanswered++;
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
      // Behind batches on the runner the queue may not move before this deadline: watch it.
      if (this.inFlight > 0) this.armWatch(deadline, now);
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

  /**
   * Takes whole requests up to `rows`: the oldest request, then, oldest first, those of the same
   * layout (input names, datatypes, dims after dim 0); requests of another layout keep their
   * place and head a later batch, so none starves. Drops requests whose deadline cannot be met.
   */
  private dispatch(rows: number, now: number): void {
    const queue = this.queue;
    const batch: Item[] = [];
    let taken = 0;
    let takenBytes = 0;
    const maxBytes = this.settings.maxBatchBytes ?? Number.POSITIVE_INFINITY;
    let batchDeadline = Number.POSITIVE_INFINITY;
    // With batches already on the runner, this one starts when they finish.
    const startAt = this.runnerFreeAt(now);
    let head: TensorMap | undefined;
    // Compaction in place: items kept in the queue are written back from index `kept`.
    let kept = 0;
    let i = 0;
    for (; i < queue.length; i++) {
      const item = queue[i]!;
      if (taken >= rows) break;
      if (startAt + this.safeCost(item.rows) > item.deadline) {
        // Too late even alone: drop it before it costs any compute.
        this.queuedRows -= item.rows;
        this.minDeadlineStale = true;
        this.observer.rejected("deadline");
        this.settle(item, undefined, deadlineError(item.deadline - item.enqueuedAt));
        continue;
      }
      if (head !== undefined) {
        if (!joinable(head, item.inputs)) {
          queue[kept++] = item; // another layout: it waits for a batch of its own
          continue;
        }
        if (taken + item.rows > rows || takenBytes + item.bytes > maxBytes) break;
        // A bigger batch takes longer: stop before it would make anyone in it late.
        if (startAt + this.safeCost(taken + item.rows) > Math.min(batchDeadline, item.deadline)) break;
      } else head = item.inputs;
      this.queuedRows -= item.rows;
      this.minDeadlineStale = true;
      if (item.deadline < batchDeadline) batchDeadline = item.deadline;
      batch.push(item);
      taken += item.rows;
      takenBytes += item.bytes;
      this.observer.queueWait(now - item.enqueuedAt);
      if (item.tracedAt !== undefined) {
        this.queueStage(item);
        item.tracedAt = undefined;
      }
    }
    if (kept < i) {
      // Close the gap left by the items taken or dropped.
      queue.copyWithin(kept, i);
      queue.length -= i - kept;
    }
    this.observer.queueDepth(this.queuedRows);
    if (batch.length === 0) return;
    this.inFlight++;
    const started = this.clock();
    const batchSpan = tracing.on ? this.batchSpan(batch, taken) : undefined;
    const running: Running = { rows: taken, started, items: batch, stuck: false };
    if (this.running.size === 0) this.busySince = started;
    this.running.add(running);
    this.armWatch(Math.min(batchDeadline, started + this.hardTimeoutMs), started);
    const done = (ok: boolean) => {
      this.inFlight--;
      this.running.delete(running);
      if (this.running.size === 0) {
        this.clearWatch();
        this.busyMs += this.clock() - this.busySince;
      }
      try {
        const ms = this.clock() - started;
        // Only answered batches teach the cost model: a batch that failed fast or was cut off
        // by the hard limit says nothing about what a batch costs.
        if (ok) {
          this.cost.observe(taken, ms);
          this.drain.observe(taken, this.clock());
        }
        this.observer.batch(taken, batch.length, ms);
        if (batchSpan !== undefined) {
          if (!ok) batchSpan.setStatus({ code: 2, message: "the batch failed" });
          batchSpan.end();
        }
        if (this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake();
        this.schedule();
      } catch (err) {
        this.options.onInternalError?.(err);
      }
    };
    this.execute(batch, batchSpan).then(done, (err) => {
      this.options.onInternalError?.(err);
      done(false);
    });
  }

  /**
   * Runs one batch and settles every request in it; resolves true when the runner answered
   * the batch. Never rejects: a failure to join, run or split becomes each request's error.
   */
  private async execute(batch: Item[], span: Span | undefined): Promise<boolean> {
    if (batch.length === 1) return this.runOne(batch[0]!, span);
    let outputs: TensorMap;
    const started = this.clock();
    try {
      outputs = await this.call(concatBatch(batch.map((i) => i.inputs)), span);
    } catch (err) {
      // One request's bad rows must not fail its neighbours: retry each alone.
      if (err instanceof ModelportError && !err.retryable) {
        await Promise.all(batch.map((item) => this.runOne(item, span)));
        return false;
      }
      for (const item of batch) this.settle(item, undefined, asError(err));
      return false;
    }
    let pieces: TensorMap[];
    try {
      pieces = splitBatch(
        outputs,
        batch.map((i) => i.rows),
      );
    } catch (err) {
      for (const item of batch) this.settle(item, undefined, asError(err));
      return false;
    }
    const ms = this.clock() - started;
    let rows = 0;
    for (const item of batch) rows += item.rows;
    for (let k = 0; k < batch.length; k++) {
      const item = batch[k]!;
      item.onCompute?.((ms * item.rows) / rows);
      this.settle(item, pieces[k]);
    }
    return true;
  }

  /** Runs one request alone and settles it; resolves true when the runner answered. */
  private async runOne(item: Item, span: Span | undefined): Promise<boolean> {
    try {
      const started = this.clock();
      const outputs = checkOutputs(await this.call(item.inputs, span));
      item.onCompute?.(this.clock() - started);
      this.settle(item, outputs);
      return true;
    } catch (err) {
      this.settle(item, undefined, asError(err));
      return false;
    }
  }

  /** The runner call, in a modelport.infer span under the batch's span when there is one. */
  private call(inputs: TensorMap, batchSpan: Span | undefined): Promise<TensorMap> {
    if (batchSpan === undefined) return this.run(inputs);
    const span = startSpan(
      SPAN.infer,
      parentOf(batchSpan),
      this.spanAttributes({ [ATTR.rows]: rowCount(inputs, this.options.batchable) }),
    );
    return this.run(inputs).then(
      (outputs) => {
        span.end();
        return outputs;
      },
      (err: unknown) => {
        endSpan(span, err);
        throw err;
      },
    );
  }

  /** The request's wait in the queue (tracing on): a modelport.queue span, or an attribute (telemetry/spans.ts stage()). */
  private queueStage(item: Item, err?: unknown): void {
    if (!tracing.on) return;
    stage(
      SPAN.queue,
      ATTR.queueMs,
      item.trace,
      item.tracedAt!,
      () => this.spanAttributes({ [ATTR.rows]: item.rows }),
      err,
    );
  }

  /** `attributes` and the model's name, for a span (added, not spread: `{ ...a, k: v }` costs ~1 µs on Node 20). */
  private spanAttributes(attributes: Attributes): Attributes {
    if (this.options.model !== undefined) attributes[ATTR.model] = this.options.model;
    return attributes;
  }

  /**
   * The modelport.batch span (tracing on): a child of the first request in it that has a trace,
   * linked to every request it joined, with its size in rows and requests. Undefined when none
   * of them is traced (nothing would lead to it).
   */
  private batchSpan(batch: readonly Item[], rows: number): Span | undefined {
    const links: TraceParent[] = [];
    for (const item of batch) if (item.trace !== undefined) links.push(item.trace);
    if (links.length === 0) return undefined;
    return startSpan(
      SPAN.batch,
      links[0],
      this.spanAttributes({ [ATTR.batchRows]: rows, [ATTR.batchRequests]: batch.length }),
      undefined,
      links,
    );
  }

  private clearWatch(): void {
    if (this.watchTimer) clearTimeout(this.watchTimer);
    this.watchTimer = undefined;
    this.watchAt = Number.POSITIVE_INFINITY;
  }

  private armWatch(at: number, now: number): void {
    if (at >= this.watchAt) return;
    if (this.watchTimer) clearTimeout(this.watchTimer);
    this.watchAt = at;
    this.watchTimer = setTimeout(
      () => {
        this.watchTimer = undefined;
        this.watchAt = Number.POSITIVE_INFINITY;
        try {
          this.watch();
        } catch (err) {
          this.options.onInternalError?.(err);
        }
      },
      Math.max(0, Math.ceil(at - now)),
    );
    this.watchTimer.unref();
  }

  /**
   * While batches are on the runner: answers 504 to every request whose deadline has passed,
   * running or queued (the runner's late answer is discarded), reports batches past the hard
   * limit, and wakes up again for the next of these.
   */
  private watch(): void {
    if (this.running.size === 0) return;
    const now = this.clock();
    let next = Number.POSITIVE_INFINITY;
    for (const r of this.running) {
      for (const item of r.items) {
        if (item.done) continue;
        if (item.deadline <= now) {
          this.observer.rejected("deadline");
          this.settle(item, undefined, lateError(item.deadline - item.enqueuedAt));
        } else if (item.deadline < next) next = item.deadline;
      }
      if (!r.stuck) {
        const hard = r.started + this.hardTimeoutMs;
        if (hard <= now) {
          r.stuck = true;
          this.options.onStuck?.(now - r.started, r.rows);
        } else if (hard < next) next = hard;
      }
    }
    // Queued requests wait for the runner too: their deadlines end the wait.
    if (this.earliestDeadline() <= now) this.expireQueued(now);
    const queued = this.earliestDeadline();
    if (queued < next) next = queued;
    if (this.running.size > 0 && next < Number.POSITIVE_INFINITY) this.armWatch(next, now);
  }

  /** Answers 504 to every queued request whose deadline has passed. */
  private expireQueued(now: number): void {
    let kept = 0;
    for (const item of this.queue) {
      if (item.deadline <= now) {
        this.queuedRows -= item.rows;
        this.observer.rejected("deadline");
        this.settle(item, undefined, deadlineError(item.deadline - item.enqueuedAt));
      } else this.queue[kept++] = item;
    }
    this.queue.length = kept;
    this.minDeadlineStale = true;
    this.observer.queueDepth(this.queuedRows);
  }

  private settle(item: Item, outputs: TensorMap | undefined, err?: Error): void {
    if (item.done) return;
    item.done = true;
    unanswered--;
    // Still queued: refused before a batch took it (canceled, deadline, shutdown).
    if (item.tracedAt !== undefined) {
      this.queueStage(item, err);
      item.tracedAt = undefined;
    }
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

/** The bytes of a request's inputs (BYTES elements by their length). */
function inputBytes(inputs: TensorMap): number {
  let n = 0;
  for (const name in inputs) {
    const data = inputs[name]!.data;
    if (Array.isArray(data)) for (const v of data) n += v.length;
    else n += data.byteLength;
  }
  return n;
}

function deadlineError(budgetMs: number): ModelportError {
  return new ModelportError(
    "MP_ERR_DEADLINE_EXCEEDED",
    `the request's deadline (${Math.max(0, Math.round(budgetMs))} ms) cannot be met; it was dropped before inference while work queued ahead of it ran. Retry when the model is less busy, or raise X-Request-Timeout-Ms`,
  );
}

/** The deadline is shorter than the model's own run on an idle model: waiting cannot help. */
function tooShortError(budgetMs: number, runMs: number): ModelportError {
  return new ModelportError(
    "MP_ERR_DEADLINE_TOO_SHORT",
    `the request's deadline (${Math.max(0, Math.round(budgetMs))} ms) is shorter than the model's own run for it (about ${Math.ceil(runMs)} ms, even with nothing queued): a retry with the same deadline fails the same way. Raise X-Request-Timeout-Ms (or limits.timeoutMs) above ${Math.ceil(runMs)} ms, or send fewer rows`,
    { deadlineMs: Math.max(0, Math.round(budgetMs)), runMs: Math.ceil(runMs) },
  );
}

function lateError(budgetMs: number): ModelportError {
  return new ModelportError(
    "MP_ERR_DEADLINE_EXCEEDED",
    `the request's deadline (${Math.max(0, Math.round(budgetMs))} ms) passed while the model was computing it; its answer will be discarded. Raise X-Request-Timeout-Ms or retry when the model is less busy`,
  );
}

function asError(err: unknown): Error {
  if (err instanceof Error) return err;
  return new ModelportError("MP_ERR_SERVER_INTERNAL", `the batch failed: ${String(err)}`);
}

function canceledError(): ModelportError {
  return new ModelportError(
    "MP_ERR_REQUEST_CANCELED",
    "the client closed the connection; its queued work was removed",
  );
}
