// The OpenAI Batch API over the job queue (docs/Batch.md): a batch is validated whole when it is
// created, then each of its lines becomes a job (a language-model job at a background priority,
// idempotent by batch and custom_id), submitted in chunks so the event loop keeps serving. Job
// events and a periodic check (which also finds, after a restart, the batches still running) count
// progress, cancel what a cancelled or expired batch still has queued or running, and once every
// job is final write the output and error files and end the batch.
import { createHash, randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Catalogue } from "../catalogue/catalogue.js";
import type { JobsConfig } from "../config/schema.js";
import { isModelportError, ModelportError } from "../errors.js";
import { FINAL_STATUSES, type Job, type JobStatus } from "../jobs/job.js";
import type { JobQueue, SubmitJob } from "../jobs/job-queue.js";
import { checkEndpoint } from "../jobs/language-work.js";
import type { BlobStore } from "../storage/blob-store.js";
import type { BatchFiles } from "./batch-files.js";
import { type BatchLine, parseBatchFile } from "./batch-input.js";
import {
  type BatchRecord,
  type BatchRequest,
  type BatchStore,
  FINAL_BATCH_STATUSES,
  type Page,
  type PageQuery,
} from "./batch-store.js";
import { checkMetadata, invalid, validateLines } from "./batch-validation.js";
import { TimeSlice } from "./time-slice.js";

export interface CreateBatch {
  /** The creating key's name (its jobs and files are its own); undefined on a server without keys. */
  owner?: string;
  /** Its limit on jobs queued or running at once (its key's queuedJobs). */
  maxActive?: number;
  /** Which files the caller may see (a key name; undefined: all). */
  scope: string | undefined;
  /** Whether the caller may use the model `name`. */
  mayUse: (name: string) => boolean;
  body: Record<string, unknown>;
}

export interface BatchRunnerOptions {
  store: BatchStore;
  files: BatchFiles;
  blobs: BlobStore;
  jobs: JobQueue;
  catalogue: Catalogue;
  config: JobsConfig;
  log: Logger;
  clock?: () => number;
}

/** The only completion window OpenAI offers. */
const WINDOWS: Record<string, number> = { "24h": 24 * 3_600_000 };
/** A finished job's event brings a check of its batch this much later, so a burst makes one check. */
const POKE_DELAY_MS = 50;

