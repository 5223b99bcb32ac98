// A model as routes see it through its versions (ModelVersions): unpinned, every property and
// call is the current version's at that moment (calls split by weight, and mirrored to a shadow,
// when set); pinned, one version's. Methods exist as the target model's do (the ServedModel
// contract: methods follow capabilities).
import type { ModelportError } from "../errors.js";
import type {
  EmbedInput,
  EmbedOptions,
  EmbedResult,
  GenerateOptions,
  GenerateRequest,
  GenerateResult,
} from "../llm/language-model.js";
import type { TensorMap } from "../tensor.js";
import type {
  CallOptions,
  Capabilities,
  ModelKind,
  ModelStatus,
  RefusedVersion,
  ServedModel,
  ServedModelConfig,
  ShadowStatus,
  VersionStatus,
} from "./served-model.js";
import { copyInputs, type Shadow } from "./shadow.js";
import type { VersionSlot } from "./version-slot.js";

/** What a view needs of its model's versions (ModelVersions). */
export interface Versions {
  readonly name: string;
  readonly kind: ModelKind;
  readonly config: ServedModelConfig;
  lastUsed: number;
  /** Nothing is loaded, and the next call loads it. */
  readonly onDemand: boolean;
  currentSlot(): VersionSlot | undefined;
  /** The slot an unversioned call goes to. */
  route(): VersionSlot | undefined;
  shadowFor(slot: VersionSlot): Shadow | undefined;
  versionNotFound(version: string): ModelportError;
  notReadyError(): ModelportError;
  loading(): string[];
  refused(): RefusedVersion[];
  versionStatuses(): VersionStatus[];
  traffic(): { weights?: Record<string, number>; shadow?: ShadowStatus } | undefined;
  unloadVersion(version: string, why: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * The model seen through its versions: unpinned, every property and call is the current
 * version's at that moment; pinned, one version's.
 */
export class ModelView implements ServedModel {
  readonly created = Math.floor(Date.now() / 1000);

  constructor(
    private readonly entry: Versions,
    private readonly slot: VersionSlot | undefined,
  ) {}

  private target(): VersionSlot | undefined {
    return this.slot ?? this.entry.currentSlot();
  }

  /** The slot a call goes to (unpinned: by weight, else current). @throws ModelportError when there is none or it was unloaded. */
  private callSlot(): VersionSlot {
    this.entry.lastUsed = performance.now();
    if (this.slot?.retired) throw this.entry.versionNotFound(this.slot.model.version);
    const slot = this.slot ?? this.entry.route();
    if (!slot) throw this.entry.notReadyError();
    return slot;
  }

  get name(): string {
    return this.entry.name;
  }

  get version(): string {
    return this.target()?.model.version ?? this.entry.config.version;
  }

  get backend(): ServedModelConfig["backend"] {
    return this.config.backend;
  }

  get kind(): ModelKind {
    return this.entry.kind;
  }

  get config(): ServedModelConfig {
    return this.target()?.model.config ?? this.entry.config;
  }

  get capabilities(): Capabilities {
    return (
      this.target()?.model.capabilities ?? {
        predict: this.entry.kind === "tensor",
        chat: false,
        completion: false,
        embeddings: false,
        stream: false,
      }
    );
  }

  get ready(): boolean {
    const slot = this.target();
    return slot !== undefined && !slot.retired && slot.model.ready;
  }

  get signature() {
    return this.target()?.model.signature;
  }

  /** Versions start through ModelVersions.add. */
  async start(): Promise<void> {}

  notReadyError(): ModelportError {
    const slot = this.target();
    if (this.slot?.retired) return this.entry.versionNotFound(this.slot.model.version);
    return slot ? slot.model.notReadyError() : this.entry.notReadyError();
  }

  status(): ModelStatus {
    const slot = this.target();
    const c = this.config;
    const base: ModelStatus = slot
      ? slot.model.status()
      : {
          name: this.entry.name,
          version: c.version,
          backend: c.backend,
          path: c.path,
          state: this.entry.loading().length ? "loading" : "unloaded",
          ready: false,
          reason: this.entry.notReadyError().message,
          code: "MP_ERR_MODEL_NOT_READY",
          golden: "none",
          restarts: 0,
          recycles: 0,
          ...(this.entry.onDemand ? { loadable: true as const } : {}),
        };
    if (this.slot) return base;
    const refused = this.entry.refused();
    const traffic = this.entry.traffic();
    return {
      ...base,
      versions: this.entry.versionStatuses(),
      ...(refused.length ? { refused: refused.map(({ fingerprint: _, ...r }) => r) } : {}),
      ...(traffic ? { traffic } : {}),
    };
  }

  /** Unpinned: closes every version of the model; pinned: unloads that version. */
  close(): Promise<void> {
    return this.slot ? this.entry.unloadVersion(this.slot.model.version, "closed") : this.entry.close();
  }

  // A method exists when the model has it (the contract: methods follow capabilities): the
  // current version's, or by the model's kind while no version is loaded.
  get predict(): ((inputs: TensorMap, options?: CallOptions) => Promise<TensorMap>) | undefined {
    return this.has("predict", "tensor") ? this.callPredict : undefined;
  }

  get generate():
    | ((request: GenerateRequest, options?: GenerateOptions) => Promise<GenerateResult>)
    | undefined {
    return this.has("generate", "language") ? this.callGenerate : undefined;
  }

  get embed(): ((inputs: readonly EmbedInput[], options?: EmbedOptions) => Promise<EmbedResult>) | undefined {
    return this.has("embed", "language") ? this.callEmbed : undefined;
  }

  private has(method: "predict" | "generate" | "embed", kind: ModelKind): boolean {
    const model = this.target()?.model;
    return model ? model[method] !== undefined : this.entry.kind === kind;
  }

  private readonly callPredict = (inputs: TensorMap, options?: CallOptions): Promise<TensorMap> => {
    let slot: VersionSlot;
    try {
      slot = this.callSlot();
    } catch (err) {
      return Promise.reject(err);
    }
    options?.onVersion?.(slot.model.version);
    const shadow = this.slot ? undefined : this.entry.shadowFor(slot);
    // Copied before the live call, whose runner may take the buffers.
    const copy = shadow ? copyInputs(inputs) : undefined;
    const live = slot.call(() => slot.model.predict!(inputs, options));
    if (shadow && copy) shadow.mirror(live, copy, slot.model.config.limits.timeoutMs);
    return live;
  };

  private readonly callGenerate = (
    request: GenerateRequest,
    options?: GenerateOptions,
  ): Promise<GenerateResult> => this.call((m) => m.generate!(request, options));

  private readonly callEmbed = (
    inputs: readonly EmbedInput[],
    options?: EmbedOptions,
  ): Promise<EmbedResult> => this.call((m) => m.embed!(inputs, options));

  private call<T>(run: (model: ServedModel) => Promise<T>): Promise<T> {
    try {
      const slot = this.callSlot();
      return slot.call(() => run(slot.model));
    } catch (err) {
      return Promise.reject(err);
    }
  }
}
