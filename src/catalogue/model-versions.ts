// One model name and its loaded versions: what routes, jobs and probes get from the catalogue.
// An unversioned call goes to the version that is current *when the call is made*, so a swap is
// one assignment and no call can reach a version after it closed; a call pinned to a version
// (/versions/{v}, `model@v`) goes to that one. Every call is counted per version, so a version
// that is replaced or unloaded closes only once its calls, in flight and queued, have finished.
//
// A new version serves only after it passed its own checks (sha256, golden example): one that
// fails is closed and recorded as refused, and the current version keeps serving. Changes to
// one model (load, swap, unload) run one at a time.
import type { Logger } from "pino";
import { type ErrorCode, ModelportError } from "../errors.js";
import type { Metrics } from "../metrics/metrics.js";
import type { TensorMap } from "../tensor.js";
import { ModelView } from "./model-view.js";
import { compareVersions } from "./repository.js";
import type {
  CallOptions,
  ModelKind,
  RefusedVersion,
  ServedModel,
  ServedModelConfig,
  ShadowSpec,
  ShadowStatus,
  VersionStatus,
} from "./served-model.js";
import { Shadow } from "./shadow.js";
import { VersionSlot } from "./version-slot.js";

export type AddResult = { loaded: true } | { loaded: false; code: ErrorCode; reason: string };

export class ModelVersions {
  /** The model as unversioned calls see it: always the current version. */
  readonly view: ServedModel;
  private readonly slots = new Map<string, VersionSlot>();
  private readonly pinnedViews = new WeakMap<VersionSlot, ServedModel>();
  private currentVersion: string | undefined;
  private previousVersion: string | undefined;
  /** Why nothing is loaded, when it was unloaded on purpose. */
  private unloadedReason: string | undefined;
  private readonly refusedVersions = new Map<string, RefusedVersion>();
  private readonly retiring = new Set<Promise<void>>();
  /** Versions being loaded and checked now. */
  private readonly loadingVersions = new Set<string>();
  /** Created, and nothing asked of it yet: at start-up its first load is still to come. */
  private starting = true;
  private chain: Promise<unknown> = Promise.resolve();
  private lastConfig: ServedModelConfig;
  private closed = false;
  /** performance.now() of the last call (least recently used eviction, idle unloading). */
  lastUsed = performance.now();
  /** Loads the model on its next call, while it is unloaded (lazy, idle-unloaded, evicted). */
  private onDemandLoader: (() => Promise<unknown>) | undefined;
  private coldLoad: Promise<void> | undefined;
  /** Canary: unversioned calls split between versions by weight; absent: all to the current one. */
  private weights: { version: string; weight: number }[] | undefined;
  private shadow: Shadow | undefined;

