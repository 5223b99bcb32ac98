// The one catalogue of served models: every model of every backend, local or remote, by name,
// started one after another at boot (so each load's memory figure is its own), with the
// readiness summary behind /readyz. Routes ask it for a model with the capability they serve
// (require / find), so a missing model or a model that does not do what was asked gets the
// same clear error on every route.
import type { Config } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import { RunnerPool } from "../runner/remote/runner-pool.js";
import { createLanguageModel, createTensorModel, type ModelDeps } from "./model-factory.js";
import type { Capability, ModelKind, ServedModel } from "./served-model.js";

export interface Readiness {
  ready: boolean;
  /** One line per model that is not ready: "name: reason". */
  reasons: string[];
  models: Record<string, { ready: boolean; state: string; reason?: string; code?: string }>;
}

/** The route family that serves each capability, for "use this route instead" hints. */
const ROUTES: Record<ModelKind, (name: string) => string> = {
  tensor: (name) => `POST /v1/models/${name}/predict`,
  language: () => "POST /v1/chat/completions, /v1/completions or /v1/embeddings",
};

const KIND_OF: Record<Capability, ModelKind> = {
  predict: "tensor",
  chat: "language",
  completion: "language",
  embeddings: "language",
  stream: "language",
};

export type CatalogueDeps = Omit<ModelDeps, "pool">;

export class Catalogue {
  private readonly models = new Map<string, ServedModel>();
  /** The runners the API tier forwards to; undefined in the other roles. */
  readonly pool: RunnerPool | undefined;

  constructor(config: Config, deps: CatalogueDeps) {
    const pool =
      config.server.role === "api" ? new RunnerPool(config.server, deps.log, deps.metrics) : undefined;
    this.pool = pool;
    const modelDeps: ModelDeps = { ...deps, ...(pool ? { pool } : {}) };
    for (const c of config.models) this.models.set(c.name, createTensorModel(c, modelDeps));
    for (const c of config.languageModels ?? []) this.models.set(c.name, createLanguageModel(c, modelDeps));
  }

  /**
   * Loads and checks every model in order (API tier: polls the runners once first); resolves
   * when all have settled, ready or not.
   */
  async startAll(): Promise<void> {
    if (this.pool) await this.pool.start();
    for (const m of this.models.values()) await m.start();
  }

  all(): ServedModel[] {
    return [...this.models.values()];
  }

  has(name: string): boolean {
    return this.models.has(name);
  }

  /** The model named `name`, of any kind and state. @throws ModelportError MP_ERR_MODEL_NOT_FOUND (404). */
  get(name: string): ServedModel {
    return this.models.get(name) ?? this.notFound(name, "tensor");
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
   * The model named `name` whose family serves `capability` (tensor models predict; language
   * models chat, complete, stream and embed), in any state.
   * @throws ModelportError MP_ERR_MODEL_NOT_FOUND (404), MP_ERR_MODEL_VERSION_NOT_FOUND (404),
   * MP_ERR_LLM_CAPABILITY_UNSUPPORTED (400) for a model of the other family.
   */
  find(name: string, capability: Capability, version?: string): ServedModel {
    const kind = KIND_OF[capability];
    const model = this.models.get(name) ?? this.notFound(name, kind);
    if (model.kind !== kind) {
      throw new ModelportError(
        "MP_ERR_LLM_CAPABILITY_UNSUPPORTED",
        `model '${name}' is a ${model.kind} model; use ${ROUTES[model.kind](name)}`,
        { model: name, param: "model" },
      );
    }
    if (version !== undefined && version !== model.version) {
      throw new ModelportError(
        "MP_ERR_MODEL_VERSION_NOT_FOUND",
        `model '${name}' is served at version '${model.version}', not '${version}'`,
        { model: name, version },
      );
    }
    return model;
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
        `model '${name}' does not do ${what(capability, model)}${hint(model)}`,
        { model: name, param: "model" },
      );
    }
    return model;
  }

  readiness(): Readiness {
    const models: Readiness["models"] = {};
    const reasons: string[] = [];
    for (const m of this.models.values()) {
      const s = m.status();
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

  /** Idempotent. */
  async closeAll(): Promise<void> {
    this.pool?.close();
    await Promise.all([...this.models.values()].map((m) => m.close()));
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
    ...(c.chat ? ["/v1/chat/completions"] : []),
    ...(c.completion ? ["/v1/completions"] : []),
    ...(c.embeddings ? ["/v1/embeddings"] : []),
  ];
  return routes.length ? `; use POST ${routes.join(" or ")}` : "";
}
