// The job system's façade: accepts jobs (validated like predict, or like the OpenAI route a
// language-model job stands for; idempotent), runs them with per-model workers through the same
// batchers and sequences as synchronous requests (behind them), retries with backoff, stores
// results inline or in the blob store, and notifies (events, webhooks).
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { CancelHandle } from "../cancel.js";
import type { Catalogue } from "../catalogue/catalogue.js";
import type { ServedModel } from "../catalogue/served-model.js";
import type { JobsConfig } from "../config/schema.js";
import { isModelportError, ModelportError } from "../errors.js";
import type { BlobStore } from "../storage/blob-store.js";
import { fromTraceHeaders, type TraceParent } from "../telemetry/propagation.js";
import { ATTR, endSpan, KIND, parentOf, SPAN, type Span, startSpan, tracing } from "../telemetry/spans.js";
import { CompletionWriter } from "./completion-writer.js";
import { FINAL_STATUSES, type FinishedJob, type Job, type NewJob } from "./job.js";
import { JobEvents } from "./job-events.js";
import { JobExecutor, type JobUsage } from "./job-execution.js";
import type { CreateManyResult, CreateResult, JobState, JobStore, ListPage, ListQuery } from "./job-store.js";
import { prepareJob, type SubmitJob } from "./job-submission.js";
import { JobWatch } from "./job-watch.js";
import { notifyFinished, type WebhookDeps } from "./job-webhook.js";
import { type LanguageWorkRunner, languageJobConcurrency } from "./language-work.js";
import { type Outcome, recordOutcome, succeededJob } from "./record-outcome.js";

export type { SubmitJob } from "./job-submission.js";

export interface JobQueueOptions {
  store: JobStore;
  blobs: BlobStore;
  catalogue: Catalogue;
  config: JobsConfig;
  log: Logger;
  webhookSecret?: string;
  /** Hears what each answered attempt of a job with an owner used (usage per key). */
  onUsage?: (owner: string, model: string, used: JobUsage) => void;
  /** Validates and answers language-model jobs; without it such jobs are refused. */
  languageWork?: LanguageWorkRunner;
  clock?: () => number;
  /** How often an idle worker looks at the store for work from other processes. */
  pollMs?: number;
  /** How often the states of jobs waited on are read for other processes' changes (ms, default 1000). */
  watchMs?: number;
}

export function isFinal(job: Job): boolean {
  return FINAL_STATUSES.includes(job.status);
}

export class JobQueue {
  readonly events = new JobEvents();
  private readonly store: JobStore;
  private readonly blobs: BlobStore;
  private readonly catalogue: Catalogue;
  private readonly config: JobsConfig;
  private readonly log: Logger;
  private readonly clock: () => number;
  private readonly pollMs: number;
  private readonly workerId = `${process.pid}-${randomUUID().slice(0, 8)}`;
  private readonly running = new Map<string, { cancel: CancelHandle; done: Promise<void>; owner: string }>();
  private readonly wakers = new Set<() => void>();
  /** Long-polls and streams waiting now, woken when stop() begins. */
  private readonly stopListeners = new Set<() => void>();
  /** Finds other processes' changes to the jobs waited on here (job-watch.ts). */
  readonly watch: JobWatch;
  private readonly executor: JobExecutor;
  private readonly completions: CompletionWriter;
  private loops: Promise<void>[] = [];
  /** True once stop() began: no new claims, long-polls and streams return. */
  stopping = false;

  constructor(private readonly options: JobQueueOptions) {
    this.store = options.store;
    this.blobs = options.blobs;
    this.catalogue = options.catalogue;
    this.config = options.config;
    this.log = options.log.child({ component: "jobs" });
    this.clock = options.clock ?? Date.now;
    this.pollMs = options.pollMs ?? 250;
    this.executor = new JobExecutor(options);
    this.completions = new CompletionWriter(this.store, this.clock);
    this.watch = new JobWatch(this.store, this.events, this.log, options.watchMs);
  }

  /**
   * Validates and stores a job. @returns the job and whether it is new (false: idempotent replay).
   * @throws ModelportError for bad input, a refused callback URL or an idempotency conflict.
   */
  async submit(req: SubmitJob): Promise<CreateResult> {
    const job = await prepareJob(req, this.options);
    await this.checkRoom([job], req);
    const result = await this.store.create(job, this.clock());
    this.accepted([result]);
    return result;
  }

