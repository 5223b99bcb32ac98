// The Runner interface: the only owner of a model's weights. The server talks to every
// placement (a worker thread or a supervised child process today; another machine later)
// through it.
import type { BackendName } from "../backends/backend.js";
import type { ModelSignature, TensorMap } from "../tensor.js";

export interface RunnerSpec {
  name: string;
  backend: BackendName;
  path: string;
  threads: number;
  /** cpu, or cuda for onnxruntime's CUDA execution provider. */
  device: "cpu" | "cuda";
  options: Record<string, unknown>;
  /** Child-process runners: ask for a recycle when the process's RSS exceeds this many MiB. */
  maxRssMb?: number;
}

export interface RunnerLoadInfo {
  signature: ModelSignature;
  /** Wall time of the backend's load, in milliseconds. */
  loadMs: number;
  /**
   * Resident memory of the model, in bytes: for a worker thread the process-wide RSS the load
   * added (loads run one at a time); for a child process its whole RSS after the load.
   */
  memoryBytes: number;
  /** When an in-thread copy was asked for: "loaded", or why there is none. */
  inline?: string;
}

/** A copy of a model in the server's own thread (inline-lane.ts). */
export interface InlineLane {
  /** Scores one request in this thread (blocking it while the backend computes). */
  predict(inputs: TensorMap): Promise<TensorMap>;
  close(): Promise<void>;
  /** Resident memory the copy added, in bytes. */
  readonly memoryBytes: number;
}

export interface Runner {
  readonly spec: RunnerSpec;
  /** The process that owns the model when it is not the server's own (child-process runners). */
  readonly pid?: number | undefined;
  /**
   * A copy of the model in the server's own thread, for short requests to an idle model
   * (inline-lane.ts); set once start() has loaded it.
   */
  readonly inline?: InlineLane | undefined;
  /**
   * Loads the model; rejects with a ModelportError (MP_ERR_MODEL_LOAD_FAILED) when it cannot.
   * May be called again after a crash or after close() to run a fresh copy.
   */
  start(): Promise<RunnerLoadInfo>;
  /** Scores one batch; rejects with a ModelportError. */
  predict(inputs: TensorMap): Promise<TensorMap>;
  /**
   * Called with each answered batch's outputs and the backend's own time for it (no messages or
   * wake-ups around it), where the runner reports it (worker threads).
   */
  onComputed?(listener: (outputs: TensorMap, ms: number) => void): void;
  /** Called when the runner dies unexpectedly; in-flight calls have already been rejected. */
  onCrash(listener: (reason: string) => void): void;
  /**
   * Called when the runner is still healthy but should be replaced once it has drained (its
   * memory passed the ceiling). May fire again with every answer until it is restarted.
   */
  onRecycleNeeded?(listener: (reason: string) => void): void;
  /**
   * Stops the runner at once, without waiting for the call in progress (one stuck past the
   * hard limit): calls in flight fail with MP_ERR_RUNNER_CRASHED naming `reason`; never fires
   * onCrash. start() then runs a fresh copy.
   */
  terminate?(reason: string): Promise<void>;
  /** Closes the model and stops the runner; idempotent; never fires onCrash. */
  close(): Promise<void>;
}
