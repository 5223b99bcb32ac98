// What every route, the job queue and the docs need of a served model, wherever its weights
// live: in this process's runner (ModelHost) or in runner processes behind the API tier
// (RemoteModel).

import type { ModelConfig } from "../config/schema.js";
import type { ErrorCode, ModelportError } from "../errors.js";
import type { CostSnapshot } from "../metrics/cost.js";
import type { SubmitOptions } from "../runner/batcher.js";
import type { ModelSignature, TensorMap } from "../tensor.js";

/** One runner as the API tier sees it, for a model's status. */
export interface RemoteRunnerStatus {
  url: string;
  /** The runner's X-Modelport-Instance, once it answered. */
  instance?: string;
  healthy: boolean;
  /** This model is loaded and golden-checked on that runner. */
  ready: boolean;
  inFlight: number;
  /** Why the runner is out of rotation for this model. */
  reason?: string;
}

export type ModelState = "loading" | "ready" | "failed" | "restarting" | "closed";

export interface ModelStatus {
  name: string;
  version: string;
  backend: string;
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
  /** "runner": checked by each runner before it reports the model ready (API tier). */
  golden: "passed" | "failed" | "none" | "pending" | "runner";
  goldenDiff?: { output: string; problem: string }[];
  /** Times the runner was restarted after dying. */
  restarts: number;
  /** Times the runner was recycled: drained and restarted for its memory ceiling, or stopped and restarted when stuck past limits.hardTimeoutMs. */
  recycles: number;
  /**
   * Where the model runs; `pid` is the runner's own process (placement "process", while it runs);
   * `runners` the runner processes the API tier forwards to (placement "remote").
   */
  runner: { placement: "worker" | "process" | "remote"; pid?: number; runners?: RemoteRunnerStatus[] };
  batching: {
    enabled: boolean;
    maxBatchRows: number;
    maxDelayMs: number;
    queuedRows: number;
    inFlight: number;
  };
  /** Requests, compute time and estimated cost so far (src/metrics/cost.ts); local models only. */
  cost?: CostSnapshot;
}

export interface ServedModel {
  readonly config: ModelConfig;
  readonly ready: boolean;
  /** The model's inputs and outputs once known (after loading, or once a runner reported them). */
  readonly signature: ModelSignature | undefined;
  /** Loads (or starts watching runners for) the model. Never throws: failures become the not-ready reason. */
  start(): Promise<void>;
  /**
   * Scores inputs within options.deadline.
   * @throws ModelportError MP_ERR_MODEL_NOT_READY when not ready; the batcher's or runner's codes otherwise.
   */
  predict(inputs: TensorMap, options?: SubmitOptions): Promise<TensorMap>;
  notReadyError(): ModelportError;
  status(): ModelStatus;
  close(): Promise<void>;
}
