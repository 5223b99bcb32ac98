// The one catalogue of served models: every model of every backend, local or remote, by name,
// started one after another at boot (so each load's memory figure is its own), with the
// readiness summary behind /readyz. Routes ask it for a model with the capability they serve
// (require / find), so a missing model or a model that does not do what was asked gets the
// same clear error on every route.
import { statSync } from "node:fs";
import { join } from "node:path";
import { isLanguageBackend } from "../config/backends.js";
import type { Config, LanguageModelConfig, ModelConfig } from "../config/schema.js";
import { type ErrorCode, ModelportError } from "../errors.js";
import { RunnerPool } from "../runner/remote/runner-pool.js";
import { evictionsFor, pathBytes } from "./load-budget.js";
import { createLanguageModel, createTensorModel, type ModelDeps } from "./model-factory.js";
import { ModelVersions } from "./model-versions.js";
import {
  compareVersions,
  type RepositoryModel,
  scanModel,
  scanRepository,
  wantedVersions,
} from "./repository.js";
import { configFromReport } from "./runner-models.js";
import type {
  Capability,
  ModelKind,
  ModelStatus,
  RefusedVersion,
  ServedModel,
  ServedModelConfig,
  ShadowSpec,
} from "./served-model.js";

export interface Readiness {
  ready: boolean;
  /** One line per model that is not ready: "name: reason". */
  reasons: string[];
  models: Record<
    string,
    {
      ready: boolean;
      state: string;
      reason?: string;
      code?: string;
      refused?: ModelStatus["refused"];
      /** Not loaded now, and loads on its next call (lazy, idle-unloaded, evicted). */
      loadable?: true;
    }
  >;
}

/** The route family that serves each capability, for "use this route instead" hints. */
const ROUTES: Record<ModelKind, (name: string) => string> = {
  tensor: (name) => `POST /v1/models/${name}/predict`,
  language: () => "POST /v1/chat/completions, /v1/responses, /v1/completions or /v1/embeddings",
};

const KIND_OF: Record<Capability, ModelKind> = {
  predict: "tensor",
  chat: "language",
  completion: "language",
  embeddings: "language",
  stream: "language",
};

export type CatalogueDeps = Omit<ModelDeps, "pool">;

/** One row of the repository index (the Open Inference Protocol's repository extension, as Triton answers it). */
export interface IndexEntry {
  name: string;
  version?: string;
  state: "READY" | "LOADING" | "UNAVAILABLE";
  reason: string;
}

/** A repository model's operator choices: the version promoted by hand, and versions rolled back from. */
interface RepositoryState {
  preferred?: string;
  held: Set<string>;
  /** Unloaded through the management API: only a management load brings it back. */
  unloadedByOperator?: boolean;
}

/** How long a call may wait for an on-demand load, and who hears how long it waited. */
export interface ColdStartOptions {
  deadline?: number;
  onCold?: (waitedMs: number) => void;
}

export class Catalogue {
  private readonly models = new Map<string, ModelVersions>();
  /** Config-file models: the config each reload starts from. */
  private readonly configured = new Map<string, ServedModelConfig>();
  /** Repository models: operator choices, by name. */
  private readonly repoState = new Map<string, RepositoryState>();
  /** Repository models whose folders have problems and no loadable version, with the problems. */
  private readonly repoProblems = new Map<string, string[]>();
  /** The runners the API tier forwards to; undefined in the other roles. */
  readonly pool: RunnerPool | undefined;
  private readonly modelDeps: ModelDeps;
  private readonly log: CatalogueDeps["log"];
  private pollTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private roomChain: Promise<void> = Promise.resolve();
  private readonly addedListeners: ((model: ServedModel) => void)[] = [];
  private polling: Promise<void> | undefined;
  private closed = false;
  private repoChain: Promise<unknown> = Promise.resolve();
  /** API tier: models runners report that this tier cannot serve (logged once). */
  private readonly unadoptable = new Set<string>();