export class BatchRunner {
  private readonly store: BatchStore;
  private readonly jobs: JobQueue;
  private readonly log: Logger;
  private readonly clock: () => number;
  private readonly settings: JobsConfig["batches"];
  /** Batches whose submission runs in this process. */
  private readonly submitting = new Map<string, Promise<void>>();
  /** One check per batch at a time; a check asked for meanwhile runs once after it. */
  private readonly checking = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  private readonly poked = new Map<string, NodeJS.Timeout>();
  /** Final states of jobs seen per batch, so a check reads only the jobs still open. */
  private readonly finalSeen = new Map<string, Map<string, JobStatus>>();
  /** Jobs this process already asked to cancel. */
  private readonly cancelAsked = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly options: BatchRunnerOptions) {
    this.store = options.store;
    this.jobs = options.jobs;
    this.log = options.log.child({ component: "batches" });
    this.clock = options.clock ?? Date.now;
    this.settings = options.config.batches;
  }

  /**
   * Validates and stores a batch: `failed` with errors.data when a line is at fault, else
   * `in_progress`, its lines submitted as jobs from now on.
   * @throws ModelportError MP_ERR_REQUEST_INVALID (a bad field, named), MP_ERR_FILE_NOT_FOUND
   */
  async create(req: CreateBatch): Promise<BatchRecord> {
    const { input_file_id: inputFileId, endpoint, completion_window: window, metadata } = req.body;
    if (typeof inputFileId !== "string" || inputFileId === "")
      throw invalid("input_file_id", '"input_file_id" must be the id of an uploaded file');
    // The endpoints language-model jobs serve, checked as a job's own `endpoint` is.
    const target = checkEndpoint(endpoint);
    if (typeof window !== "string" || WINDOWS[window] === undefined)
      throw invalid("completion_window", '"completion_window" must be "24h"');
    const meta = checkMetadata(metadata);
    const file = await this.options.files.get(inputFileId, req.scope);
    if (file.purpose !== "batch")
      throw invalid(
        "input_file_id",
        `file '${inputFileId}' has purpose ${file.purpose}; a batch reads a file uploaded with purpose "batch"`,
      );
    const lines = await parseBatchFile(await this.options.files.content(file), this.settings.maxFileLines);
    const errors = validateLines(lines, target, req.mayUse, this.options.catalogue);
    const now = this.clock();
    const batch: BatchRecord = {
      id: `batch_${randomUUID().replaceAll("-", "")}`,
      ...(req.owner !== undefined ? { owner: req.owner } : {}),
      endpoint: target,
      inputFileId,
      completionWindow: window,
      status: errors.length ? "failed" : "in_progress",
      createdAt: now,
      expiresAt: now + WINDOWS[window]!,
      ...(errors.length ? { failedAt: now, errors } : { inProgressAt: now }),
      requestCounts: { total: errors.length ? 0 : lines.length, completed: 0, failed: 0 },
      ...(meta ? { metadata: meta } : {}),
      ...(req.owner !== undefined && req.maxActive !== undefined ? { maxActive: req.maxActive } : {}),
    };
    await this.store.createBatch(batch);
    if (batch.status === "in_progress") this.startSubmitting(batch, lines);
    return batch;
  }

  /**
   * The batch if `scope` (a key name; undefined: all) may see it.
   * @throws ModelportError MP_ERR_BATCH_NOT_FOUND, the same for another key's batch as for none
   */
  async get(id: string, scope: string | undefined): Promise<BatchRecord> {
    const batch = await this.store.getBatch(id);
    if (!batch || (scope !== undefined && batch.owner !== scope))
      throw new ModelportError("MP_ERR_BATCH_NOT_FOUND", `no batch '${id}'`, { param: "batch_id" });
    return batch;
  }

  list(query: PageQuery): Promise<Page<BatchRecord>> {
    return this.store.listBatches(query);
  }

  /**
   * Moves a running batch to `cancelling`: its queued jobs are canceled, running ones stop where
   * the backend allows, and it ends `cancelled` with the output written so far.
   * @throws ModelportError MP_ERR_BATCH_FINISHED for a batch that already ended
   */
  async cancel(batch: BatchRecord): Promise<BatchRecord> {
    for (let current = batch; ; ) {
      if (current.status === "cancelling" || current.status === "finalizing") return current;
      if (FINAL_BATCH_STATUSES.includes(current.status)) {
        throw new ModelportError(
          "MP_ERR_BATCH_FINISHED",
          `batch '${current.id}' already ended ${current.status}; only a batch in progress can be cancelled`,
        );
      }
      const next: BatchRecord = { ...current, status: "cancelling", cancellingAt: this.clock() };
      if (await this.store.updateBatch(next, current.status)) {
        this.poke(next.id);
        return next;
      }
      // Another process moved it on meanwhile: decide again on what it is now.
      const now = await this.store.getBatch(current.id);
      if (!now) return current;
      current = now;
    }
  }

  /** Follows job events and checks every unfinished batch now (a restart's leftovers) and every checkMs. */
  start(): void {
    if (this.timer || this.stopped) return;
    this.unsubscribe = this.jobs.events.subscribe("*", (job) => this.onJob(job));
    this.timer = setInterval(() => void this.checkAll(), this.settings.checkMs);
    this.timer.unref();
    void this.checkAll();
  }

  /** Stops checking and submitting; what is left is taken up by the next process's checks. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.unsubscribe?.();
    for (const t of this.poked.values()) clearTimeout(t);
    this.poked.clear();
    await Promise.allSettled([...this.submitting.values(), ...this.checking.values()]);
  }

  private onJob(job: Job): void {
    const batchId = job.metadata?.batch_id;
    if (typeof batchId !== "string" || !FINAL_STATUSES.includes(job.status)) return;
    this.finalSeen.get(batchId)?.set(job.id, job.status);
    this.poke(batchId);
  }

  /** A check of one batch soon (once for a burst of events). */
  private poke(id: string): void {
    if (this.stopped || this.poked.has(id)) return;
    const t = setTimeout(() => {
      this.poked.delete(id);
      void this.check(id);
    }, POKE_DELAY_MS);
    t.unref();
    this.poked.set(id, t);
  }

  /** Checks every unfinished batch; a store that fails is tried again next time. */
  async checkAll(): Promise<void> {
    if (this.stopped) return;
    try {
      for (const b of await this.store.unfinishedBatches()) await this.check(b.id);
    } catch (err) {
      this.log.warn({ err }, "checking the unfinished batches failed; trying again later");
    }
  }

  /** Checks one batch, never two checks of it at once. Resolves when it (and a check asked for meanwhile) ran. */
  check(id: string): Promise<void> {
    const running = this.checking.get(id);
    if (running) {
      this.again.add(id);
      return running;
    }
    const run = (async () => {
      do {
        this.again.delete(id);
        try {
          await this.checkOnce(id);
        } catch (err) {
          this.log.warn({ err, batchId: id }, "checking a batch failed; trying again later");
        }
      } while (this.again.has(id) && !this.stopped);
    })().finally(() => this.checking.delete(id));
    this.checking.set(id, run);
    return run;
  }

  private async checkOnce(id: string): Promise<void> {
    if (this.stopped) return;
    const batch = await this.store.getBatch(id);
    if (!batch || FINAL_BATCH_STATUSES.includes(batch.status)) {
      this.finalSeen.delete(id);
      return;
    }
    if (batch.status === "finalizing") return this.finalize(batch, "completed");
    // Batches are stored validated; one left "validating" is not from this version: refuse it.
    if (batch.status === "validating") {
      const failed: BatchRecord = {
        ...batch,
        status: "failed",
        failedAt: this.clock(),
        errors: [
          { code: "MP_ERR_REQUEST_INVALID", message: "the batch was never validated; create it again" },
        ],
      };
      await this.store.updateBatch(failed, "validating");
      return;
    }
    const expired = batch.status === "in_progress" && this.clock() >= batch.expiresAt;
    const stopping = batch.status === "cancelling" || expired;
    const requests = await this.store.requests(id);
    const total = batch.requestCounts.total;
    if (!stopping && requests.length < total) this.startSubmitting(batch);
    let seen = this.finalSeen.get(id);
    if (!seen) {
      seen = new Map();
      this.finalSeen.set(id, seen);
    }
    let completed = 0;
    let failed = 0;
    let open = 0;
    // Reading the state of each open job is a job store read on this thread: in slices.
    const slice = new TimeSlice();
    for (const r of requests) {
      await slice.pass();
      if (r.jobId === undefined) {
        failed++;
        continue;
      }
      let status = seen.get(r.jobId);
      if (status === undefined) {
        // A job purged meanwhile (retention) counts as failed: its result is gone.
        status = (await this.jobs.state(r.jobId))?.status ?? "failed";
        if (FINAL_STATUSES.includes(status)) seen.set(r.jobId, status);
      }
      if (status === "succeeded") completed++;
      else if (FINAL_STATUSES.includes(status)) failed++;
      else {
        open++;
        if (stopping) await this.cancelJob(r.jobId);
      }
    }
    const submittedAll = requests.length >= total;
    const submittingHere = this.submitting.has(id);
    if (open === 0 && (submittedAll || (stopping && !submittingHere))) {
      return this.finalize(
        batch,
        batch.status === "cancelling" ? "cancelled" : expired ? "expired" : "completed",
      );
    }
    const counts = { total, completed, failed };
    if (counts.completed !== batch.requestCounts.completed || counts.failed !== batch.requestCounts.failed)
      await this.store.updateBatch({ ...batch, requestCounts: counts }, batch.status);
  }

  private async cancelJob(jobId: string): Promise<void> {
    if (this.cancelAsked.has(jobId)) return;
    this.cancelAsked.add(jobId);
    try {
      await this.jobs.cancel(jobId);
    } catch (err) {
      this.cancelAsked.delete(jobId);
      this.log.warn({ err, jobId }, "canceling a batch's job failed; trying again at the next check");
    }
  }

  /** Submits the batch's lines not yet submitted, in the background (once per batch in this process). */
  private startSubmitting(batch: BatchRecord, lines?: BatchLine[]): void {
    if (this.stopped || this.submitting.has(batch.id)) return;
    const run = this.submitRest(batch, lines)
      .catch((err) =>
        this.log.warn(
          { err, batchId: batch.id },
          "submitting a batch's jobs failed; resuming at the next check",
        ),
      )
      .finally(() => {
        this.submitting.delete(batch.id);
        this.poke(batch.id);
      });
    this.submitting.set(batch.id, run);
  }

  private async submitRest(batch: BatchRecord, known?: BatchLine[]): Promise<void> {
    let next = (await this.store.requests(batch.id)).length;
    const lines = known ?? (await this.readLines(batch));
    if (!lines) {
      // The input file was deleted while the batch ran: the lines not submitted cannot run.
      const gone = {
        code: "MP_ERR_FILE_NOT_FOUND",
        message: `the input file '${batch.inputFileId}' was deleted`,
      };
      const rest = Array.from({ length: batch.requestCounts.total - next }, (_, i) => ({
        line: next + i,
        customId: "",
        error: gone,
      }));
      await this.store.putRequests(batch.id, rest);
      return;
    }
    const owner = batch.owner;
    while (next < lines.length && !this.stopped) {
      const current = await this.store.getBatch(batch.id);
      if (current?.status !== "in_progress" || this.clock() >= current.expiresAt) return;
      const chunk = lines.slice(next, next + this.settings.submitChunk);
      const submission = (l: BatchLine): SubmitJob => ({
        model: l.body.model as string,
        body: {},
        work: { endpoint: l.url, body: l.body },
        ...(owner !== undefined ? { owner } : {}),
        ...(owner !== undefined && batch.maxActive !== undefined ? { maxActive: batch.maxActive } : {}),
        // A restart while submitting submits the same line again: the same job comes back.
        idempotencyKey: `${batch.id}/${l.customId}`,
        metadata: { batch_id: batch.id, custom_id: l.customId },
        priority: this.settings.priority,
      });
      let done: BatchRequest[] = [];
      let paused = false;
      // The chunk in one store write (bulk submission). A line at fault, or a queue with room for
      // only some of the chunk, makes the chunk go line by line: each line its own answer.
      try {
        const results = await this.jobs.submitMany(chunk.map(submission));
        done = results.map((r, i) => {
          const l = chunk[i]!;
          return "job" in r
            ? { line: next + i, customId: l.customId, jobId: r.job.id }
            : {
                line: next + i,
                customId: l.customId,
                error: { code: r.error.code, message: r.error.message },
              };
        });
      } catch (err) {
        if (!isModelportError(err))
          this.log.warn({ err, batchId: batch.id }, "submitting a batch chunk failed");
      }
      // Line by line, a chunk ends after one time slice: each submission is a job store write on
      // this thread.
      const slice = new TimeSlice();
      for (const l of done.length ? [] : chunk) {
        if (done.length > 0 && slice.spent()) break;
        const line = next + done.length;
        try {
          const { job } = await this.jobs.submit(submission(l));
          done.push({ line, customId: l.customId, jobId: job.id });
        } catch (err) {
          // A full queue, the key's queuedJobs limit, a model still loading, a store outage: wait
          // and go on at a later check. Anything else is this line's own fault: its error line.
          if (!isModelportError(err) || err.retryable) {
            paused = true;
            if (!isModelportError(err))
              this.log.warn({ err, batchId: batch.id }, "submitting a batch line failed");
            break;
          }
          done.push({ line, customId: l.customId, error: { code: err.code, message: err.message } });
        }
      }
      if (done.length) await this.store.putRequests(batch.id, done);
      next += done.length;
      if (paused) return;
      // Let requests in between chunks.
      await slice.yield();
    }
  }

  /** The batch's lines, or undefined when its input file was deleted meanwhile. */
  private async readLines(batch: BatchRecord): Promise<BatchLine[] | undefined> {
    try {
      const file = await this.options.files.get(batch.inputFileId, undefined);
      return await parseBatchFile(await this.options.files.content(file), this.settings.maxFileLines);
    } catch (err) {
      if (isModelportError(err) && err.code === "MP_ERR_FILE_NOT_FOUND") return undefined;
      throw err;
    }
  }

  /**
   * Writes the output and error files and ends the batch as `status`. Safe to repeat (a process
   * that died while finalizing): the files' ids come from the batch's, so they are written over.
   */
  private async finalize(batch: BatchRecord, status: "completed" | "cancelled" | "expired"): Promise<void> {
    let current = batch;
    if (current.status === "in_progress") {
      const next: BatchRecord = { ...current, status: "finalizing", finalizingAt: this.clock() };
      if (!(await this.store.updateBatch(next, "in_progress"))) return;
      current = next;
    }
    const lines = await this.readLines(current);
    const requests = new Map((await this.store.requests(current.id)).map((r) => [r.line, r]));
    const out: string[] = [];
    const errors: string[] = [];
    const unrun =
      status === "expired"
        ? {
            code: "batch_expired",
            message: "This request could not be executed before the completion window expired.",
          }
        : status === "cancelled"
          ? { code: "batch_cancelled", message: "This request was not executed: the batch was cancelled." }
          : { code: "batch_cancelled", message: "This request's job was canceled (DELETE /v1/jobs/{id})." };
    const slice = new TimeSlice();
    for (let index = 0; index < current.requestCounts.total; index++) {
      await slice.pass();
      const id = `batch_req_${createHash("sha256").update(`${current.id}\n${index}`).digest("hex").slice(0, 32)}`;
      const r = requests.get(index);
      // Without the input file (deleted meanwhile), a line never submitted is known by its place alone.
      const customId = lines?.[index]?.customId ?? r?.customId ?? "";
      const answer = r?.jobId !== undefined ? await this.outcome(r.jobId) : undefined;
      if (answer && "body" in answer) {
        out.push(
          JSON.stringify({
            id,
            custom_id: customId,
            response: { status_code: 200, request_id: r!.jobId, body: answer.body },
            error: null,
          }),
        );
        continue;
      }
      const error = r?.error ?? answer?.error ?? unrun;
      errors.push(JSON.stringify({ id, custom_id: customId, response: null, error }));
    }
    const write = async (kind: "output" | "errors", rows: string[]) =>
      rows.length === 0
        ? undefined
        : (
            await this.options.files.write(
              current.owner,
              `${current.id}_${kind}.jsonl`,
              "batch_output",
              Buffer.from(`${rows.join("\n")}\n`),
              `file-${current.id.slice("batch_".length)}-${kind}`,
            )
          ).id;
    const outputFileId = await write("output", out);
    const errorFileId = await write("errors", errors);
    const now = this.clock();
    const ended: BatchRecord = {
      ...current,
      status,
      ...(status === "completed"
        ? { completedAt: now }
        : status === "cancelled"
          ? { cancelledAt: now }
          : { expiredAt: now }),
      ...(outputFileId ? { outputFileId } : {}),
      ...(errorFileId ? { errorFileId } : {}),
      requestCounts: { total: current.requestCounts.total, completed: out.length, failed: errors.length },
    };
    // Cost: each job's usage is counted against the owner as it runs (JobQueue onUsage); a batch
    // price (a discount on a model's token prices) would be applied there, by the job's batch_id.
    if (await this.store.updateBatch(ended, current.status)) {
      this.finalSeen.delete(current.id);
      this.log.info(
        { batchId: current.id, status, completed: out.length, failed: errors.length },
        "batch ended",
      );
    }
  }

  /** A job's answer for the output file, or its error for the error file. */
  private async outcome(
    jobId: string,
  ): Promise<{ body: unknown } | { error: { code: string; message: string } } | undefined> {
    const job = await this.jobs.get(jobId);
    if (!job)
      return { error: { code: "MP_ERR_JOB_NOT_FOUND", message: `job '${jobId}' is no longer stored` } };
    if (job.status === "succeeded") {
      const text =
        job.result ??
        (job.resultKey ? (await this.options.blobs.get(job.resultKey))?.data.toString("utf8") : undefined);
      if (text === undefined)
        return {
          error: {
            code: "MP_ERR_JOB_NOT_FOUND",
            message: `the result of job '${jobId}' is no longer stored`,
          },
        };
      return { body: (JSON.parse(text) as { response?: unknown }).response };
    }
    if (job.status === "canceled") return undefined;
    return {
      error: job.lastError ?? {
        code: "MP_ERR_SERVER_INTERNAL",
        message: `job '${jobId}' ended ${job.status}`,
      },
    };
  }
}
