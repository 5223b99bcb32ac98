// The public contract of a custom handler module: what modelport passes to `load(ctx)` and
// what `predict(batch)` must return. Import these types from "modelport".

import type { Datatype, ModelSignature, TensorMap } from "../../tensor.js";
import type { LoadedModel } from "../backend.js";

export interface HandlerContext {
  /** The model's name as served. */
  name: string;
  /** Folder of the handler module; relative paths in options are resolved against it. */
  dir: string;
  /** Thread budget given to this model; pass it on to anything that computes. */
  threads: number;
  /** `options` from the model's config entry. */
  options: Record<string, unknown>;
  /**
   * Loads another model (today an ONNX file) that the handler wraps with pre/post-processing.
   * A relative path is resolved against `dir`. The wrapped model is closed with the handler.
   */
  loadModel(spec: { backend: "onnx"; path: string; threads?: number }): Promise<LoadedModel>;
  /** An error to throw from predict() when the input is wrong: the client gets 400 MP_ERR_HANDLER_BAD_INPUT with `message`. */
  badInput(message: string): Error;
  /** Structured log line tagged with the model's name. */
  log(message: string, fields?: Record<string, unknown>): void;
}

export interface HandlerTensorSpec {
  name: string;
  datatype: Datatype;
  /** -1 marks a dynamic dim; dim 0 is the batch when `batchable`. */
  shape: number[];
  description?: string;
}

/** What `load(ctx)` resolves to: the handler's signature. */
export interface HandlerSignature {
  inputs: HandlerTensorSpec[];
  outputs: HandlerTensorSpec[];
  /** Dim 0 of every input and output is the batch (lets modelport split and batch requests). Default true. */
  batchable?: boolean;
}

/** The shape of a handler module: `export async function load(ctx)` and `export async function predict(batch)`. */
export interface HandlerModule {
  load(ctx: HandlerContext): Promise<HandlerSignature> | HandlerSignature;
  predict(batch: TensorMap): Promise<TensorMap> | TensorMap;
  close?(): Promise<void> | void;
}

export type { ModelSignature, TensorMap };
