// A language model (llama-cpp, transformers) served by the runner tier, as the API tier holds
// it: no weights. Each call goes to the least-loaded runner that reports the model ready, over
// the runner's own OpenAI-compatible routes (the upstream backend's client, one per runner),
// so streams pass through chunk by chunk and a client that disconnects stops the generation on
// the runner. A call that failed before any text reached the client is tried once more on
// another runner.

import type { Logger } from "pino";
import { UpstreamLanguageModel } from "../backends/upstream/upstream-language-model.js";
import { type LanguageModelConfig, upstreamSchema } from "../config/schema.js";
import { ERRORS, type ErrorCode, isModelportError, ModelportError, TRY_ELSEWHERE } from "../errors.js";
import type {
  EmbedInput,
  EmbedOptions,
  EmbedResult,
  GenerateOptions,
  GenerateRequest,
  GenerateResult,
} from "../llm/language-model.js";
import type { RunnerEndpoint } from "../runner/remote/runner-endpoint.js";
import type { RunnerPool } from "../runner/remote/runner-pool.js";
import { RunnerView } from "./runner-view.js";
import {
  type Capabilities,
  EMBEDDINGS_CAPABILITIES,
  generativeCapabilities,
  type ModelStatus,
  type ServedModel,
} from "./served-model.js";

/** Where the API tier's key for its runners is handed to the upstream client. */
const KEY_ENV = "MODELPORT_RUNNER_API_KEY";

/**
 * A runner's refusal as the runner gave it: the upstream client wraps answers in
 * MP_ERR_LLM_UPSTREAM_*, but a runner is a modelport, so its own code (context overflow,
 * overloaded, bad parameter) is the one the client should see.
 */
function runnerError(err: unknown): unknown {
  if (!isModelportError(err)) return err;
  const code = err.details?.upstreamCode;
  if (typeof code !== "string" || !(code in ERRORS)) return err;
  const message =
    typeof err.details?.upstreamMessage === "string" ? err.details.upstreamMessage : err.message;
  const retryAfterSeconds = err.details?.retryAfterSeconds;
  return new ModelportError(code as ErrorCode, message, {
    model: err.details?.model,
    ...(typeof retryAfterSeconds === "number" ? { retryAfterSeconds } : {}),
  });
}

export class RemoteLanguageModel implements ServedModel {
  readonly name: string;
  readonly backend: LanguageModelConfig["backend"];
  readonly kind = "language" as const;
  readonly signature = undefined;
  readonly capabilities: Capabilities;
  readonly created = Math.floor(Date.now() / 1000);
  private readonly clients = new Map<string, Promise<UpstreamLanguageModel>>();
  private readonly pinnedCopies = new Map<string, RemoteLanguageModel>();
  private active = 0;
  private closed = false;
  private readonly runnerView: RunnerView;

  constructor(
    readonly config: LanguageModelConfig,
    private readonly pool: RunnerPool,
    private readonly log: Logger,
    private readonly apiKey: string | undefined,
    /** Calls go to this version only (as `name@version` on the runners that hold it). */
    private readonly pinned?: string,
  ) {
    this.name = config.name;
    this.backend = config.backend;
    this.runnerView = new RunnerView(pool, config.name, pinned);
    this.capabilities =
      config.backend === "transformers" ? EMBEDDINGS_CAPABILITIES : generativeCapabilities(true);
  }

  /** The model pinned to `version`: served by the runners that hold it. */
  at(version: string): RemoteLanguageModel {
    let copy = this.pinnedCopies.get(version);
    if (!copy) {
      copy = new RemoteLanguageModel(this.config, this.pool, this.log, this.apiKey, version);
      this.pinnedCopies.set(version, copy);
    }
    return copy;
  }

  /** The pool polls the runners; the tensor registry starts it. */
  async start(): Promise<void> {}

  async close(): Promise<void> {
    this.closed = true;
    const clients = await Promise.allSettled(this.clients.values());
    await Promise.all(clients.map((c) => (c.status === "fulfilled" ? c.value.close() : undefined)));
    for (const copy of this.pinnedCopies.values()) await copy.close();
  }

  /** The pinned version; else the version a serving runner calls current. */
  get version(): string {
    return this.runnerView.version(this.config.version);
  }

  /** A runner can take a call now (the model ready there, or loaded by the call). */
  get ready(): boolean {
    return !this.closed && this.runnerView.canServe();
  }