  constructor(
    readonly name: string,
    readonly kind: ModelKind,
    firstConfig: ServedModelConfig,
    private readonly create: (config: ServedModelConfig) => ServedModel,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {
    this.lastConfig = firstConfig;
    this.view = new ModelView(this, undefined);
  }

  /** The current version's slot, if any. */
  currentSlot(): VersionSlot | undefined {
    return this.currentVersion === undefined ? undefined : this.slots.get(this.currentVersion);
  }

  get current(): string | undefined {
    return this.currentVersion;
  }

  get previous(): string | undefined {
    return this.previousVersion;
  }

  /** The configuration of the current version, or of the last one loaded. */
  get config(): ServedModelConfig {
    return this.currentSlot()?.model.config ?? this.lastConfig;
  }

  /** Why it is unloaded, when it was on purpose (not counted against readiness); else undefined. */
  get unloaded(): string | undefined {
    return this.unloadedReason;
  }

  loadedVersions(): string[] {
    return [...this.slots.keys()];
  }

  /** Versions being loaded now (before the first load starts: the one it will load). */
  loading(): string[] {
    if (this.starting && this.slots.size === 0 && this.loadingVersions.size === 0)
      return [this.lastConfig.version];
    return [...this.loadingVersions];
  }

  refused(): RefusedVersion[] {
    return [...this.refusedVersions.values()];
  }

  refusal(version: string): RefusedVersion | undefined {
    return this.refusedVersions.get(version);
  }

  /** The version `version` as a model of its own (calls pinned to it). @throws MP_ERR_MODEL_VERSION_NOT_FOUND */
  pinned(version: string): ServedModel {
    const slot = this.slots.get(version);
    if (!slot) throw this.versionNotFound(version);
    let view = this.pinnedViews.get(slot);
    if (!view) {
      view = new ModelView(this, slot);
      this.pinnedViews.set(slot, view);
    }
    return view;
  }

  versionNotFound(version: string): ModelportError {
    const loaded = this.loadedVersions();
    return new ModelportError(
      "MP_ERR_MODEL_VERSION_NOT_FOUND",
      `model '${this.name}' has no version '${version}' loaded; loaded: ${loaded.join(", ") || "none"}`,
      { model: this.name, version },
    );
  }

  notReadyError(): ModelportError {
    if (this.closed) {
      return new ModelportError("MP_ERR_SERVER_SHUTTING_DOWN", `model '${this.name}' is closed`, {
        model: this.name,
      });
    }
    const slot = this.currentSlot();
    if (slot) return slot.model.notReadyError();
    const loading = this.loading();
    if (loading.length) {
      return new ModelportError(
        "MP_ERR_MODEL_NOT_READY",
        `model '${this.name}' is not ready: loading version ${loading.join(", ")}`,
        { model: this.name, state: "loading", retryAfterSeconds: 1 },
      );
    }
    return new ModelportError(
      "MP_ERR_MODEL_NOT_READY",
      `model '${this.name}' is not loaded: ${this.unloadedReason ?? "no version of it could be loaded"}`,
      { model: this.name, state: "unloaded", retryAfterSeconds: 1 },
    );
  }

  versionStatuses(): VersionStatus[] {
    return [...this.slots.entries()].map(([version, slot]) => {
      const s = slot.model.status();
      return {
        version,
        state: s.state,
        ready: s.ready,
        role: version === this.currentVersion ? "current" : "loaded",
        ...(s.reason ? { reason: s.reason } : {}),
        ...(s.code ? { code: s.code } : {}),
        golden: s.golden,
        inFlight: slot.calls,
        ...(s.loadMs !== undefined ? { loadMs: s.loadMs } : {}),
        ...(s.sha256 ? { sha256: s.sha256 } : {}),
        ...(slot.model.signature ? { signature: slot.model.signature } : {}),
      };
    });
  }

  /**
   * Loads `config` as a version beside the loaded ones, runs its checks, and only then adds it
   * (replacing a loaded copy of the same version, which drains and closes). It becomes current
   * when `promote` is set or nothing else serves. A version that fails its checks is closed and
   * refused, unless nothing else is loaded: then it stays, not ready, so status says why.
   */
  add(config: ServedModelConfig, options: { promote: boolean; fingerprint?: string }): Promise<AddResult> {
    return this.serial(async () => {
      const version = config.version;
      const model = this.create(config);
      this.loadingVersions.add(version);
      this.starting = false;
      try {
        await model.start();
      } finally {
        this.loadingVersions.delete(version);
      }
      if (this.closed) {
        await model.close();
        return { loaded: false, code: "MP_ERR_SERVER_SHUTTING_DOWN", reason: "closed" };
      }
      const s = model.status();
      const code = s.code ?? "MP_ERR_MODEL_LOAD_FAILED";
      const reason = s.reason ?? s.state;
      const current = this.currentSlot();
      const serving = current !== undefined && current.model.status().state !== "failed";
      if (!model.ready && serving) {
        this.refusedVersions.set(version, {
          version,
          code,
          reason,
          at: new Date().toISOString(),
          ...(options.fingerprint ? { fingerprint: options.fingerprint } : {}),
        });
        this.log.error(
          { model: this.name, version, code },
          `${this.name}: version ${version} refused (${reason}); version ${this.currentVersion} keeps serving`,
        );
        await model.close();
        return { loaded: false, code, reason };
      }
      this.lastConfig = config;
      this.unloadedReason = undefined;
      if (model.ready) this.refusedVersions.delete(version);
      const replaced = this.slots.get(version);
      this.slots.set(version, new VersionSlot(model, options.fingerprint, this.recorder(version)));
      if (options.promote || !serving || this.currentVersion === version) this.switchTo(version);
      if (replaced) this.retire(replaced, version, "replaced by a fresh copy");
      return model.ready ? { loaded: true } : { loaded: false, code, reason };
    });
  }

  /** True while nothing is loaded and the next call loads it (lazy, idle-unloaded, evicted). */
  get onDemand(): boolean {
    return this.onDemandLoader !== undefined && this.slots.size === 0 && this.loadingVersions.size === 0;
  }

  /** Marks the model as loaded by its next call, with `why` as its unloaded reason meanwhile. */
  loadOnNextCall(loader: () => Promise<unknown>, why: string): void {
    this.starting = false;
    this.onDemandLoader = loader;
    if (this.slots.size === 0) this.unloadedReason = why;
  }

  /** Only the management API loads it again (an explicit unload). */
  stopLoadingOnDemand(): void {
    this.onDemandLoader = undefined;
  }

  /** Loads the model for a waiting call; concurrent calls share one load. */
  loadNow(): Promise<void> {
    const loader = this.onDemandLoader;
    if (!loader) return Promise.resolve();
    this.coldLoad ??= loader()
      .then(() => undefined)
      .finally(() => {
        this.coldLoad = undefined;
      });
    return this.coldLoad;
  }

  /** A version is being loaded and checked now. */
  loadingNow(): boolean {
    return this.loadingVersions.size > 0 || this.coldLoad !== undefined;
  }

  /** Calls on every loaded version now. */
  inFlight(): number {
    let n = 0;
    for (const slot of this.slots.values()) n += slot.calls;
    return n;
  }

  /** Memory the loaded versions hold: measured where known, else their files' size. */
  loadedBytes(): number {
    let bytes = 0;
    for (const slot of this.slots.values()) {
      const s = slot.model.status();
      bytes += s.memoryBytes ?? s.bytes ?? 0;
    }
    return bytes;
  }

  /** The slot an unversioned call goes to: by weight when weights are set, else the current one. */
  route(): VersionSlot | undefined {
    const w = this.weights;
    if (w) {
      const total = w.reduce((sum, e) => sum + e.weight, 0);
      let pick = Math.random() * total;
      for (const e of w) {
        pick -= e.weight;
        if (pick < 0) {
          const slot = this.slots.get(e.version);
          if (slot?.model.ready) return slot;
          break;
        }
      }
    }
    return this.currentSlot();
  }

  /** The shadow for an unversioned call to `slot`, when one is set and wants this call. */
  shadowFor(slot: VersionSlot): Shadow | undefined {
    const shadow = this.shadow;
    if (!shadow || slot.model.version === shadow.spec.version) return undefined;
    return shadow.wants() ? shadow : undefined;
  }

  /**
   * Splits unversioned calls between loaded, ready versions by weight (a canary); null: all to
   * the current version. Cleared by a promote and when a weighted version unloads.
   * @throws ModelportError MP_ERR_REQUEST_INVALID, MP_ERR_MODEL_VERSION_NOT_FOUND, MP_ERR_MODEL_NOT_READY
   */
  setWeights(weights: Record<string, number> | null): Promise<void> {
    return this.serial(async () => {
      if (weights === null) {
        this.weights = undefined;
        return;
      }
      const entries = Object.entries(weights).map(([version, weight]) => ({ version, weight }));
      for (const e of entries) {
        if (typeof e.weight !== "number" || !Number.isFinite(e.weight) || e.weight < 0)
          throw new ModelportError(
            "MP_ERR_REQUEST_INVALID",
            `weight of version ${e.version} must be a number ≥ 0`,
            {
              param: "weights",
            },
          );
        this.requireReady(e.version);
      }
      // A sum that overflows would send every call to the current version (route() picks by it).
      if (!Number.isFinite(entries.reduce((sum, e) => sum + e.weight, 0)))
        throw new ModelportError("MP_ERR_REQUEST_INVALID", "the weights' sum must be a finite number", {
          param: "weights",
        });
      if (!entries.some((e) => e.weight > 0))
        throw new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          "weights need at least one version with a weight above 0",
          {
            param: "weights",
          },
        );
      this.weights = entries.filter((e) => e.weight > 0);
      this.log.info({ model: this.name, weights }, `${this.name}: traffic split ${JSON.stringify(weights)}`);
    });
  }

