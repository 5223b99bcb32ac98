// What the runners' health polls say of one model, as the API tier's remote models read it
// (remote-tensor-model.ts, remote-language-model.ts): at a pinned version or each runner's
// current one, whether a runner can take a call now (ready there, or loaded by the call), whether
// it is ready somewhere or unloaded on purpose everywhere, which version answers, and why not.
import { ModelportError } from "../errors.js";
import type { RunnerEndpoint, RunnerModelReport } from "../runner/remote/runner-endpoint.js";
import type { RunnerPool } from "../runner/remote/runner-pool.js";
import type { ModelState } from "./served-model.js";

export class RunnerView {
  constructor(
    private readonly pool: RunnerPool,
    readonly name: string,
    /** Calls go to this version only; undefined: each runner's current version. */
    readonly pinned: string | undefined,
  ) {}

  /** A runner can take a call now: the (pinned) version ready there, or loaded by the call. */
  canServe(): boolean {
    return this.pool.all().some((ep) => ep.serves(this.name, this.pinned));
  }

  /** The report of a runner serving the model (at the pinned version), else of any runner listing it. */
  report(): RunnerModelReport | undefined {
    const eps = this.pool.all();
    const ep = eps.find((e) => e.serves(this.name, this.pinned)) ?? eps.find((e) => e.models.has(this.name));
    return ep?.models.get(this.name);
  }

  /** The pinned version, else the version a serving runner calls current, else `fallback`. */
  version(fallback: string): string {
    return this.pinned ?? this.report()?.version ?? fallback;
  }

  /** Why `ep` cannot take a call for the model; undefined when it can. */
  reasonOn(ep: RunnerEndpoint): string | undefined {
    if (!ep.healthy) return ep.reason;
    const report = ep.models.get(this.name);
    if (!report) return "does not serve this model";
    if (ep.serves(this.name, this.pinned)) return undefined;
    return report.reason ?? (this.pinned ? `version ${this.pinned} is not ready` : report.state);
  }

  /** Every runner's reason, in one line. */
  reason(): string {
    const lines = this.pool.all().map((ep) => `${ep.url}: ${this.reasonOn(ep) ?? "ready"}`);
    return `no runner serving it is ready (${lines.join("; ") || "no runners configured"})`;
  }

  /**
   * The model across the runners that answer: ready on one now; loadable (a call loads it on
   * one); unloaded (on purpose on every one); else loading.
   */
  standing(closed: boolean): { state: ModelState; ready: boolean; loadable: boolean } {
    const eps = this.pool.all().filter((ep) => ep.healthy);
    const ready = !closed && eps.some((ep) => this.readyOn(ep));
    const unloaded = eps.length > 0 && eps.every((ep) => ep.models.get(this.name)?.state === "unloaded");
    return {
      state: closed ? "closed" : ready ? "ready" : unloaded ? "unloaded" : "loading",
      ready,
      loadable: !closed && !ready && this.canServe(),
    };
  }

  /** The (pinned) version is loaded and ready on `ep`, not just loadable there. */
  private readyOn(ep: RunnerEndpoint): boolean {
    const r = ep.models.get(this.name);
    if (!r || !ep.serves(this.name, this.pinned)) return false;
    return this.pinned === undefined ? r.ready : r.versions.has(this.pinned);
  }

  /**
   * Why no call can be taken, as one process would say it: MP_ERR_MODEL_VERSION_NOT_FOUND when
   * runners answer and none holds the pinned version; MP_ERR_MODEL_NOT_READY when runners answer
   * and list the model but none can take a call (unloaded on purpose, loading, failed its checks);
   * else MP_ERR_RUNNER_UNAVAILABLE (no runner answers, or none that answers serves the model).
   */
  unreadyError(): ModelportError {
    return this.missingVersion() ?? this.notReady() ?? this.unavailable(this.reason());
  }

  /** MP_ERR_RUNNER_UNAVAILABLE for the model, saying `why`: retryable after a second. */
  unavailable(why: string): ModelportError {
    return new ModelportError("MP_ERR_RUNNER_UNAVAILABLE", `model '${this.name}': ${why}; retry shortly`, {
      model: this.name,
      retryAfterSeconds: 1,
    });
  }

  private notReady(): ModelportError | undefined {
    const listing = this.pool.all().filter((ep) => ep.healthy && ep.models.has(this.name));
    if (listing.length === 0 || this.canServe()) return undefined;
    const states = new Set(listing.map((ep) => ep.models.get(this.name)!.state));
    return new ModelportError(
      "MP_ERR_MODEL_NOT_READY",
      `model '${this.name}' is not ready: ${this.reason()}`,
      {
        model: this.name,
        state: states.size === 1 ? [...states][0]! : "loading",
        retryAfterSeconds: 1,
      },
    );
  }

  /** MP_ERR_MODEL_VERSION_NOT_FOUND when runners answer and none holds the pinned version. */
  private missingVersion(): ModelportError | undefined {
    const pinned = this.pinned;
    if (pinned === undefined || !this.pool.lacksVersion(this.name, pinned)) return undefined;
    return new ModelportError(
      "MP_ERR_MODEL_VERSION_NOT_FOUND",
      `model '${this.name}' has no version '${pinned}' ready on any runner`,
      { model: this.name, version: pinned },
    );
  }
}