  constructor(
    private readonly config: Config,
    deps: CatalogueDeps,
  ) {
    const pool =
      config.server.role === "api" ? new RunnerPool(config.server, deps.log, deps.metrics) : undefined;
    this.pool = pool;
    this.log = deps.log;
    this.modelDeps = { ...deps, ...(pool ? { pool } : {}) };
    for (const c of [...config.models, ...(config.languageModels ?? [])]) {
      this.configured.set(c.name, c);
      this.models.set(c.name, this.entry(c));
    }
  }

  private entry(c: ServedModelConfig): ModelVersions {
    const kind: ModelKind = isLanguageBackend(c.backend) ? "language" : "tensor";
    return new ModelVersions(c.name, kind, c, (v) => this.create(v), this.log, this.modelDeps.metrics);
  }

  private create(c: ServedModelConfig): ServedModel {
    return isLanguageBackend(c.backend)
      ? createLanguageModel(c as LanguageModelConfig, this.modelDeps)
      : createTensorModel(c as ModelConfig, this.modelDeps);
  }

  /**
   * Loads and checks every model in order (API tier: polls the runners once first), then the
   * repository's; resolves when all have settled, ready or not. Poll mode then rescans the
   * repository every repository.pollMs.
   */
  async startAll(): Promise<void> {
    if (this.pool) {
      const pool = this.pool;
      await pool.start();
      this.adoptReported();
      pool.onPolled(() => this.adoptReported());
    }
    for (const [name, c] of this.configured) {
      const entry = this.models.get(name)!;
      const load = this.loaderFor(entry);
      if (c.load === "lazy") entry.loadOnNextCall(load, "lazy: loads on first use");
      else if (await this.makeRoom(entry, false)) await load();
      else entry.loadOnNextCall(load, "not loaded at start-up: the loaded-models budget was full");
    }
    this.startIdleSweep();
    const repo = this.config.repository;
    if (!repo) return;
    await this.syncRepository();
    if (repo.mode === "poll" && !this.closed) {
      this.pollTimer = setInterval(() => {
        this.polling ??= this.syncRepository().finally(() => {
          this.polling = undefined;
        });
      }, repo.pollMs);
      this.pollTimer.unref();
    }
  }

  /** Every model, as unversioned calls see it (its current version). */
  all(): ServedModel[] {
    return [...this.models.values()].map((m) => m.view);
  }

  /** The loaded versions of a model (none for an unknown one). */
  versions(name: string): string[] {
    return this.models.get(name)?.loadedVersions() ?? [];
  }

  has(name: string): boolean {
    return this.models.has(name);
  }

  /** The model named `name`, of any kind and state. @throws ModelportError MP_ERR_MODEL_NOT_FOUND (404). */
  get(name: string): ServedModel {
    return (this.models.get(name) ?? this.notFound(name, "tensor")).view;
  }

  private notFound(name: string, kind: ModelKind): never {
    const served = [...this.models.keys()].join(", ") || "none";
    const message =
      kind === "tensor"
        ? `no model named '${name}'; served models: ${served}`
        : `no language model named '${name}'; served: ${served}`;
    throw new ModelportError("MP_ERR_MODEL_NOT_FOUND", message, { model: name, param: "model" });
  }

  /**
   * The model name and version a call names: `name@version` is split when no model is named so
   * and no `version` is given apart; otherwise `name` and `version` as given.
   */
  reference(name: string, version?: string): { name: string; version?: string } {
    if (version !== undefined) return { name, version };
    const at = name.lastIndexOf("@");
    if (at <= 0 || this.models.has(name)) return { name };
    return { name: name.slice(0, at), version: name.slice(at + 1) };
  }