  /**
   * Copies a sample of unversioned predict calls to `spec.version` and compares its answers
   * (shadow.ts); null stops it. Tensor models only.
   * @throws ModelportError MP_ERR_REQUEST_INVALID, MP_ERR_MODEL_VERSION_NOT_FOUND, MP_ERR_MODEL_NOT_READY
   */
  setShadow(spec: ShadowSpec | null): Promise<void> {
    return this.serial(async () => {
      this.shadow?.forget();
      this.shadow = undefined;
      if (spec === null) return;
      if (this.kind !== "tensor")
        throw new ModelportError("MP_ERR_REQUEST_INVALID", "shadow traffic is for tensor models (predict)", {
          param: "version",
        });
      this.requireReady(spec.version);
      const version = spec.version;
      const target = () => {
        const slot = this.slots.get(version);
        return slot?.model.predict
          ? (i: TensorMap, o: CallOptions) => slot.call(() => slot.model.predict!(i, o))
          : undefined;
      };
      this.shadow = new Shadow(spec, this.name, target, this.log, this.metrics);
      this.log.info({ model: this.name, ...spec }, `${this.name}: version ${version} shadows live traffic`);
    });
  }

  /** Weights and shadow as status shows them. */
  traffic(): { weights?: Record<string, number>; shadow?: ShadowStatus } | undefined {
    if (!this.weights && !this.shadow) return undefined;
    return {
      ...(this.weights
        ? { weights: Object.fromEntries(this.weights.map((e) => [e.version, e.weight])) }
        : {}),
      ...(this.shadow ? { shadow: this.shadow.status() } : {}),
    };
  }