  notReadyError(): ModelportError {
    if (this.closed)
      return new ModelportError("MP_ERR_SERVER_SHUTTING_DOWN", `model '${this.name}' is closed`, {
        model: this.name,
      });
    return this.runnerView.unreadyError();
  }

  status(): ModelStatus {
    const { state, ready, loadable } = this.runnerView.standing(this.closed);
    return {
      name: this.name,
      version: this.version,
      backend: this.backend,
      path: this.config.path,
      state,
      ready,
      ...(ready ? {} : { reason: this.runnerView.reason(), code: this.runnerView.unreadyError().code }),
      ...(loadable ? { loadable: true as const } : {}),
      // Each runner checks the golden example before it reports the model ready.
      golden: "runner",
      restarts: 0,
      recycles: 0,
      runner: { placement: "remote" },
      concurrency: { active: this.active, waiting: 0, limit: 0 },
    };
  }

  generate(request: GenerateRequest, options: GenerateOptions = {}): Promise<GenerateResult> {
    return this.forward(
      (m, onDelta) => m.generate(request, { ...options, ...(onDelta ? { onDelta } : {}) }),
      options,
    );
  }

  embed(inputs: readonly EmbedInput[], options: EmbedOptions = {}): Promise<EmbedResult> {
    return this.forward((m) => m.embed(inputs, options), options);
  }

  private async forward<T>(
    call: (model: UpstreamLanguageModel, onDelta?: (text: string) => void) => Promise<T>,
    options: GenerateOptions,
  ): Promise<T> {
    let streamed = false;
    const onDelta = options.onDelta
      ? (text: string) => {
          streamed = true;
          options.onDelta!(text);
        }
      : undefined;
    const first = this.pool.pick(this.name, undefined, this.pinned);
    if (!first) throw this.runnerView.unreadyError();
    this.active++;
    try {
      try {
        return await this.on(first, (m) => call(m, onDelta));
      } catch (caught) {
        const err = runnerError(caught);
        const again =
          !streamed && !options.cancel?.canceled && isModelportError(err) && TRY_ELSEWHERE.has(err.code);
        if (!again) throw err;
        const second = this.pool.pick(this.name, first, this.pinned);
        // The only runner refused (overloaded, draining): its own answer is the best one; a runner
        // that could not be reached at all is "unavailable".
        if (!second) {
          throw err.code === "MP_ERR_LLM_UPSTREAM_FAILED"
            ? this.runnerView.unavailable(`${err.message}; no other runner serves it`)
            : err;
        }
        this.log.warn(
          { model: this.name, runner: first.url, retryOn: second.url, err: err.message },
          "retrying on another runner",
        );
        return await this.on(second, (m) => call(m, onDelta)).catch((e: unknown) => {
          throw runnerError(e);
        });
      }
    } finally {
      this.active--;
    }
  }

  private async on<T>(ep: RunnerEndpoint, call: (model: UpstreamLanguageModel) => Promise<T>): Promise<T> {
    const model = await this.client(ep);
    ep.inFlight++;
    try {
      return await call(model);
    } finally {
      ep.inFlight--;
    }
  }

  /** The upstream client for one runner, started (probed) once. */
  private client(ep: RunnerEndpoint): Promise<UpstreamLanguageModel> {
    let client = this.clients.get(ep.url);
    if (!client) {
      const c = this.config;
      const model = new UpstreamLanguageModel(
        {
          ...c,
          backend: "upstream",
          upstream: upstreamSchema.parse({
            url: `${ep.url}/v1`,
            model: this.pinned === undefined ? c.name : `${c.name}@${this.pinned}`,
            ...(this.apiKey ? { apiKeyEnv: KEY_ENV } : {}),
            timeoutMs: c.limits.timeoutMs,
            // Failing over to another runner is this class's job, not a retry on the same one.
            retries: 0,
            backoffMs: 100,
            maxBackoffMs: 1000,
          }),
          // The runner admits and queues; the API tier passes everything on.
          llm: { ...c.llm, sequences: 1_000_000, maxWaiting: 0 },
        },
        this.log,
        { env: this.apiKey ? { [KEY_ENV]: this.apiKey } : {} },
      );
      client = model.start().then(() => {
        const s = model.status();
        if (!s.ready) {
          this.clients.delete(ep.url);
          throw this.runnerView.unavailable(`${ep.url}: ${s.reason ?? s.state}`);
        }
        return model;
      });
      this.clients.set(ep.url, client);
    }
    return client;
  }
}