  /**
   * The model named `name` whose family serves `capability` (tensor models predict; language
   * models chat, complete, stream and embed), in any state; at `version` when given (also as
   * `name@version`), else its current version at the time of each call.
   * @throws ModelportError MP_ERR_MODEL_NOT_FOUND (404), MP_ERR_MODEL_VERSION_NOT_FOUND (404),
   * MP_ERR_LLM_CAPABILITY_UNSUPPORTED (400) for a model of the other family.
   */
  find(name: string, capability: Capability, version?: string): ServedModel {
    const kind = KIND_OF[capability];
    ({ name, version } = this.reference(name, version));
    const entry = this.models.get(name) ?? this.notFound(name, kind);
    if (entry.kind !== kind) {
      throw new ModelportError(
        "MP_ERR_LLM_CAPABILITY_UNSUPPORTED",
        `model '${name}' is a ${entry.kind} model; use ${ROUTES[entry.kind](name)}`,
        { model: name, param: "model" },
      );
    }
    if (version === undefined) return entry.view;
    if (!this.pool) return entry.pinned(version);
    // API tier: the runners hold the versions; a pinned copy goes only to those holding it.
    const remote = entry.currentSlot()?.model as (ServedModel & { at?(v: string): ServedModel }) | undefined;
    return remote?.at?.(version) ?? entry.pinned(version);
  }

  /**
   * As find(), and the model is ready and has `capability` now.
   * @throws ModelportError as find(), the model's not-ready error (503), or
   * MP_ERR_LLM_CAPABILITY_UNSUPPORTED (400).
   */
  require(name: string, capability: Capability, version?: string): ServedModel {
    const model = this.find(name, capability, version);
    if (!model.ready) throw model.notReadyError();
    if (!model.capabilities[capability]) {
      throw new ModelportError(
        "MP_ERR_LLM_CAPABILITY_UNSUPPORTED",
        `model '${model.name}' does not do ${what(capability, model)}${hint(model)}`,
        { model: model.name, param: "model" },
      );
    }
    return model;
  }

  /**
   * Models unloaded on purpose do not make the server unready. `visible`: the models a caller may
   * hear of; the others still count in `ready` but are named nowhere (not in models nor reasons).
   */
  readiness(visible?: (name: string) => boolean): Readiness {
    const models: Readiness["models"] = {};
    const reasons: string[] = [];
    let unready = false;
    for (const entry of this.models.values()) {
      const s = entry.view.status();
      const counts = !s.ready && !entry.unloaded && s.state !== "unloaded";
      unready ||= counts;
      if (visible !== undefined && !visible(s.name)) continue;
      models[s.name] = {
        ready: s.ready,
        state: s.state,
        ...(s.reason ? { reason: s.reason } : {}),
        ...(s.code ? { code: s.code } : {}),
        // A candidate that failed its checks: the model may be ready (the previous version serves).
        ...(s.refused ? { refused: s.refused } : {}),
        ...(s.loadable ? { loadable: true as const } : {}),
      };
      if (counts) reasons.push(`${s.name}: ${s.reason ?? s.state}`);
    }
    // API tier: with no runner answering, nothing can be served, whatever the config lists.
    const runners = this.pool?.all();
    if (runners && !runners.some((ep) => ep.healthy)) {
      const why = runners.map((ep) => `${ep.url}: ${ep.reason}`).join("; ") || "none found";
      reasons.push(`runners: none answers (${why})`);
      unready = true;
    }
    return { ready: !unready, reasons, models };
  }

  /**
   * As require(), loading the model first when it is unloaded but loads on demand (lazy,
   * idle-unloaded, evicted): the call then waits for the load within `deadline` (performance.now()
   * ms), and `onCold` hears how long it waited; `cold` makes those only then, so a ready model costs
   * its caller neither. Synchronous (no promise) when nothing must load.
   * @throws ModelportError as require(); MP_ERR_MODEL_CAPACITY (503) when the load cannot fit the
   * budget; MP_ERR_DEADLINE_EXCEEDED (504) when it outlasts the deadline.
   */
  acquire(
    name: string,
    capability: Capability,
    version?: string,
    cold: () => ColdStartOptions = () => ({}),
  ): ServedModel | Promise<ServedModel> {
    // The common case first: a model by its own name that does not load on demand.
    const named = this.models.get(name);
    if (named !== undefined && !named.onDemand) return this.require(name, capability, version);
    const at = name.lastIndexOf("@");
    const pinned = named !== undefined || at <= 0 ? version : (version ?? name.slice(at + 1));
    const entry = named ?? (at > 0 ? this.models.get(name.slice(0, at)) : undefined);
    // Only a call the load could answer starts it: not one for a version the model would not load.
    const loads =
      entry?.onDemand &&
      entry.kind === KIND_OF[capability] &&
      (pinned === undefined || pinned === entry.config.version);
    if (!loads) return this.require(name, capability, version);
    return this.coldStart(entry!, cold()).then(() => this.require(name, capability, version));
  }

