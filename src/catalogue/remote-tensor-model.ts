// A model served by the runner tier, as the API tier holds it: no weights, no batcher (each
// runner batches what it receives); its signature and readiness come from the runners' health
// polls, and predict forwards to the least-loaded runner that serves it.
import type { ModelConfig } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import type { RunnerPool } from "../runner/remote/runner-pool.js";
import type { ModelSignature, TensorMap } from "../tensor.js";
import {
  type CallOptions,
  type ModelStatus,
  type RemoteRunnerStatus,
  type ServedModel,
  TENSOR_CAPABILITIES,
} from "./served-model.js";

export class RemoteTensorModel implements ServedModel {
  readonly kind = "tensor" as const;
  readonly capabilities = TENSOR_CAPABILITIES;
  readonly created = Math.floor(Date.now() / 1000);
  private closed = false;

  constructor(
    readonly config: ModelConfig,
    private readonly pool: RunnerPool,
  ) {}

  get name(): string {
    return this.config.name;
  }

  get version(): string {
    return this.config.version;
  }

  get backend(): ModelConfig["backend"] {
    return this.config.backend;
  }

  get ready(): boolean {
    return !this.closed && this.pool.all().some((ep) => ep.serves(this.config.name));
  }

  /** The signature reported by a runner serving the model (ready ones first). */
  get signature(): ModelSignature | undefined {
    const name = this.config.name;
    const serving = this.pool.all().find((ep) => ep.serves(name));
    return (serving ?? this.pool.all().find((ep) => ep.models.has(name)))?.models.get(name)?.signature;
  }

  /** The pool polls the runners; the catalogue starts it once for every remote model. */
  async start(): Promise<void> {}

  predict(inputs: TensorMap, options: CallOptions = {}): Promise<TensorMap> {
    if (this.closed) return Promise.reject(this.notReadyError());
    return this.pool.predict(this.config.name, inputs, options);
  }

  notReadyError(): ModelportError {
    if (this.closed) {
      return new ModelportError("MP_ERR_SERVER_SHUTTING_DOWN", `model '${this.config.name}' is closed`, {
        model: this.config.name,
      });
    }
    return new ModelportError(
      "MP_ERR_RUNNER_UNAVAILABLE",
      `model '${this.config.name}': ${this.reason()}; retry shortly`,
      { model: this.config.name },
    );
  }

  private runners(): RemoteRunnerStatus[] {
    const name = this.config.name;
    return this.pool.all().map((ep) => {
      const report = ep.models.get(name);
      const ready = ep.serves(name);
      let reason: string | undefined;
      if (!ep.healthy) reason = ep.reason;
      else if (!report) reason = "does not serve this model";
      else if (!ready) reason = report.reason ?? "not ready";
      return {
        url: ep.url,
        ...(ep.instance ? { instance: ep.instance } : {}),
        healthy: ep.healthy,
        ready,
        inFlight: ep.inFlight,
        ...(reason ? { reason } : {}),
      };
    });
  }

  private reason(): string {
    const lines = this.runners().map((r) => `${r.url}: ${r.reason ?? "ready"}`);
    return `no runner serving it is ready (${lines.join("; ") || "no runners configured"})`;
  }

  status(): ModelStatus {
    const c = this.config;
    const ready = this.ready;
    const runners = this.runners();
    return {
      name: c.name,
      version: c.version,
      backend: c.backend,
      path: c.path,
      state: this.closed ? "closed" : ready ? "ready" : "loading",
      ready,
      ...(ready ? {} : { reason: this.reason(), code: "MP_ERR_RUNNER_UNAVAILABLE" as const }),
      golden: "runner",
      restarts: 0,
      recycles: 0,
      runner: { placement: "remote", runners },
      batching: {
        enabled: c.batching.enabled ?? true,
        maxBatchRows: c.batching.maxBatchRows,
        maxDelayMs: c.batching.maxDelayMs,
        queuedRows: 0,
        inFlight: runners.reduce((n, r) => n + r.inFlight, 0),
      },
    };
  }

  /** Idempotent; the catalogue closes the pool. */
  async close(): Promise<void> {
    this.closed = true;
  }
}
