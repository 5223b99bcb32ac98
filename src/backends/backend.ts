// The one interface every backend implements. A backend turns a model reference into a
// LoadedModel that owns the weights; runners call it, HTTP code never does.
import type { ModelSignature, TensorMap } from "../tensor.js";

/** Backends that run in a runner (worker thread or child process); `transformers` serves embedding models. */
export type BackendName = "onnx" | "custom" | "transformers";

export interface LoadOptions {
  /** The model's name as served. */
  name: string;
  /** Absolute path of the model file (ONNX) or handler module (custom). */
  path: string;
  /** Intra-op threads for the math library; always set explicitly, never the library default. */
  threads: number;
  /** cpu, or cuda (onnx only): onnxruntime's CUDA execution provider. Default cpu. */
  device?: "cpu" | "cuda";
  /** Backend-specific options from config (for `custom`: passed to the handler as ctx.options). */
  options: Record<string, unknown>;
}

export interface LoadedModel {
  readonly signature: ModelSignature;
  /** Runs one batch. Rejects with a ModelportError when the inputs cannot be scored. */
  predict(inputs: TensorMap): Promise<TensorMap>;
  /** Frees the weights; safe to call twice. */
  close(): Promise<void>;
}

export interface Backend {
  readonly name: BackendName;
  load(options: LoadOptions): Promise<LoadedModel>;
}