  private async coldStart(entry: ModelVersions, options: ColdStartOptions): Promise<void> {
    const started = performance.now();
    const metrics = this.modelDeps.metrics;
    metrics?.coldStarts.inc({ model: entry.name });
    // Room is made and the load started one model at a time, so two cold starts cannot both
    // count the same free place; a model loading counts as loaded.
    // Wrapped, so `start` settles once the load has started, not when it ends.
    const start = this.roomChain.then(async () => {
      if (!entry.onDemand) return { loading: entry.loadNow() };
      if (!(await this.makeRoom(entry, true))) {
        throw new ModelportError(
          "MP_ERR_MODEL_CAPACITY",
          `model '${entry.name}' is not loaded, and loading it would pass the server's budget (${this.budgetText()}) while every loaded model is busy`,
          { model: entry.name, retryAfterSeconds: 1 },
        );
      }
      return { loading: entry.loadNow() };
    });
    this.roomChain = start.then(
      () => undefined,
      () => undefined,
    );
    const load = start.then(({ loading }) => loading);
    const left = options.deadline === undefined ? undefined : options.deadline - performance.now();
    try {
      await within(
        load,
        left,
        () =>
          new ModelportError(
            "MP_ERR_DEADLINE_EXCEEDED",
            `model '${entry.name}' was still loading (a cold start) at the request's deadline`,
            { model: entry.name },
          ),
      );
    } finally {
      const waited = performance.now() - started;
      metrics?.coldStartWait.observe({ model: entry.name }, waited / 1000);
      options.onCold?.(waited);
    }
  }

  /**
   * Whether `entry` may load within server.maxLoadedModels / maxLoadedBytes; with `evict`, least
   * recently used idle models are unloaded (and load again on their next call) to make room.
   */
  private async makeRoom(entry: ModelVersions, evict: boolean): Promise<boolean> {
    const budget = this.config.server;
    if (budget.maxLoadedModels === undefined && budget.maxLoadedBytes === undefined) return true;
    const loaded = [...this.models.values()].filter(
      (m) => m !== entry && (m.loadedVersions().length > 0 || m.loadingNow()),
    );
    const victims = evictionsFor(budget, loaded, pathBytes(entry.config.path));
    if (!victims || (victims.length > 0 && !evict)) return false;
    await Promise.all(
      victims.map((v) =>
        this.unloadForNow(
          v,
          "evicted",
          `evicted to make room for '${entry.name}'; loads again on its next call`,
        ),
      ),
    );
    return true;
  }

  private budgetText(): string {
    const { maxLoadedModels, maxLoadedBytes } = this.config.server;
    return [
      ...(maxLoadedModels !== undefined ? [`server.maxLoadedModels ${maxLoadedModels}`] : []),
      ...(maxLoadedBytes !== undefined ? [`server.maxLoadedBytes ${maxLoadedBytes}`] : []),
    ].join(", ");
  }

  /** Unloads a model that loads again on its next call (idle, evicted). */
  private async unloadForNow(entry: ModelVersions, reason: "idle" | "evicted", why: string): Promise<void> {
    this.log.info({ model: entry.name, reason }, `${entry.name}: ${why}`);
    this.modelDeps.metrics?.unloads.inc({ model: entry.name, reason });
    await entry.unload(why);
    entry.loadOnNextCall(this.loaderFor(entry), why);
  }

  /** How a model is loaded (at start-up, or on demand): a fresh copy of its config, or its repository folder applied. */
  private loaderFor(entry: ModelVersions): () => Promise<unknown> {
    const configured = this.configured.get(entry.name);
    if (configured) return () => entry.add(configured, { promote: true });
    return () => this.exclusive(() => this.syncModel(entry.name, undefined, true));
  }