  private requireReady(version: string): void {
    const slot = this.slots.get(version);
    if (!slot) throw this.versionNotFound(version);
    if (!slot.model.ready) throw slot.model.notReadyError();
  }

  /** Drops weights and shadow that name `version` (it is unloading, or became current). */
  private dropTraffic(version: string, why: string): void {
    if (this.weights?.some((e) => e.version === version)) {
      this.weights = undefined;
      this.log.warn(
        { model: this.name, version },
        `${this.name}: traffic split cleared (version ${version} ${why})`,
      );
    }
    if (this.shadow?.spec.version === version) {
      this.shadow.forget();
      this.shadow = undefined;
      this.log.info(
        { model: this.name, version },
        `${this.name}: shadowing stopped (version ${version} ${why})`,
      );
    }
  }

  private recorder(version: string): ((ok: boolean, seconds: number) => void) | undefined {
    const m = this.metrics;
    if (!m) return undefined;
    const labels = { model: this.name, version };
    const ok = m.versionCalls.labels({ ...labels, outcome: "ok" });
    const error = m.versionCalls.labels({ ...labels, outcome: "error" });
    const duration = m.versionCallDuration.labels(labels);
    return (success, seconds) => {
      (success ? ok : error).inc();
      duration.observe(seconds);
    };
  }

  /** Records a version that cannot even be built (its folder or settings are wrong). */
  refuse(refusal: RefusedVersion): void {
    this.refusedVersions.set(refusal.version, refusal);
    this.log.error(
      { model: this.name, version: refusal.version, code: refusal.code },
      `${this.name}: version ${refusal.version} refused (${refusal.reason})`,
    );
  }

