// The Runner interface: the only owner of a model's weights. The server talks to every
// placement (a worker thread today; a child process or another machine later) through it.
import type { BackendName } from "../backends/backend.js";
import type { ModelSignature, TensorMap } from "../tensor.js";

export interface RunnerSpec {
  name: string;
  backend: BackendName;
  path: string;
  threads: number;
  options: Record<string, unknown>;
}

export interface RunnerLoadInfo {
  signature: ModelSignature;
  /** Wall time of the backend's load, in milliseconds. */
  loadMs: number;
  /** Resident memory the load added, in bytes (process-wide RSS difference; loads run one at a time). */
  memoryBytes: number;
}

export interface Runner {
  readonly spec: RunnerSpec;
  /** Loads the model; rejects with a ModelportError (MP_ERR_MODEL_LOAD_FAILED) when it cannot. */
  start(): Promise<RunnerLoadInfo>;
  /** Scores one batch; rejects with a ModelportError. */
  predict(inputs: TensorMap): Promise<TensorMap>;
  /** Called when the runner dies unexpectedly; in-flight calls have already been rejected. */
  onCrash(listener: (reason: string) => void): void;
  /** Closes the model and stops the runner; idempotent. */
  close(): Promise<void>;
}