  /** Every second: models with idleUnloadMs that had no call for that long unload. */
  private startIdleSweep(): void {
    this.idleTimer = setInterval(() => {
      const now = performance.now();
      for (const entry of this.models.values()) {
        const idleMs = entry.config.idleUnloadMs;
        if (idleMs === undefined || entry.loadedVersions().length === 0 || entry.inFlight() > 0) continue;
        if (entry.loadingNow() || now - entry.lastUsed < idleMs) continue;
        void this.unloadForNow(
          entry,
          "idle",
          `unloaded after ${idleMs} ms without a call; loads again on its next call`,
        );
      }
    }, IDLE_SWEEP_MS);
    this.idleTimer.unref();
  }

  /**
   * API tier: serves each model a runner reports that the config does not list (a runner's
   * repository), and drops such a model once no runner that answers lists it.
   */
  private adoptReported(): void {
    if (this.closed) return;
    const up = this.pool!.all().filter((ep) => ep.healthy);
    const listed = new Set<string>();
    for (const ep of up) {
      for (const [name, report] of ep.models) {
        listed.add(name);
        if (this.models.has(name) || this.unadoptable.has(name)) continue;
        const c = configFromReport(name, report, ep.url, {
          baseDir: "/",
          limits: this.config.limits,
          server: this.config.server,
        });
        if ("problem" in c) {
          this.unadoptable.add(name);
          this.log.warn(`${c.problem}; not served by this tier`);
          continue;
        }
        this.log.info(
          { model: name, runner: ep.url },
          `${name}: served through the runners (reported by ${ep.url})`,
        );
        const entry = this.addEntry(c);
        void entry.add(c, { promote: true });
      }
    }
    if (up.length === 0) return;
    for (const [name, entry] of this.models) {
      if (this.configured.has(name) || listed.has(name)) continue;
      this.models.delete(name);
      this.log.info({ model: name }, `${name}: no runner lists it any more; no longer served by this tier`);
      void entry.close();
    }
  }

  /** Calls `listener` with each model the catalogue gains after start-up (new repository folders, models runners report). */
  onAdded(listener: (model: ServedModel) => void): void {
    this.addedListeners.push(listener);
  }

  // --- Management (docs/Models-over-time.md): every change is one model's, run one at a time per model.

  /** Every model and version known: loaded, refused, or in the repository but not loaded. */
  index(): IndexEntry[] {
    const out: IndexEntry[] = [];
    for (const [name, entry] of this.models) {
      const statuses = entry.versionStatuses();
      for (const v of statuses) {
        out.push({
          name,
          version: v.version,
          state: v.ready
            ? "READY"
            : v.state === "loading" || v.state === "restarting"
              ? "LOADING"
              : "UNAVAILABLE",
          reason: v.ready ? "" : (v.reason ?? v.state),
        });
      }
      for (const r of entry.refused()) {
        if (!statuses.some((v) => v.version === r.version))
          out.push({ name, version: r.version, state: "UNAVAILABLE", reason: `refused: ${r.reason}` });
      }
      for (const version of entry.loading()) {
        if (!statuses.some((v) => v.version === version))
          out.push({ name, version, state: "LOADING", reason: "loading and checking" });
      }
      if (statuses.length === 0 && entry.unloaded)
        out.push({ name, state: "UNAVAILABLE", reason: entry.unloaded });
    }
    for (const [name, problems] of this.repoProblems) {
      if (!this.models.has(name)) out.push({ name, state: "UNAVAILABLE", reason: problems.join("; ") });
    }
    return out;
  }

