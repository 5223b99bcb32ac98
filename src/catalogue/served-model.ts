// What every route, the job queue, the docs and the probes need of a served model, whatever its
// kind (tensor or language), backend and place (this process, runner processes behind the API
// tier, an upstream API). A model declares what it can do as capabilities; routes ask the
// catalogue for a model with the capability they serve (catalogue.ts), so "this model does not
// do that" is one error everywhere.

import type { CancelHandle } from "../cancel.js";
import type { LanguageModelConfig, ModelConfig } from "../config/schema.js";
import type { ErrorCode, ModelportError } from "../errors.js";
import type {
  EmbedInput,
  EmbedOptions,
  EmbedResult,
  GenerateOptions,
  GenerateRequest,
  GenerateResult,
} from "../llm/language-model.js";
import type { CostSnapshot } from "../metrics/cost.js";
import type { TraceParent } from "../telemetry/propagation.js";
import type { ModelSignature, TensorMap } from "../tensor.js";

export type ServedModelConfig = ModelConfig | LanguageModelConfig;

/** What a model does; each is a route family. */
export interface Capabilities {
  /** Named tensors in, named tensors out (POST /v1/models/{m}/predict, OIP infer, jobs). */
  readonly predict: boolean;
  /** Answers a list of messages (POST /v1/chat/completions). */
  readonly chat: boolean;
  /** Continues a raw prompt (POST /v1/completions). */
  readonly completion: boolean;
  /** Turns texts into vectors (POST /v1/embeddings). */
  readonly embeddings: boolean;
  /** Streams its text as it is generated (chat and completion with stream: true). */
  readonly stream: boolean;
}

export type Capability = keyof Capabilities;

/**
 * "tensor" models take tensors (capability predict); "language" models take text (chat,
 * completion, embeddings). A route of one family never serves a model of the other, whatever
 * its state; the capabilities within a family may be known only once loaded (a chat template).
 */
export type ModelKind = "tensor" | "language";

/** One runner as the API tier sees it, for a model's status. */
export interface RemoteRunnerStatus {
  url: string;
  /** The runner's X-Modelport-Instance, once it answered. */
  instance?: string;
  healthy: boolean;
  /** This model is loaded and golden-checked on that runner (or loads on its next call there). */
  ready: boolean;
  /** The version that takes unversioned calls there. */
  version?: string;
  inFlight: number;
  /** Why the runner is out of rotation for this model. */
  reason?: string;
}

/** "unloaded": no version is loaded (the management API unloaded it, or it awaits a lazy load). */
export type ModelState = "loading" | "ready" | "failed" | "restarting" | "closed" | "unloaded";

/** The one status shape of every model (read per /readyz, /metrics and the describe routes). */
export interface ModelStatus {
  name: string;
  version: string;
  backend: ServedModelConfig["backend"];
  /** The model file or folder; an upstream model's base URL. */
  path: string;
  state: ModelState;
  ready: boolean;
  /** Why the model is not ready, in words; absent when ready. */
  reason?: string;
  code?: ErrorCode;
  sha256?: string;
  bytes?: number;
  loadMs?: number;
  memoryBytes?: number;
  /** Intra-op threads, when they are not the model's configured ones (API tier: a runner's). */
  threads?: number;
  /** "runner": checked by each runner before it reports the model ready (API tier). */
  golden: "passed" | "failed" | "none" | "pending" | "runner";
  goldenDiff?: { output: string; problem: string }[];
  /** Times the runner was restarted after dying. */
  restarts: number;
  /** Times the runner was recycled: drained and restarted for its memory ceiling, or stopped and restarted when stuck past limits.hardTimeoutMs. */
  recycles: number;
  /**
   * Where a tensor model runs; `pid` is the runner's own process (placement "process", while it
   * runs); `runners` the runner processes the API tier forwards to (placement "remote").
   */
  runner?: { placement: "worker" | "process" | "remote"; pid?: number; runners?: RemoteRunnerStatus[] };
  /** Tensor and embeddings models: the batcher's settings and depth. */
  batching?: {
    enabled: boolean;
    maxBatchRows: number;
    maxDelayMs: number;
    queuedRows: number;
    inFlight: number;
    /**
     * The in-thread copy for short requests to an idle model: "active", "off" (not asked for),
     * "dropped" (a call ran far over its limit), or why none was loaded; and the calls it answered.
     */
    inline?: { state: string; maxMs: number; calls: number };
    /** Milliseconds since the model loaded during which its runner held at least one batch. */
    runnerBusyMs?: number;
  };
  /** Language models: requests generating now, waiting, and the most that may run at once. */
  concurrency?: { active: number; waiting: number; limit: number };
  /** Language models: context window in tokens, when known. */
  contextSize?: number;
  /** llama-cpp: prompt tokens evaluated per batch. */
  batchSize?: number;
  /** Requests, compute time, tokens and estimated cost so far (src/metrics/cost.ts), when counted. */
  cost?: CostSnapshot;
  /** Every loaded version (the model's own status only, not a pinned version's). */
  versions?: VersionStatus[];
  /** Not loaded now, and loads on its next call (lazy, idle-unloaded, evicted). */
  loadable?: true;
  /** Versions that failed their checks and never served. */
  refused?: Omit<RefusedVersion, "fingerprint">[];
  /** A canary split (weights by version) and a shadow version with its comparison so far. */
  traffic?: { weights?: Record<string, number>; shadow?: ShadowStatus };
}

