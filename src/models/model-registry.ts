// All served models by name, started one after another at boot (so each load's memory
// figure is its own), with the readiness summary behind /readyz.
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import { ModelHost, type ModelHostOptions, type ModelStatus } from "./model-host.js";

export interface Readiness {
  ready: boolean;
  /** One line per model that is not ready: "name: reason". */
  reasons: string[];
  models: Record<string, { ready: boolean; state: string; reason?: string; code?: string }>;
}

export class ModelRegistry {
  private readonly hosts = new Map<string, ModelHost>();

  constructor(config: Config, log: Logger, options: ModelHostOptions = {}) {
    for (const m of config.models) this.hosts.set(m.name, new ModelHost(m, log, options));
  }

  /** Loads and checks every model in order; resolves when all have settled, ready or not. */
  async startAll(): Promise<void> {
    for (const host of this.hosts.values()) await host.start();
  }

  all(): ModelHost[] {
    return [...this.hosts.values()];
  }

  /** @throws ModelportError MP_ERR_MODEL_NOT_FOUND (404) naming the served models. */
  get(name: string): ModelHost {
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
  getVersion(name: string, version: string | undefined): ModelHost {
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
    const models: Readiness["models"] = {};
    const reasons: string[] = [];
    for (const h of this.hosts.values()) {
      const s: ModelStatus = h.status();
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

  async closeAll(): Promise<void> {
    await Promise.all([...this.hosts.values()].map((h) => h.close()));
  }
}