  /**
   * Loads a model, or reloads it: a config model gets a fresh copy; a repository model is
   * rescanned and its version policy applied (new and changed versions load, and the operator's
   * promote or rollback choice is cleared). Resolves once the model settled.
   * @throws ModelportError MP_ERR_MODEL_NOT_FOUND; MP_ERR_MODEL_VERSION_REFUSED when the version
   * that should serve failed its checks (the one serving before keeps serving).
   */
  async load(name: string): Promise<void> {
    const configured = this.configured.get(name);
    if (configured) {
      const result = await this.models.get(name)!.add(configured, { promote: true });
      if (!result.loaded) throw refusedError(name, configured.version, result.code, result.reason);
      return;
    }
    if (!this.config.repository || !isModelDir(this.config.repository.dir, name))
      this.notFound(name, "tensor");
    await this.exclusive(async () => {
      const state = this.repositoryState(name);
      delete state.preferred;
      state.held.clear();
      state.unloadedByOperator = false;
      const failed = await this.syncModel(name, undefined, true);
      if (failed) throw refusedError(name, failed.version, failed.code, failed.reason);
    });
  }

  /** Unloads every version of a model once its calls finish; it stays listed until loaded again. */
  async unload(name: string): Promise<void> {
    const entry = this.models.get(name) ?? this.notFound(name, "tensor");
    entry.stopLoadingOnDemand();
    if (!this.configured.has(name) && this.config.repository)
      this.repositoryState(name).unloadedByOperator = true;
    await entry.unload("unloaded through the management API");
  }

  /**
   * Makes `version` the current one: loaded and checked first when it is not loaded (repository
   * models), then swapped in; the version it replaces drains and unloads unless the policy keeps it.
   * The choice holds until the next promote, rollback or load.
   */
  async promote(name: string, version: string): Promise<void> {
    const entry = this.models.get(name) ?? this.notFound(name, "tensor");
    if (this.configured.has(name) || !this.config.repository) {
      await entry.promote(version);
      entry.endSplit(`version ${version} promoted`);
      return;
    }
    await this.exclusive(async () => {
      const scanned = scanModel(this.config.repository!.dir, name, this.config);
      if (!scanned.versions.some((v) => v.version === version)) {
        throw new ModelportError(
          "MP_ERR_MODEL_VERSION_NOT_FOUND",
          `model '${name}' has no version folder '${version}' in the repository`,
          { model: name, version },
        );
      }
      const state = this.repositoryState(name);
      state.preferred = version;
      state.held.delete(version);
      const failed = await this.syncModel(name, scanned);
      if (failed?.version === version) throw refusedError(name, version, failed.code, failed.reason);
      entry.endSplit(`version ${version} promoted`);
    });
  }

  /**
   * Swaps back to the version that served before the current one, and holds the current one back
   * (the policy does not load it again) until it is promoted or the model is loaded.
   * @throws ModelportError MP_ERR_MODEL_VERSION_NOT_FOUND when there was no previous version.
   */
  async rollback(name: string): Promise<{ from: string; to: string }> {
    const entry = this.models.get(name) ?? this.notFound(name, "tensor");
    const from = entry.current;
    const to = entry.previous;
    if (from === undefined || to === undefined || to === from) {
      throw new ModelportError(
        "MP_ERR_MODEL_VERSION_NOT_FOUND",
        `model '${name}' has no earlier version to roll back to`,
        { model: name },
      );
    }
    if (this.config.repository && !this.configured.has(name)) {
      const held = this.repositoryState(name).held;
      held.add(from);
      await this.promote(name, to).catch((err) => {
        held.delete(from);
        throw err;
      });
    } else {
      await entry.promote(to);
      entry.endSplit(`rolled back to version ${to}`);
    }
    return { from, to };
  }

  /** A canary: unversioned calls split by weight between loaded versions; null clears it. */
  setWeights(name: string, weights: Record<string, number> | null): Promise<void> {
    return (this.models.get(name) ?? this.notFound(name, "tensor")).setWeights(weights);
  }

  /** A shadow version that gets a copy of a sample of live predict calls; null stops it. */
  setShadow(name: string, spec: ShadowSpec | null): Promise<void> {
    return (this.models.get(name) ?? this.notFound(name, "tensor")).setShadow(spec);
  }

  private repositoryState(name: string): RepositoryState {
    let state = this.repoState.get(name);
    if (!state) {
      state = { held: new Set() };
      this.repoState.set(name, state);
    }
    return state;
  }

