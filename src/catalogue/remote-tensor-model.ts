// A model served by the runner tier, as the API tier holds it: no weights, no batcher (each
// runner batches what it receives); its signature, versions and readiness come from the
// runners' health polls, and predict forwards to the least-loaded runner that serves it. A
// copy pinned to one version (at()) goes only to runners that hold that version.
import type { ModelConfig } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import type { RunnerEndpoint, RunnerModelReport } from "../runner/remote/runner-endpoint.js";
import type { RunnerPool } from "../runner/remote/runner-pool.js";
import type { ModelSignature, TensorMap } from "../tensor.js";
import {
  type CallOptions,
  type ModelStatus,
  type RemoteRunnerStatus,
  type ServedModel,
  TENSOR_CAPABILITIES,
} from "./served-model.js";

/** No runner holds the version a call is pinned to. */
export function versionNotFound(name: string, version: string): ModelportError {
  return new ModelportError(
    "MP_ERR_MODEL_VERSION_NOT_FOUND",
    `model '${name}' has no version '${version}' ready on any runner`,
    { model: name, version },
  );
}

export class RemoteTensorModel implements ServedModel {
  readonly kind = "tensor" as const;
  readonly capabilities = TENSOR_CAPABILITIES;
  readonly created = Math.floor(Date.now() / 1000);
  private closed = false;
  private readonly pinnedCopies = new Map<string, RemoteTensorModel>();

  constructor(
    readonly config: ModelConfig,
    private readonly pool: RunnerPool,
    /** Calls go to this version only. */
    private readonly pinned?: string,
  ) {}

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
    return this.pinned ?? this.serving()?.version ?? this.config.version;
  }

  get backend(): ModelConfig["backend"] {
    return this.config.backend;
  }

  /** A runner can take a call now (the model ready there, or loaded by the call). */
  get ready(): boolean {
    return !this.closed && this.pool.all().some((ep) => ep.serves(this.config.name, this.pinned));
  }

  /** The report of a runner serving the model (at the pinned version), else of any runner listing it. */
  private serving(): RunnerModelReport | undefined {
    const name = this.config.name;
    const eps = this.pool.all();
    const ep = eps.find((e) => e.serves(name, this.pinned)) ?? eps.find((e) => e.models.has(name));
    return ep?.models.get(name);
  }

  /** The signature a runner reports for the (pinned) version. */
  get signature(): ModelSignature | undefined {
    const report = this.serving();
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
    const pinned = this.pinned;
    if (pinned !== undefined && this.pool.lacksVersion(name, pinned)) return versionNotFound(name, pinned);
    return new ModelportError(
      "MP_ERR_RUNNER_UNAVAILABLE",
      `model '${name}': ${this.reason()}; retry shortly`,
      {
        model: name,
      },
    );
  }

  private runners(): RemoteRunnerStatus[] {
    const name = this.config.name;
    return this.pool.all().map((ep) => {
      const report = ep.models.get(name);
      const ready = ep.serves(name, this.pinned);
      let reason: string | undefined;
      if (!ep.healthy) reason = ep.reason;
      else if (!report) reason = "does not serve this model";
      else if (!ready)
        reason = report.reason ?? (this.pinned ? `version ${this.pinned} is not ready` : report.state);
      return {
        url: ep.url,
        ...(ep.instance ? { instance: ep.instance } : {}),
        healthy: ep.healthy,
        ready,
        ...(report ? { version: report.version } : {}),
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
    const runners = this.runners();
    const eps = this.pool.all().filter((ep) => ep.healthy);
    // Ready on a runner now; loadable: a call loads it there; unloaded: on purpose on every runner.
    const ready = !this.closed && eps.some((ep) => this.readyOn(ep));
    const loadable = !ready && this.ready;
    const unloaded = eps.length > 0 && eps.every((ep) => ep.models.get(c.name)?.state === "unloaded");
    return {
      name: c.name,
      version: this.version,
      backend: c.backend,
      path: c.path,
      state: this.closed ? "closed" : ready ? "ready" : unloaded ? "unloaded" : "loading",
      ready,
      ...(ready ? {} : { reason: this.reason(), code: "MP_ERR_RUNNER_UNAVAILABLE" as const }),
      ...(loadable ? { loadable: true as const } : {}),
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

  /** The (pinned) version is loaded and ready on `ep`, not just loadable there. */
  private readyOn(ep: RunnerEndpoint): boolean {
    const r = ep.models.get(this.config.name);
    if (!r || !ep.serves(this.config.name, this.pinned)) return false;
    return this.pinned === undefined ? r.ready : r.versions.has(this.pinned);
  }

  /** Idempotent; the catalogue closes the pool. */
  async close(): Promise<void> {
    this.closed = true;
    for (const copy of this.pinnedCopies.values()) await copy.close();
  }
}