  /**
   * Validates and stores several jobs in one store call (one transaction or script), in order.
   * Any invalid item refuses them all (the error's details.index names it, its message starts
   * with `jobs[i]`); an idempotency conflict is that item's error alone. The queue limits count
   * them all: a submission that would pass jobs.maxQueuedPerModel or the owner's queuedJobs is
   * refused whole.
   */
  async submitMany(reqs: readonly SubmitJob[]): Promise<CreateManyResult[]> {
    const jobs: NewJob[] = [];
    for (const [index, req] of reqs.entries()) {
      try {
        jobs.push(await prepareJob(req, this.options));
      } catch (err) {
        if (!isModelportError(err)) throw err;
        throw new ModelportError(err.code, `jobs[${index}]: ${err.message}`, { ...err.details, index });
      }
    }
    const first = reqs[0];
    if (!first) return [];
    await this.checkRoom(jobs, first);
    const results = await this.store.createMany(jobs, this.clock());
    this.accepted(results);
    return results;
  }

  /** Tells subscribers about new jobs and wakes the workers. */
  private accepted(results: readonly CreateManyResult[]): void {
    let any = false;
    for (const r of results) {
      if ("job" in r && r.created) {
        this.events.publish(r.job);
        any = true;
      }
    }
    if (any) this.wake();
  }

  /**
   * Refuses jobs that would pass their model's jobs.maxQueuedPerModel or their owner's
   * queuedJobs (`limits` carries the owner and its limit: the same for every job of one call).
   */
  private async checkRoom(
    jobs: readonly NewJob[],
    limits: Pick<SubmitJob, "owner" | "maxActive">,
  ): Promise<void> {
    const perModel = new Map<string, number>();
    for (const job of jobs) perModel.set(job.model, (perModel.get(job.model) ?? 0) + 1);
    for (const [model, adding] of perModel) {
      const queued = await this.store.queuedCount(model);
      if (queued + adding > this.config.maxQueuedPerModel) {
        throw new ModelportError(
          "MP_ERR_JOB_QUEUE_FULL",
          `model '${model}' already has ${queued} jobs queued (jobs.maxQueuedPerModel ${this.config.maxQueuedPerModel})${adding > 1 ? `, too many for ${adding} more` : ""}; retry once some have run`,
          { queued, limit: this.config.maxQueuedPerModel, retryAfterSeconds: 5 },
        );
      }
    }
    if (limits.owner !== undefined && limits.maxActive !== undefined) {
      const active = await this.store.activeCount(limits.owner);
      if (active + jobs.length > limits.maxActive) {
        throw new ModelportError(
          "MP_ERR_RATE_LIMITED",
          `key '${limits.owner}' already has ${active} jobs queued or running (its queuedJobs limit is ${limits.maxActive})${jobs.length > 1 ? `, too many for ${jobs.length} more` : ""}; retry once some have run`,
          { limit: "queuedJobs", retryAfterSeconds: 5 },
        );
      }
    }
  }

  get(id: string): Promise<Job | undefined> {
    return this.store.get(id);
  }

  /**
   * Keeps work answered at once (a stored /v1/responses answer) as a succeeded job of its model:
   * read, listed, owned and purged after jobs.retentionMs as any job; no worker runs it.
   */
  record(job: FinishedJob): Promise<Job> {
    return this.store.record(job, this.clock());
  }

  /**
   * Deletes a finished job and its result blob; @returns the job deleted, undefined when there is
   * none or it has not finished (nothing changed).
   */
  async remove(id: string): Promise<Job | undefined> {
    const job = await this.store.remove(id);
    if (job?.resultKey) await this.blobs.delete(job.resultKey);
    return job;
  }

  /** Status and updatedAt alone: a cheap read for pollers, which re-read the job only when it changed. */
  state(id: string): Promise<JobState | undefined> {
    return this.store.state(id);
  }

  list(query: ListQuery): Promise<ListPage> {
    return this.store.list(query);
  }

  counts(): ReturnType<JobStore["counts"]> {
    return this.store.counts();
  }

  /** @throws MP_ERR_JOB_NOT_FOUND */
  async require(id: string): Promise<Job> {
    const job = await this.store.get(id);
    if (!job) throw this.notFound(id);
    return job;
  }

  /** What a job that does not exist (or that the caller may not see) answers. */
  notFound(id: string): ModelportError {
    return new ModelportError(
      "MP_ERR_JOB_NOT_FOUND",
      `no job '${id}' (finished jobs are purged after the retention time)`,
    );
  }