  /** Repository changes (polls, load, promote, rollback) one at a time. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = this.repoChain.then(work, work);
    this.repoChain = next.catch(() => {});
    return next;
  }

  /** Applies the repository to every model in it (and unloads models whose folder is gone). */
  syncRepository(): Promise<void> {
    return this.exclusive(() => this.syncAll());
  }

  private async syncAll(): Promise<void> {
    const repo = this.config.repository;
    if (!repo || this.closed) return;
    const scan = scanRepository(repo.dir, this.config);
    for (const p of scan.problems) this.log.warn(p);
    const names = new Set(scan.models.map((m) => m.name));
    for (const m of scan.models) {
      if (this.configured.has(m.name)) {
        this.log.error(
          `${repo.dir}/${m.name}: a model of the config file has that name; the folder is skipped`,
        );
        continue;
      }
      await this.syncModel(m.name, m);
    }
    for (const [name, entry] of this.models) {
      if (!this.configured.has(name) && !names.has(name) && !entry.unloaded)
        await entry.unload("its folder left the repository");
    }
  }

  /**
   * Brings one repository model in line with its folder: the versions its policy wants (plus the
   * promoted one) are loaded, new and changed ones beside the serving one and swapped in once
   * checked; versions no longer wanted drain and unload. The serving version is never unloaded
   * for a candidate that failed.
   * @returns the refusal of the version that should have become current, if it was refused.
   */
  private async syncModel(
    name: string,
    scanned?: RepositoryModel,
    force = false,
  ): Promise<RefusedVersion | undefined> {
    const repo = this.config.repository!;
    const m = scanned ?? scanModel(repo.dir, name, this.config);
    const state = this.repositoryState(name);
    let entry = this.models.get(name);
    if (m.problems.length) {
      this.repoProblems.set(name, [...m.problems]);
      if (!entry) for (const p of m.problems) this.log.error(p);
      return undefined;
    }
    this.repoProblems.delete(name);
    const onDisk = new Map(m.versions.map((v) => [v.version, v]));
    if (state.preferred !== undefined && !onDisk.has(state.preferred)) delete state.preferred;
    const wanted = new Set(
      wantedVersions(
        m.policy,
        m.versions.map((v) => v.version).filter((v) => !state.held.has(v)),
      ),
    );
    if (state.preferred !== undefined) wanted.add(state.preferred);
    const order = [...wanted].sort(compareVersions);
    const target = state.preferred ?? order[order.length - 1];
    // A lazy model that is not loaded waits for its first call (or a management load).
    const targetConfig = target === undefined ? undefined : onDisk.get(target)?.config;
    if (!force && state.unloadedByOperator) return undefined;
    const notLoaded = !entry || (entry.loadedVersions().length === 0 && !entry.loadingNow());
    if (!entry && targetConfig) entry = this.addEntry(targetConfig);
    if (!force && entry && notLoaded) {
      // Lazy, already waiting for a call, or beyond the loaded-models budget: the first call loads it.
      const why = entry.onDemand
        ? undefined
        : targetConfig?.load === "lazy"
          ? "lazy: loads on first use"
          : (await this.makeRoom(entry, false))
            ? undefined
            : "not loaded: the loaded-models budget was full";
      if (entry.onDemand || why) {
        if (why) entry.loadOnNextCall(this.loaderFor(entry), why);
        return undefined;
      }
    }
    let failed: RefusedVersion | undefined;
    // The target last, so it is the one swapped in.
    for (const version of [...order.filter((v) => v !== target), ...(target ? [target] : [])]) {
      const v = onDisk.get(version)!;
      const promote = version === target;
      if (!v.config) {
        const refusal = {
          version,
          code: "MP_ERR_MODEL_LOAD_FAILED" as const,
          reason: v.problems.join("; "),
          at: new Date().toISOString(),
          fingerprint: v.fingerprint,
        };
        if (!entry) {
          this.repoProblems.set(name, [...v.problems]);
          for (const p of v.problems) this.log.error(p);
        } else if (entry.refusal(version)?.fingerprint !== v.fingerprint) entry.refuse(refusal);
        if (promote) failed = refusal;
        continue;
      }
      entry ??= this.addEntry(v.config);
      const kind: ModelKind = isLanguageBackend(v.config.backend) ? "language" : "tensor";
      if (kind !== entry.kind) {
        const refusal = {
          version,
          code: "MP_ERR_MODEL_LOAD_FAILED" as const,
          reason: `version ${version} is a ${kind} model, but '${name}' serves ${entry.kind} models`,
          at: new Date().toISOString(),
          fingerprint: v.fingerprint,
        };
        entry.refuse(refusal);
        if (promote) failed = refusal;
        continue;
      }
      const loaded = entry.loadedVersions().includes(version) && entry.fingerprint(version) === v.fingerprint;
      const refused = entry.refusal(version);
      if (loaded) {
        if (promote && entry.current !== version) await entry.promote(version).catch(() => {});
        continue;
      }
      if (refused?.fingerprint === v.fingerprint) {
        if (promote) failed = refused;
        continue;
      }
      const result = await entry.add(v.config, { promote, fingerprint: v.fingerprint });
      if (!result.loaded && promote)
        failed = entry.refusal(version) ?? {
          version,
          code: result.code,
          reason: result.reason,
          at: new Date().toISOString(),
        };
    }
    if (!entry) return failed;
    entry.forgetRefusals((version) => onDisk.has(version));
    for (const version of entry.loadedVersions()) {
      if (wanted.has(version) || version === entry.current) continue;
      await entry.unloadVersion(
        version,
        onDisk.has(version) ? "no longer wanted by the version policy" : "its folder left the repository",
      );
    }
    // The serving version's own folder is gone and nothing else took over.
    if (entry.current !== undefined && !onDisk.has(entry.current) && wanted.size === 0)
      await entry.unload("its folder left the repository");
    return failed;
  }

