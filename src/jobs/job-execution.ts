// One attempt of a job, computed: a tensor job's input through the model's batcher, a language
// job's OpenAI request through the injected runner (language-work.ts), both behind synchronous
// requests and within the job's per-attempt timeout; and its result stored, inline or as a blob.
// Recording the outcome in the job store is the queue's.
import type { CancelHandle } from "../cancel.js";
import type { Catalogue } from "../catalogue/catalogue.js";
import type { ServedModel } from "../catalogue/served-model.js";
import type { JobsConfig } from "../config/schema.js";
import { isModelportError, ModelportError } from "../errors.js";
import { decodeNative, encodeNative } from "../protocol/native-body.js";
import type { BlobStore } from "../storage/blob-store.js";
import type { TraceParent } from "../telemetry/propagation.js";
import type { Job } from "./job.js";
import {
  endpointCapability,
  type LanguageWork,
  type LanguageWorkRunner,
  readLanguageWork,
} from "./language-work.js";

/** What one attempt of a job with an owner used, counted against its key (usage per key). */
export interface JobUsage {
  rows: number;
  computeMs: number;
  promptTokens: number;
  completionTokens: number;
}

export interface JobExecutorDeps {
  catalogue: Catalogue;
  blobs: BlobStore;
  config: JobsConfig;
  onUsage?: (owner: string, model: string, used: JobUsage) => void;
  languageWork?: LanguageWorkRunner;
}

export class JobExecutor {
  private readonly catalogue: Catalogue;

  constructor(private readonly options: JobExecutorDeps) {
    this.catalogue = options.catalogue;
  }

  /**
   * Runs the job's input through the model's batcher (or, for language work, its sequences),
   * behind synchronous requests, within the job timeout. @returns the result to store: the
   * version that computed it, which a swap or a canary split may make another than the current one.
   */
  async execute(
    host: ServedModel,
    job: Job,
    cancel: CancelHandle,
    trace: TraceParent | undefined,
  ): Promise<Record<string, unknown>> {
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
    try {
      const work = readLanguageWork(job.input);
      return await Promise.race([
        work
          ? this.executeLanguage(host, job, work, cancel, trace)
          : this.executePredict(host, job, cancel, trace),
        timeout,
      ]);
    } catch (err) {
      // The batcher refuses work that cannot finish in time before running it (behind a queue, or
      // shorter than the model's own run): for a job that is this attempt's timeout.
      if (
        isModelportError(err) &&
        (err.code === "MP_ERR_DEADLINE_EXCEEDED" || err.code === "MP_ERR_DEADLINE_TOO_SHORT")
      ) {
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

  private async executePredict(
    host: ServedModel,
    job: Job,
    cancel: CancelHandle,
    trace: TraceParent | undefined,
  ): Promise<Record<string, unknown>> {
    // A pinned job runs that version only; one this process no longer has fails the attempt
    // with MP_ERR_MODEL_VERSION_NOT_FOUND.
    const target = job.version === undefined ? host : this.catalogue.find(host.name, "predict", job.version);
    let version = target.config.version;
    const signature = target.signature;
    if (!signature) throw target.notReadyError();
    const inputs = decodeNative(JSON.parse(job.input), signature, target.config.limits);
    let computeMs = 0;
    const outputs = await target.predict!(inputs, {
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
    });
    // Each attempt's use counts against the key that submitted the job.
    if (job.owner !== undefined)
      this.options.onUsage?.(job.owner, host.name, {
        rows: Object.values(inputs)[0]?.shape[0] ?? 0,
        computeMs,
        promptTokens: 0,
        completionTokens: 0,
      });
    return { model: host.config.name, model_version: version, outputs: encodeNative(outputs) };
  }

  /** Answers an OpenAI request as its route would, through the injected runner; the model must be ready. */
  private async executeLanguage(
    host: ServedModel,
    job: Job,
    work: LanguageWork,
    cancel: CancelHandle,
    trace: TraceParent | undefined,
  ): Promise<Record<string, unknown>> {
    const runner = this.options.languageWork;
    if (!runner) throw new ModelportError("MP_ERR_SERVER_INTERNAL", "no runner for language-model jobs");
    const target = this.catalogue.require(host.name, endpointCapability(work.endpoint), job.version);
    const { response, usage } = await runner.run(target, work, {
      cancel,
      trace,
      background: true,
      id: job.id,
      owner: job.owner,
    });
    if (job.owner !== undefined) this.options.onUsage?.(job.owner, host.name, usage);
    return {
      model: host.config.name,
      model_version: target.config.version,
      endpoint: work.endpoint,
      response,
    };
  }

  /**
   * The result ({model, model_version, outputs} or, for language work, {…, endpoint, response})
   * inline, or in the blob store when large; a blob store failure is a retryable attempt failure.
   */
  async storeResult(
    job: Job,
    result: Record<string, unknown>,
  ): Promise<{ result?: string; resultKey?: string; resultBytes: number }> {
    const json = JSON.stringify(result);
    const bytes = Buffer.byteLength(json);
    if (bytes <= this.options.config.inlineResultMaxBytes) return { result: json, resultBytes: bytes };
    const key = `results/${job.id}.json`;
    try {
      await this.options.blobs.put(key, Buffer.from(json), "application/json");
    } catch (err) {
      throw new ModelportError(
        "MP_ERR_JOB_STORE_UNAVAILABLE",
        `storing the result of job '${job.id}' in the blob store failed: ${(err as Error).message}`,
      );
    }
    return { resultKey: key, resultBytes: bytes };
  }
}