  /** Forgets the refusals of versions that are gone from the repository. */
  forgetRefusals(keep: (version: string) => boolean): void {
    for (const version of this.refusedVersions.keys())
      if (!keep(version)) this.refusedVersions.delete(version);
  }

  /** The fingerprint the loaded copy of `version` was built from. */
  fingerprint(version: string): string | undefined {
    return this.slots.get(version)?.fingerprint;
  }

  /**
   * Makes a loaded, ready version the current one.
   * @throws ModelportError MP_ERR_MODEL_VERSION_NOT_FOUND, MP_ERR_MODEL_NOT_READY
   */
  promote(version: string): Promise<void> {
    return this.serial(async () => {
      const slot = this.slots.get(version);
      if (!slot) throw this.versionNotFound(version);
      if (!slot.model.ready) throw slot.model.notReadyError();
      this.switchTo(version);
      this.dropTraffic(version, "is current now");
    });
  }

  /** Ends a canary split (an operator's promote or rollback decided it). */
  endSplit(why: string): void {
    if (!this.weights) return;
    this.weights = undefined;
    this.log.info({ model: this.name }, `${this.name}: traffic split ended (${why})`);
  }

  /**
   * Unloads one version once its calls finish. When it was current, the highest other ready
   * version takes over; with none, the model is unloaded.
   */
  unloadVersion(version: string, why: string): Promise<void> {
    return this.serial(async () => {
      const slot = this.slots.get(version);
      if (!slot) return;
      this.slots.delete(version);
      if (version === this.currentVersion) {
        const next = [...this.slots.entries()]
          .filter(([, s]) => s.model.ready)
          .map(([v]) => v)
          .sort((a, b) => compareVersions(b, a))[0];
        if (next !== undefined) this.switchTo(next);
        else {
          this.currentVersion = undefined;
          this.unloadedReason = why;
        }
      }
      this.retire(slot, version, why);
    });
  }

  /** Unloads every version (each once its calls finish); the name stays known. */
  unload(why: string): Promise<void> {
    this.starting = false;
    return this.serial(async () => {
      for (const [version, slot] of this.slots) this.retire(slot, version, why);
      this.slots.clear();
      if (this.currentVersion !== undefined) this.previousVersion = this.currentVersion;
      this.currentVersion = undefined;
      this.unloadedReason = why;
    });
  }

  /** Closes every version now, and waits for those being retired. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.starting = false;
    const all = [...this.slots.values()];
    this.slots.clear();
    this.currentVersion = undefined;
    await Promise.all([...all.map((s) => s.model.close()), ...this.retiring]);
  }

  private switchTo(version: string): void {
    const old = this.currentVersion;
    if (old === version) return;
    this.currentVersion = version;
    if (old !== undefined && this.slots.has(old)) this.previousVersion = old;
    if (old !== undefined) {
      this.log.info(
        { model: this.name, version, previous: old },
        `${this.name}: version ${version} now takes traffic (was ${old})`,
      );
    }
  }

  /** Drains then closes a slot that no longer takes new unversioned calls. */
  private retire(slot: VersionSlot, version: string, why: string): void {
    slot.retired = true;
    // A fresh copy of the same version keeps its traffic settings and metric series.
    const replacedInPlace = this.slots.get(version) !== undefined && this.slots.get(version) !== slot;
    if (!replacedInPlace) {
      this.dropTraffic(version, "unloaded");
      this.metrics?.forgetVersion(this.name, version);
    }
    this.drainAndClose(slot, version, why);
  }

  private drainAndClose(slot: VersionSlot, version: string, why: string): void {
    const done: Promise<void> = (async () => {
      const started = performance.now();
      await slot.whenIdle();
      await slot.model.close();
      this.log.info(
        { model: this.name, version, drainMs: Math.round(performance.now() - started) },
        `${this.name}: version ${version} unloaded (${why})`,
      );
    })().finally(() => this.retiring.delete(done));
    this.retiring.add(done);
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => {});
    return next;
  }
}