  private addEntry(c: ServedModelConfig): ModelVersions {
    const entry = this.entry(c);
    this.models.set(c.name, entry);
    for (const listener of this.addedListeners) listener(entry.view);
    return entry;
  }

  /** Idempotent. */
  async closeAll(): Promise<void> {
    this.closed = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.idleTimer) clearInterval(this.idleTimer);
    this.pool?.close();
    await this.polling?.catch(() => {});
    await Promise.all([...this.models.values()].map((m) => m.close()));
  }
}

function refusedError(name: string, version: string, code: ErrorCode, reason: string): ModelportError {
  return new ModelportError(
    "MP_ERR_MODEL_VERSION_REFUSED",
    `model '${name}' version ${version} was not loaded: ${reason}`,
    { model: name, version, cause: code },
  );
}

/** `work`, or a rejection with `late()` once `ms` have passed; `ms` undefined: no limit. */
function within<T>(work: Promise<T>, ms: number | undefined, late: () => Error): Promise<T> {
  if (ms === undefined) return work;
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), Math.max(0, ms));
  });
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
}

/** How often idle models are looked for (models.idleUnloadMs). */
const IDLE_SWEEP_MS = 1000;

function isModelDir(dir: string, name: string): boolean {
  try {
    return /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(name) && statSync(join(dir, name)).isDirectory();
  } catch {
    return false;
  }
}

/** The capability asked for, in words, with why a generative model lacks chat. */
function what(capability: Capability, model: ServedModel): string {
  if (capability === "chat" && model.capabilities.completion)
    return "chat (it has no chat template; set llm.chatTemplate)";
  return capability;
}

/** What the model does instead, as the routes to use. */
function hint(model: ServedModel): string {
  const c = model.capabilities;
  const routes = [
    ...(c.chat ? ["/v1/chat/completions", "/v1/responses"] : []),
    ...(c.completion ? ["/v1/completions"] : []),
    ...(c.embeddings ? ["/v1/embeddings"] : []),
  ];
  return routes.length ? `; use POST ${routes.join(" or ")}` : "";
}
