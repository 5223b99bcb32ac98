// The job system's façade: accepts jobs (validated like predict, idempotent), runs them with
// per-model workers through the same batchers as synchronous requests (behind them), retries
// with backoff, stores results inline or in the blob store, and notifies (events, webhooks).
import { createHash, randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { CancelHandle } from "../cancel.js";
import type { Catalogue } from "../catalogue/catalogue.js";
import type { ServedModel } from "../catalogue/served-model.js";
import type { JobsConfig } from "../config/schema.js";
import { isModelportError, ModelportError } from "../errors.js";
import { checkCallbackUrl, deliverWebhook } from "../notify/webhook.js";
import { decodeNative, encodeNative } from "../protocol/native-body.js";
import type { BlobStore } from "../storage/blob-store.js";
import { fromTraceHeaders, type TraceParent, traceHeaders } from "../telemetry/propagation.js";
import { ATTR, endSpan, KIND, parentOf, SPAN, type Span, startSpan, tracing } from "../telemetry/spans.js";
import { FINAL_STATUSES, type FinishedJob, type Job } from "./job.js";
import { JobEvents } from "./job-events.js";
import type { CreateResult, JobState, JobStore, ListPage, ListQuery } from "./job-store.js";
import { jobView } from "./job-view.js";

export interface SubmitJob {
  /** The model's name, or `name@version`. */
  model: string;
  /** The version to run (from the route's path or query); else the one after `@`, else the current one. */
  version?: string;
  /** The predict body ({rows} or {inputs}); job fields are taken out before it is stored. */
  body: Record<string, unknown>;
  idempotencyKey?: string;
  callbackUrl?: string;
  metadata?: Record<string, unknown>;
  priority?: number;
  /** The submitting key's name: its jobs are its own, and its idempotency keys too. */
  owner?: string;
  /** The owner's limit on jobs queued or running at once (its key's queuedJobs). */
  maxActive?: number;
  /** The submitting request's place in a trace, kept with the job: its attempts link to it. */
  trace?: TraceParent;
}

export interface JobQueueOptions {
  store: JobStore;
  blobs: BlobStore;
  catalogue: Catalogue;
  config: JobsConfig;
  log: Logger;
  webhookSecret?: string;
  /** Hears what each answered attempt of a job with an owner used (usage per key). */
  onUsage?: (owner: string, model: string, used: { rows: number; computeMs: number }) => void;
  clock?: () => number;
  /** How often an idle worker looks at the store for work from other processes. */
  pollMs?: number;
}

/**
 * The keys of a job body that are the model's input (what predict reads); they alone are stored.
 * Anything else (callback_url, metadata, priority, keys predict ignores) is not part of the input.
 */
const INPUT_FIELDS = ["rows", "inputs"];
/** Longest callback_url accepted. */
const MAX_CALLBACK_URL_CHARS = 2048;
/** A store write that failed after the work was done is retried at this pace, within the lease. */
const RECORD_RETRY_FIRST_MS = 100;
const RECORD_RETRY_MAX_MS = 2000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
  }

  /**
   * Validates and stores a job. @returns the job and whether it is new (false: idempotent replay).
   * @throws ModelportError for bad input, a refused callback URL or an idempotency conflict.
   */
  async submit(req: SubmitJob): Promise<CreateResult> {
    // Stored as name and version apart: workers claim by name, and run the version the job names.
    const { name: model, version } = this.catalogue.reference(req.model, req.version);
    const host = this.catalogue.find(model, "predict");
    // A model that loads on demand starts loading now, so its workers can claim the job.
    if (!host.ready) void (async () => this.catalogue.acquire(model, "predict", version))().catch(() => {});
    const target = version === undefined ? host : this.pinnedAtSubmit(host, version);
    const body: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(req.body)) if (INPUT_FIELDS.includes(k)) body[k] = v;
    const input = JSON.stringify(body);
    this.checkSizes(input, req);
    // Validate now so bad input is a 400 at once, not a failed job later.
    if (target.signature) decodeNative(body, target.signature, target.config.limits);
    if (req.callbackUrl !== undefined) {
      await checkCallbackUrl(req.callbackUrl, this.config.webhooks.allowPrivate, {
        lookupTimeoutMs: this.config.webhooks.dnsTimeoutMs,
      });
    }
    const queued = await this.store.queuedCount(model);
    if (queued >= this.config.maxQueuedPerModel) {
      throw new ModelportError(
        "MP_ERR_JOB_QUEUE_FULL",
        `model '${model}' already has ${queued} jobs queued (jobs.maxQueuedPerModel ${this.config.maxQueuedPerModel}); retry once some have run`,
        { queued, limit: this.config.maxQueuedPerModel, retryAfterSeconds: 5 },
      );
    }
    if (req.owner !== undefined && req.maxActive !== undefined) {
      const active = await this.store.activeCount(req.owner);
      if (active >= req.maxActive) {
        throw new ModelportError(
          "MP_ERR_RATE_LIMITED",
          `key '${req.owner}' already has ${active} jobs queued or running (its queuedJobs limit is ${req.maxActive}); retry once some have run`,
          { limit: "queuedJobs", retryAfterSeconds: 5 },
        );
      }
    }
    // The same Idempotency-Key for another version is another request (a conflict).
    const requestHash = createHash("sha256")
      .update(
        `${version === undefined ? model : `${model}@${version}`}\n${input}\n${req.callbackUrl ?? ""}\n${JSON.stringify(req.metadata ?? null)}`,
      )
      .digest("hex");
    const result = await this.store.create(
      {
        id: randomUUID(),
        model,
        ...(version !== undefined ? { version } : {}),
        input,
        priority: req.priority ?? 0,
        maxAttempts: this.config.maxAttempts,
        timeoutMs: this.config.timeoutMs,
        ...(req.metadata ? { metadata: req.metadata } : {}),
        ...(req.callbackUrl ? { callbackUrl: req.callbackUrl } : {}),
        ...(req.owner !== undefined ? { owner: req.owner } : {}),
        ...(req.trace ? { trace: traceHeaders(req.trace) } : {}),
        // Per key: two keys using the same Idempotency-Key make two jobs (key names hold no '/').
        ...(req.idempotencyKey
          ? {
              idempotencyKey:
                req.owner !== undefined ? `${req.owner}/${req.idempotencyKey}` : req.idempotencyKey,
              requestHash,
              idempotencyTtlMs: this.config.idempotencyTtlMs,
            }
          : {}),
      },
      this.clock(),
    );
    if (result.created) {
      this.events.publish(result.job);
      this.wake();
    }
    return result;
  }

  /**
   * The version a job is pinned to, as a synchronous predict at that version would find it: one
   * the model does not have is refused now (MP_ERR_MODEL_VERSION_NOT_FOUND, 404), not left
   * queued. A model that loads on demand, pinned to the version it loads, is taken as it is
   * (its input is checked when it runs, as for an unpinned job).
   */
  private pinnedAtSubmit(host: ServedModel, version: string): ServedModel {
    if (!host.ready && host.status().loadable && version === host.config.version) return host;
    const pinned = this.catalogue.find(host.name, "predict", version);
    // API tier: a copy pinned to a version no runner holds is not ready, and says so with that code.
    if (!pinned.ready) {
      const why = pinned.notReadyError();
      if (why.code === "MP_ERR_MODEL_VERSION_NOT_FOUND") throw why;
    }
    return pinned;
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
   * process arrive as events; those made by another process sharing the store are found by a
   * cheap status read each second, and only then is the whole job read again.
   */
  async waitFor(id: string, ms: number, current?: Job, stop?: CancelHandle): Promise<Job> {
    let job = current ?? (await this.require(id));
    const deadline = this.clock() + ms;
    // A draining server answers long-polls at once rather than holding its shutdown.
    while (!isFinal(job) && this.clock() < deadline && !this.stopping && !stop?.canceled) {
      const left = deadline - this.clock();
      const changed = await new Promise<Job | undefined>((resolve) => {
        let offStop: (() => void) | undefined;
        const timer = setTimeout(() => done(undefined), Math.min(left, 1000));
        const off = this.events.subscribe(id, done);
        offStop = stop?.onCancel(() => done(undefined));
        function done(j: Job | undefined) {
          clearTimeout(timer);
          off();
          offStop?.();
          resolve(j);
        }
      });
      if (changed) {
        job = changed;
        continue;
      }
      if (stop?.canceled) break;
      const state = await this.store.state(id);
      if (!state) return this.require(id);
      if (state.status !== job.status || state.updatedAt !== job.updatedAt) job = await this.require(id);
    }
    return job;
  }

  /** @throws MP_ERR_JOB_PAYLOAD_TOO_LARGE when the input, metadata or callback URL is over its limit. */
  private checkSizes(input: string, req: SubmitJob): void {
    const inputBytes = Buffer.byteLength(input);
    if (inputBytes > this.config.maxInputBytes) {
      throw new ModelportError(
        "MP_ERR_JOB_PAYLOAD_TOO_LARGE",
        `the job input is ${inputBytes} bytes as JSON; at most ${this.config.maxInputBytes} (jobs.maxInputBytes): split it into several jobs`,
        { bytes: inputBytes, limit: this.config.maxInputBytes },
      );
    }
    if (req.metadata !== undefined) {
      const metadataBytes = Buffer.byteLength(JSON.stringify(req.metadata));
      if (metadataBytes > this.config.maxMetadataBytes) {
        throw new ModelportError(
          "MP_ERR_JOB_PAYLOAD_TOO_LARGE",
          `"metadata" is ${metadataBytes} bytes as JSON; at most ${this.config.maxMetadataBytes} (jobs.maxMetadataBytes): store large data elsewhere and reference it`,
          { bytes: metadataBytes, limit: this.config.maxMetadataBytes },
        );
      }
    }
    if (req.callbackUrl !== undefined && req.callbackUrl.length > MAX_CALLBACK_URL_CHARS) {
      throw new ModelportError(
        "MP_ERR_JOB_PAYLOAD_TOO_LARGE",
        `"callback_url" is ${req.callbackUrl.length} characters; at most ${MAX_CALLBACK_URL_CHARS}`,
      );
    }
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

  /** Starts the workers of one tensor model (one the catalogue gained after start-up, too). */
  startModel(host: ServedModel): void {
    if (host.kind !== "tensor" || this.stopping) return;
    for (let i = 0; i < this.config.concurrency; i++) this.loops.push(this.workLoop(host, i));
  }

  /**
   * Stops taking jobs; running ones get up to `drainMs` to finish, the rest go back to the queue
   * (not counted as an attempt) for the next process.
   */
  async stop(drainMs: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.wake();
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
   * refused by the store instead of both runs writing.
   */
  private async workLoop(host: ServedModel, slot: number): Promise<void> {
    const model = host.config.name;
    const owner = `${this.workerId}/${model}#${slot}`;
    while (!this.stopping) {
      let job: Job | undefined;
      try {
        job = host.ready
          ? await this.store.claim(owner, [model], this.config.leaseMs, this.clock())
          : undefined;
      } catch (err) {
        this.log.error({ err }, "claiming a job failed; retrying");
      }
      if (!job) {
        await this.idle();
        continue;
      }
      const cancel = new CancelHandle();
      // run() handles its own failures; this catch only keeps a bug there from ending the loop.
      const done = this.run(host, job, owner, cancel).catch((err) =>
        this.log.error({ err, jobId: job.id }, "running a job failed unexpectedly"),
      );
      this.running.set(job.id, { cancel, done, owner });
      await done;
      this.running.delete(job.id);
    }
  }

  /**
   * One attempt: execute, then record the outcome. Nothing here rejects: a store that fails while
   * recording is retried within the lease (recordOutcome), and past it the lease lapses and the
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
    let outcome: { what: string; write: () => Promise<boolean>; final: boolean };
    try {
      const { outputs, version } = await this.execute(host, job, cancel, trace);
      if (cancel.canceled) {
        outcome = this.canceledOutcome(job, owner);
      } else {
        const stored = await this.storeResult(host, job, outputs, version);
        outcome = {
          what: "recording the result",
          write: () => this.store.complete(job.id, owner, stored, this.clock()),
          final: true,
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
      const ok = await this.recordOutcome(job, outcome.what, outcome.write);
      if (ok === false) lost();
      if (ok && outcome.final) await this.finished(job.id, trace);
      else if (ok) await this.publishCurrent(job.id);
    } finally {
      clearInterval(renew);
    }
  }

  private canceledOutcome(
    job: Job,
    owner: string,
  ): { what: string; write: () => Promise<boolean>; final: boolean } {
    return {
      what: "recording the cancellation",
      write: () => this.store.markCanceled(job.id, owner, this.clock()),
      final: true,
    };
  }

  /** The result inline, or in the blob store when large; a blob store failure is a retryable attempt failure. */
  private async storeResult(
    host: ServedModel,
    job: Job,
    outputs: Record<string, unknown>,
    version: string,
  ): Promise<{ result?: string; resultKey?: string; resultBytes: number }> {
    // The version that computed it, which a swap or a canary split may make another than the current one.
    const json = JSON.stringify({ model: host.config.name, model_version: version, outputs });
    const bytes = Buffer.byteLength(json);
    if (bytes <= this.config.inlineResultMaxBytes) return { result: json, resultBytes: bytes };
    const key = `results/${job.id}.json`;
    try {
      await this.blobs.put(key, Buffer.from(json), "application/json");
    } catch (err) {
      throw new ModelportError(
        "MP_ERR_JOB_STORE_UNAVAILABLE",
        `storing the result of job '${job.id}' in the blob store failed: ${(err as Error).message}`,
      );
    }
    return { resultKey: key, resultBytes: bytes };
  }

  /**
   * Writes an attempt's outcome, retrying a failing store with backoff for up to one lease.
   * @returns the store's answer, or undefined when it never answered (the job stays running
   * under a lease nobody renews, so it is claimed again once the lease lapses).
   */
  private async recordOutcome(
    job: Job,
    what: string,
    write: () => Promise<boolean>,
  ): Promise<boolean | undefined> {
    const giveUpAt = this.clock() + this.config.leaseMs;
    let wait = RECORD_RETRY_FIRST_MS;
    for (;;) {
      try {
        return await write();
      } catch (err) {
        if (this.stopping || this.clock() + wait > giveUpAt) {
          this.log.error({ err, jobId: job.id }, `${what} failed; the job runs again once its lease lapses`);
          return undefined;
        }
        this.log.warn({ err, jobId: job.id }, `${what} failed; retrying`);
        await sleep(wait);
        wait = Math.min(wait * 2, RECORD_RETRY_MAX_MS);
      }
    }
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

  /** Runs the job's input through the model's batcher, behind synchronous requests, within the job timeout. */
  private async execute(
    host: ServedModel,
    job: Job,
    cancel: CancelHandle,
    trace: TraceParent | undefined,
  ): Promise<{ outputs: Record<string, unknown>; version: string }> {
    // A pinned job runs that version only; one this process no longer has fails the attempt
    // with MP_ERR_MODEL_VERSION_NOT_FOUND.
    const target = job.version === undefined ? host : this.catalogue.find(host.name, "predict", job.version);
    let version = target.config.version;
    const signature = target.signature;
    if (!signature) throw target.notReadyError();
    const inputs = decodeNative(JSON.parse(job.input), signature, target.config.limits);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        cancel.cancel();
        reject(
          new ModelportError(
            "MP_ERR_JOB_TIMEOUT",
            `attempt ${job.attempts} ran longer than ${job.timeoutMs} ms`,
          ),
        );
      }, job.timeoutMs);
    });
    let computeMs = 0;
    try {
      const outputs = await Promise.race([
        target.predict!(inputs, {
          deadline: performance.now() + job.timeoutMs,
          cancel,
          background: true,
          trace,
          onVersion: (v) => {
            version = v;
          },
          onCompute: (ms) => {
            computeMs += ms;
          },
        }),
        timeout,
      ]);
      // Each attempt's use counts against the key that submitted the job.
      if (job.owner !== undefined)
        this.options.onUsage?.(job.owner, host.name, {
          rows: Object.values(inputs)[0]?.shape[0] ?? 0,
          computeMs,
        });
      return { outputs: encodeNative(outputs), version };
    } catch (err) {
      // The batcher refuses work that cannot finish in time before running it: for a job that
      // is this attempt's timeout.
      if (isModelportError(err) && err.code === "MP_ERR_DEADLINE_EXCEEDED") {
        throw new ModelportError(
          "MP_ERR_JOB_TIMEOUT",
          `attempt ${job.attempts} cannot finish within ${job.timeoutMs} ms: ${err.message}`,
        );
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** A job reached its final state: tell subscribers and the webhook. */
  private async finished(id: string, trace?: TraceParent): Promise<void> {
    const job = await this.publishCurrent(id);
    if (job?.webhook) {
      void this.notify(job, trace).catch((err) =>
        this.log.error({ err, jobId: job.id }, "preparing the webhook failed"),
      );
    }
  }

  /** `trace`: the last attempt's (the delivery is its child), else the submitter's when the job ended without one. */
  private async notify(job: Job, trace = fromTraceHeaders(job.trace)): Promise<void> {
    const webhook = job.webhook!;
    const result =
      job.status === "succeeded" && job.result !== undefined ? JSON.parse(job.result) : undefined;
    let resultUrl: string | undefined;
    if (job.resultKey) {
      // Without a presigned URL the receiver still has links.result to fetch it from.
      resultUrl = await this.blobs.url(job.resultKey, this.urlTtlSeconds()).catch((err) => {
        this.log.warn(
          { err, jobId: job.id },
          "presigning the result URL failed; the webhook carries links.result",
        );
        return undefined;
      });
    }
    const body = JSON.stringify({
      event: "job.finished",
      job: {
        ...jobView(job),
        ...(result ? { result } : {}),
        ...(resultUrl ? { result_url: resultUrl } : {}),
      },
    });
    const secret = this.options.webhookSecret ?? this.config.webhooks.secret ?? "";
    await deliverWebhook({
      url: webhook.url,
      // Stable across retries and restarts, so receivers can drop duplicates.
      deliveryId: `${job.id}:job.finished`,
      body,
      secret,
      timeoutMs: this.config.webhooks.timeoutMs,
      maxAttempts: this.config.webhooks.maxAttempts,
      allowPrivate: this.config.webhooks.allowPrivate,
      lookupTimeoutMs: this.config.webhooks.dnsTimeoutMs,
      ...(trace ? { trace } : {}),
      onAttempt: (state) => {
        void this.store
          .recordWebhook(job.id, state)
          .catch((err) => this.log.warn({ err }, "recording a webhook attempt failed"));
      },
    }).catch((err) => this.log.warn({ err, jobId: job.id }, "webhook delivery failed"));
  }
}