/** How one call is bounded: its deadline (performance.now() ms) and the client's cancellation. */
export interface CallOptions {
  deadline?: number;
  cancel?: CancelHandle;
  /** Background work (jobs) waits behind every synchronous request in the queue. */
  background?: boolean;
  /** The request's id, passed on when the work is forwarded to a runner process (API tier). */
  requestId?: string;
  /** The caller's place in a trace (telemetry/): spans of this call are its children, and forwarded calls carry it. */
  trace?: TraceParent | undefined;
  /** Hears which version answers (a canary split or a swap may pick another than the current one). */
  onVersion?: (version: string) => void;
  /** Hears the call's share of the machine time of the batches it was in (ms; local models). */
  onCompute?: (ms: number) => void;
}

export interface ServedModel {
  readonly name: string;
  readonly version: string;
  readonly backend: ServedModelConfig["backend"];
  readonly kind: ModelKind;
  readonly config: ServedModelConfig;
  /** Unix seconds when the model was set up (OpenAI's `created`). */
  readonly created: number;
  /** What it does now; a language model's chat is known once it has loaded. */
  readonly capabilities: Capabilities;
  readonly ready: boolean;
  /** A tensor model's inputs and outputs once known (after loading, or once a runner reported them). */
  readonly signature: ModelSignature | undefined;
  /** Loads (or starts watching runners for) the model. Never rejects: failures become the not-ready reason. */
  start(): Promise<void>;
  /** The error a call gets while the model is not ready (MP_ERR_MODEL_NOT_READY, or why not). */
  notReadyError(): ModelportError;
  status(): ModelStatus;
  /** Idempotent; afterwards calls reject with MP_ERR_SERVER_SHUTTING_DOWN or MP_ERR_MODEL_NOT_READY. */
  close(): Promise<void>;
  /** Capability predict. @throws ModelportError */
  predict?(inputs: TensorMap, options?: CallOptions): Promise<TensorMap>;
  /** Capabilities chat and completion (the contract in src/llm/language-model.ts). @throws ModelportError */
  generate?(request: GenerateRequest, options?: GenerateOptions): Promise<GenerateResult>;
  /** Capability embeddings. @throws ModelportError */
  embed?(inputs: readonly EmbedInput[], options?: EmbedOptions): Promise<EmbedResult>;
}

export const TENSOR_CAPABILITIES: Capabilities = Object.freeze({
  predict: true,
  chat: false,
  completion: false,
  embeddings: false,
  stream: false,
});

export const EMBEDDINGS_CAPABILITIES: Capabilities = Object.freeze({
  predict: false,
  chat: false,
  completion: false,
  embeddings: true,
  stream: false,
});

/** The capabilities of a generative model: completion always, chat when it has a template. */
export function generativeCapabilities(chat: boolean, embeddings = false): Capabilities {
  return { predict: false, chat, completion: true, embeddings, stream: true };
}

/** A version as model status and the repository index show it. */
export interface VersionStatus {
  version: string;
  state: ModelStatus["state"];
  ready: boolean;
  /** current: takes unversioned traffic; loaded: answers only calls pinned to it. */
  role: "current" | "loaded";
  reason?: string;
  code?: ErrorCode;
  golden: ModelStatus["golden"];
  /** Calls on it now (in flight or queued). */
  inFlight: number;
  loadMs?: number;
  sha256?: string;
  /** Its inputs and outputs (tensor models), which may differ from another version's. */
  signature?: ModelSignature;
}

/** A version that failed its checks and never served, with why. */
export interface RefusedVersion {
  version: string;
  code: ErrorCode;
  reason: string;
  /** ISO time of the refusal. */
  at: string;
  /** Of the refused files, so an unchanged refused version is not tried again and again. */
  fingerprint?: string;
}

/** A shadow version's settings (catalogue/shadow.ts). */
export interface ShadowSpec {
  version: string;
  /** Share of live calls copied, 0 < sample ≤ 1. */
  sample: number;
  /** Largest absolute difference of a numeric output element still counted as agreement. */
  tolerance: number;
}

export interface ShadowStatus extends ShadowSpec {
  compared: number;
  disagreed: number;
  failed: number;
  skipped: number;
  /** Largest absolute difference seen (numeric outputs). */
  maxAbsDiff: number;
  /** disagreed / compared. */
  disagreementRate: number;
}
