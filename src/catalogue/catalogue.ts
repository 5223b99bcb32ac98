// All served models by name, started one after another at boot (so each load's memory
// figure is its own), with the readiness summary behind /readyz. On the API tier (role api)
// every model is a RemoteModel forwarding to the runner pool instead.
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import { RemoteModel } from "../runner/remote/remote-model.js";
import { RunnerPool } from "../runner/remote/runner-pool.js";
import { ModelHost, type ModelHostOptions } from "./model-host.js";
import type { ServedModel } from "./served-model.js";

export interface Readiness {
  ready: boolean;
  /** One line per model that is not ready: "name: reason". */
  reasons: string[];
  models: Record<string, { ready: boolean; state: string; reason?: string; code?: string }>;
}

/** The /readyz summary of a set of model statuses (tensor or language models). */
export function readinessOf(
  statuses: readonly { name: string; ready: boolean; state: string; reason?: string; code?: string }[],
): Readiness {
  const models: Readiness["models"] = {};
  const reasons: string[] = [];
  for (const s of statuses) {
    models[s.name] = {
      ready: s.ready,
      state: s.state,
      ...(s.reason ? { reason: s.reason } : {}),
      ...(s.code ? { code: s.code } : {}),
    };
    if (!s.ready) reasons.push(`${s.name}: ${s.reason ?? s.state}`);
  }
  return { ready: reasons.length === 0, reasons, models };
}

export class ModelRegistry {
  private readonly hosts = new Map<string, ServedModel>();
  /** The runners the API tier forwards to; undefined in the other roles. */
  readonly pool: RunnerPool | undefined;

  constructor(config: Config, log: Logger, options: ModelHostOptions = {}) {
    if (config.server.role === "api") {
      const pool = new RunnerPool(config.server, log, options.metrics);
      this.pool = pool;
      for (const m of config.models) this.hosts.set(m.name, new RemoteModel(m, pool));
      return;
    }
    for (const m of config.models) this.hosts.set(m.name, new ModelHost(m, log, options));
  }

  /**
   * Loads and checks every model in order (API tier: polls the runners once); resolves when all
   * have settled, ready or not.
   */
  async startAll(): Promise<void> {
    if (this.pool) return this.pool.start();
    for (const host of this.hosts.values()) await host.start();
  }

  all(): ServedModel[] {
    return [...this.hosts.values()];
  }

  /** @throws ModelportError MP_ERR_MODEL_NOT_FOUND (404) naming the served models. */
  get(name: string): ServedModel {
    const host = this.hosts.get(name);
    if (!host) {
      throw new ModelportError(
        "MP_ERR_MODEL_NOT_FOUND",
        `no model named '${name}'; served models: ${[...this.hosts.keys()].join(", ")}`,
        { model: name },
      );
    }
    return host;
  }

  /** @throws MP_ERR_MODEL_VERSION_NOT_FOUND when `version` is given and differs from the served one. */
  getVersion(name: string, version: string | undefined): ServedModel {
    const host = this.get(name);
    if (version !== undefined && version !== host.config.version) {
      throw new ModelportError(
        "MP_ERR_MODEL_VERSION_NOT_FOUND",
        `model '${name}' is served at version '${host.config.version}', not '${version}'`,
        { model: name, version },
      );
    }
    return host;
  }

  readiness(): Readiness {
    return readinessOf([...this.hosts.values()].map((h) => h.status()));
  }

  async closeAll(): Promise<void> {
    this.pool?.close();
    await Promise.all([...this.hosts.values()].map((h) => h.close()));
  }
}
