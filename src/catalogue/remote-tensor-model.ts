// A model served by the runner tier, as the API tier holds it: no weights, no batcher (each
// runner batches what it receives); its signature, versions and readiness come from the
// runners' health polls, and predict forwards to the least-loaded runner that serves it. A
// copy pinned to one version (at()) goes only to runners that hold that version.
import type { ModelConfig } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import type { RunnerPool } from "../runner/remote/runner-pool.js";
import type { ModelSignature, TensorMap } from "../tensor.js";
import { RunnerView } from "./runner-view.js";
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
  private readonly pinnedCopies = new Map<string, RemoteTensorModel>();
  private readonly runnerView: RunnerView;

  constructor(
    readonly config: ModelConfig,
    private readonly pool: RunnerPool,
    /** Calls go to this version only. */
    private readonly pinned?: string,
  ) {
    this.runnerView = new RunnerView(pool, config.name, pinned);
  }

  /** The model pinned to `version`: served by the runners that hold it. */
  at(version: string): RemoteTensorModel {
    let copy = this.pinnedCopies.get(version);
    if (!copy) {
      copy = new RemoteTensorModel(this.config, this.pool, version);
      this.pinnedCopies.set(version, copy);
    }
    return copy;
  }

  get name(): string {
    return this.config.name;
  }

  /** The pinned version; else the version a serving runner calls current. */
  get version(): string {
    return this.runnerView.version(this.config.version);
  }

  get backend(): ModelConfig["backend"] {
    return this.config.backend;
  }

  /** A runner can take a call now (the model ready there, or loaded by the call). */
  get ready(): boolean {
    return !this.closed && this.runnerView.canServe();
  }

  /** The signature a runner reports for the (pinned) version. */
  get signature(): ModelSignature | undefined {
    const report = this.runnerView.report();
    if (this.pinned === undefined || report?.version === this.pinned) return report?.signature;
    return report?.versions.get(this.pinned);
  }

  /** The pool polls the runners; the catalogue starts it once for every remote model. */
  async start(): Promise<void> {}

  async predict(inputs: TensorMap, options: CallOptions = {}): Promise<TensorMap> {
    if (this.closed) throw this.notReadyError();
    const answer = await this.pool.predict(this.config.name, inputs, {
      ...options,
      ...(this.pinned !== undefined ? { version: this.pinned } : {}),
    });
    if (answer.version !== undefined) options.onVersion?.(answer.version);
    return answer.outputs;
  }

  notReadyError(): ModelportError {
    const name = this.config.name;
    if (this.closed) {
      return new ModelportError("MP_ERR_SERVER_SHUTTING_DOWN", `model '${name}' is closed`, { model: name });
    }
    return this.runnerView.unreadyError();
  }

  private runners(): RemoteRunnerStatus[] {
    return this.pool.all().map((ep) => {
      const report = ep.models.get(this.config.name);
      const reason = this.runnerView.reasonOn(ep);
      return {
        url: ep.url,
        ...(ep.instance ? { instance: ep.instance } : {}),
        healthy: ep.healthy,
        ready: reason === undefined,
        ...(report ? { version: report.version } : {}),
        inFlight: ep.inFlight,
        ...(reason ? { reason } : {}),
      };
    });
  }

  status(): ModelStatus {
    const c = this.config;
    const runners = this.runners();
    const { state, ready, loadable } = this.runnerView.standing(this.closed);
    const polled = this.pool.batching(c.name);
    const loaded = this.pool.loaded(c.name);
    return {
      name: c.name,
      version: this.version,
      backend: c.backend,
      path: c.path,
      state,
      ready,
      ...(ready ? {} : { reason: this.runnerView.reason(), code: this.runnerView.unreadyError().code }),
      ...(loadable ? { loadable: true as const } : {}),
      ...(loaded?.loadMs !== undefined ? { loadMs: loaded.loadMs } : {}),
      ...(loaded?.memoryBytes !== undefined ? { memoryBytes: loaded.memoryBytes } : {}),
      ...(loaded?.threads !== undefined ? { threads: loaded.threads } : {}),
      golden: "runner",
      restarts: 0,
      recycles: 0,
      runner: { placement: "remote", runners },
      // As the runners' last health polls said: the batchers (settings and queues) are theirs.
      batching: {
        enabled: polled?.enabled ?? c.batching.enabled ?? true,
        maxBatchRows: polled?.maxBatchRows ?? c.batching.maxBatchRows,
        maxDelayMs: polled?.maxDelayMs ?? c.batching.maxDelayMs,
        queuedRows: polled?.queuedRows ?? 0,
        inFlight: runners.reduce((n, r) => n + r.inFlight, 0),
      },
    };
  }

  /** Idempotent; the catalogue closes the pool. */
  async close(): Promise<void> {
    this.closed = true;
    for (const copy of this.pinnedCopies.values()) await copy.close();
  }
}