  /**
   * Resolves when the job is final, `ms` passed or `stop` is canceled, with the job as it is then.
   * `current` (the job as the caller last saw it) saves the first read. Changes made in this
   * process arrive as events; those made by another process sharing the store are found by the
   * shared watch (job-watch.ts: one status read per second for every waiter together).
   * @throws MP_ERR_JOB_NOT_FOUND when the job left the store meanwhile (purged); the store's
   * error when reading it for other processes' changes failed.
   */
  async waitFor(id: string, ms: number, current?: Job, stop?: CancelHandle): Promise<Job> {
    let job = current ?? (await this.require(id));
    const deadline = this.clock() + ms;
    // A draining server answers long-polls at once rather than holding its shutdown.
    const over = () => isFinal(job) || this.stopping || stop?.canceled === true;
    if (over() || ms <= 0) return job;
    let lost: { err?: unknown } | undefined;
    let wake = () => {};
    const off = this.events.subscribe(id, (changed) => {
      job = changed;
      wake();
    });
    const unfollow = this.watch.follow(job, (err) => {
      lost = { err };
      wake();
    });
    const offStop = stop?.onCancel(() => wake());
    const onStopping = () => wake();
    this.stopListeners.add(onStopping);
    try {
      while (!over() && !lost) {
        const left = deadline - this.clock();
        if (left <= 0) break;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    } finally {
      off();
      unfollow();
      offStop?.();
      this.stopListeners.delete(onStopping);
    }
    if (lost) throw lost.err ?? this.notFound(id);
    return job;
  }

  /** Cancels a queued job at once; a running one is aborted where the backend allows and ends canceled. */
  async cancel(id: string): Promise<Job> {
    const job = await this.store.cancel(id, this.clock());
    if (!job) throw new ModelportError("MP_ERR_JOB_NOT_FOUND", `no job '${id}'`);
    this.running.get(id)?.cancel.cancel();
    this.events.publish(job);
    return job;
  }

  async retry(id: string): Promise<Job> {
    const job = await this.store.retry(id, this.clock());
    if (!job) throw new ModelportError("MP_ERR_JOB_NOT_FOUND", `no job '${id}'`);
    this.events.publish(job);
    this.wake();
    return job;
  }

  /** The stored result: inline JSON text, or a blob (with a URL when the store can presign one). */
  async result(
    job: Job,
  ): Promise<{ json: string } | { url: string } | { data: Buffer; contentType: string }> {
    if (job.status !== "succeeded") {
      throw isFinal(job)
        ? new ModelportError(
            "MP_ERR_JOB_NOT_SUCCEEDED",
            `job '${job.id}' ended ${job.status}: ${job.lastError?.message ?? "no result"}`,
          )
        : new ModelportError(
            "MP_ERR_JOB_NOT_FINISHED",
            `job '${job.id}' is ${job.status}; wait with GET /v1/jobs/${job.id}?wait=30`,
          );
    }
    if (job.result !== undefined) return { json: job.result };
    const key = job.resultKey!;
    const url = await this.blobs.url(key, this.urlTtlSeconds());
    if (url) return { url };
    const blob = await this.blobs.get(key);
    if (!blob)
      throw new ModelportError("MP_ERR_JOB_NOT_FOUND", `the result of job '${job.id}' is no longer stored`);
    return blob;
  }

  /** Starts `jobs.concurrency` workers per served model. */
  start(): void {
    for (const host of this.catalogue.all()) this.startModel(host);
  }

  /**
   * Starts the workers of one model (one the catalogue gained after start-up, too): a tensor
   * model's jobs.concurrency, a language model's llm.jobConcurrency (fewer than its sequences).
   */
  startModel(host: ServedModel): void {
    if (this.stopping) return;
    if (host.kind === "language" && !this.options.languageWork) return;
    const loops =
      host.kind === "tensor"
        ? this.config.concurrency
        : languageJobConcurrency(host, this.config.concurrency);
    for (let i = 0; i < loops; i++) this.loops.push(this.workLoop(host, i));
  }

  /**
   * Stops taking jobs; running ones get up to `drainMs` to finish, the rest go back to the queue
   * (not counted as an attempt) for the next process.
   */
  async stop(drainMs: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.wake();
    for (const w of [...this.stopListeners]) w();
    const drained = Promise.all([...this.running.values()].map((r) => r.done));
    await Promise.race([drained, new Promise((r) => setTimeout(r, drainMs).unref())]);
    for (const [id, r] of this.running) {
      r.cancel.cancel();
      try {
        await this.store.release(id, r.owner, this.clock());
        this.log.info({ jobId: id }, "job returned to the queue at shutdown");
      } catch (err) {
        // Its lease lapses instead, and the next process claims it then.
        this.log.warn({ err, jobId: id }, "returning a job to the queue at shutdown failed");
      }
    }
    await Promise.all(this.loops);
  }

  private webhookDeps(): WebhookDeps {
    return {
      store: this.store,
      blobs: this.blobs,
      config: this.config,
      log: this.log,
      urlTtlSeconds: this.urlTtlSeconds(),
      secret: this.options.webhookSecret ?? this.config.webhooks.secret ?? "",
    };
  }

  private urlTtlSeconds(): number {
    return this.config.blobs.backend === "s3" ? this.config.blobs.urlTtlSeconds : 3600;
  }

  private wake(): void {
    for (const w of this.wakers) w();
  }

  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, this.pollMs);
      this.wakers.add(done);
    });
  }

  /**
   * One of a model's `concurrency` loops. Each loop holds its leases under an owner of its own, so
   * a job whose lease lapsed while this loop ran it (a stalled process) and that another loop,
   * even of this process, claimed since, is no longer this loop's: its renewal and its outcome are
   * refused by the store instead of both runs writing. A tensor model's loop claims up to
   * jobs.claimBatch jobs in one store call and runs them at once, so their inputs reach the
   * model's batcher together and go as one batch; a language model's loop claims one job at a
   * time (its jobs' concurrency is its number of loops).
   */
  private async workLoop(host: ServedModel, slot: number): Promise<void> {
    const model = host.config.name;
    const owner = `${this.workerId}/${model}#${slot}`;
    const max = host.kind === "tensor" ? this.config.claimBatch : 1;
    while (!this.stopping) {
      let jobs: Job[] = [];
      try {
        jobs = host.ready
          ? await this.store.claimMany(owner, [model], max, this.config.leaseMs, this.clock())
          : [];
      } catch (err) {
        this.log.error({ err }, "claiming jobs failed; retrying");
      }
      if (jobs.length === 0) {
        await this.idle();
        continue;
      }
      await Promise.all(jobs.map((job) => this.begin(host, job, owner)));
    }
  }

  /** Runs one claimed job, known to stop() while it runs. */
  private async begin(host: ServedModel, job: Job, owner: string): Promise<void> {
    const cancel = new CancelHandle();
    // run() handles its own failures; this catch only keeps a bug there from ending the loop.
    const done = this.run(host, job, owner, cancel).catch((err) =>
      this.log.error({ err, jobId: job.id }, "running a job failed unexpectedly"),
    );
    this.running.set(job.id, { cancel, done, owner });
    await done;
    this.running.delete(job.id);
  }

  /**
   * One attempt: execute, then record the outcome. Nothing here rejects: a store that fails while
   * recording is retried within the lease (record-outcome.ts), and past it the lease lapses and the
   * job is claimed and run again.
   */
  private async run(host: ServedModel, job: Job, owner: string, cancel: CancelHandle): Promise<void> {
    // Tracing on: the attempt is a span of its own trace, linked to the request that submitted the
    // job (which may have ended long ago). Off: the submitter's own traceparent, as received, goes on.
    const submitted = fromTraceHeaders(job.trace);
    const span = tracing.on
      ? startSpan(
          SPAN.jobAttempt,
          undefined,
          { [ATTR.jobId]: job.id, [ATTR.jobAttempt]: job.attempts, [ATTR.model]: job.model },
          KIND.consumer,
          submitted ? [submitted] : undefined,
        )
      : undefined;
    const trace = span ? parentOf(span) : submitted;
    try {
      await this.runAttempt(host, job, owner, cancel, trace, span);
    } finally {
      span?.end();
    }
  }

  private async runAttempt(
    host: ServedModel,
    job: Job,
    owner: string,
    cancel: CancelHandle,
    trace: TraceParent | undefined,
    span: Span | undefined,
  ): Promise<void> {
    this.events.publish(job);
    let leaseLost = false;
    // Once the outcome is being written, a refused renewal only means the job already ended.
    let settled = false;
    const lost = () => {
      if (leaseLost) return;
      leaseLost = true;
      this.log.warn(
        { jobId: job.id, attempt: job.attempts, leaseMs: this.config.leaseMs },
        "lost the lease on a running job (this process went longer than leaseMs without renewing it); this attempt is abandoned and another worker runs the job",
      );
    };
    // A refused renewal means another worker holds the job now: this run is abandoned. A store
    // that fails to answer is not a reason to stop; the next renewal tries again, and the outcome
    // write is refused anyway if the lease lapsed meanwhile.
    const renew = setInterval(
      () =>
        void (async () => {
          const ok = await this.store.renew(job.id, owner, this.config.leaseMs, this.clock()).catch((err) => {
            this.log.warn({ err, jobId: job.id }, "renewing a running job's lease failed; trying again");
            return undefined;
          });
          if (ok === false && !settled) {
            lost();
            cancel.cancel();
          } else if (ok && (await this.store.get(job.id).catch(() => undefined))?.cancelRequested)
            cancel.cancel();
        })(),
      Math.max(250, this.config.leaseMs / 3),
    );
    let outcome: Outcome;
    try {
      const result = await this.executor.execute(host, job, cancel, trace);
      if (cancel.canceled) {
        outcome = this.canceledOutcome(job, owner);
      } else {
        const stored = await this.executor.storeResult(job, result);
        // Written with the other results of this moment (group commit); the job as it now is
        // needs no read back.
        let at = 0;
        outcome = {
          what: "recording the result",
          write: async () => {
            const written = await this.completions.complete({ id: job.id, worker: owner, result: stored });
            at = written.at;
            return written.done;
          },
          final: true,
          succeeded: () => succeededJob(job, stored, at),
        };
      }
    } catch (err) {
      if (span) endSpan(span, err);
      if (cancel.canceled) {
        outcome = this.canceledOutcome(job, owner);
      } else {
        const e = isModelportError(err) ? err : new ModelportError("MP_ERR_SERVER_INTERNAL", String(err));
        // A pinned version this process does not hold (unloaded since, or held by other runners
        // only) is tried again within the job's attempts: another worker may hold it.
        const elsewhere = job.version !== undefined && e.code === "MP_ERR_MODEL_VERSION_NOT_FOUND";
        const retry = (e.retryable || elsewhere) && job.attempts < job.maxAttempts;
        const backoff = Math.min(
          this.config.backoffMaxMs,
          this.config.backoffBaseMs * 2 ** (job.attempts - 1),
        );
        outcome = {
          what: "recording the failed attempt",
          write: () =>
            this.store.fail(
              job.id,
              owner,
              { code: e.code, message: e.message },
              retry ? this.clock() + backoff : undefined,
              this.clock(),
            ),
          final: !retry,
        };
      }
    }
    try {
      settled = true;
      const ok = await recordOutcome(job, outcome.what, outcome.write, {
        giveUpAt: this.clock() + this.config.leaseMs,
        clock: this.clock,
        stopping: () => this.stopping,
        log: this.log,
      });
      if (ok === false) lost();
      if (ok && outcome.succeeded) this.finishedAs(outcome.succeeded(), trace);
      else if (ok && outcome.final) await this.finished(job.id, trace);
      else if (ok) await this.publishCurrent(job.id);
    } finally {
      clearInterval(renew);
    }
  }

  private canceledOutcome(job: Job, owner: string): Outcome {
    return {
      what: "recording the cancellation",
      write: () => this.store.markCanceled(job.id, owner, this.clock()),
      final: true,
    };
  }

  /** Tells subscribers about a job's new state (a retry waiting out its backoff); a failed read is only logged. */
  private async publishCurrent(id: string): Promise<Job | undefined> {
    try {
      const job = await this.store.get(id);
      if (job) this.events.publish(job);
      return job;
    } catch (err) {
      this.log.warn({ err, jobId: id }, "reading a job after a change failed; pollers see it later");
      return undefined;
    }
  }

  /** A job reached its final state: tell subscribers and the webhook. */
  private async finished(id: string, trace?: TraceParent): Promise<void> {
    const job = await this.publishCurrent(id);
    if (job) this.notify(job, trace);
  }

  /** Tells subscribers and the webhook about `job`, final as it is. */
  private finishedAs(job: Job, trace?: TraceParent): void {
    this.events.publish(job);
    this.notify(job, trace);
  }

  private notify(job: Job, trace?: TraceParent): void {
    if (job.webhook) {
      void notifyFinished(job, this.webhookDeps(), trace).catch((err) =>
        this.log.error({ err, jobId: job.id }, "preparing the webhook failed"),
      );
    }
  }
}
