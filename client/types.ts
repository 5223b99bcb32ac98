// The client's public types: request and response bodies of the routes it calls, jobs, and the
// per-model typing that a file written by `modelport types URL` plugs into (createClient<Models>).
import type { DataFor, Datatype, Tensor, TensorData, TensorInput } from "./tensors.js";

/**
 * What one model's entry in a generated `Models` interface holds (all optional here so that any
 * object type fits; `modelport types` writes all four).
 */
export interface ModelTypes {
  /** Named tensors for `{ inputs }`. */
  inputs?: object;
  /** One element per row, for `{ rows }`. */
  rows?: unknown;
  /** The outputs of a JSON predict answer. */
  outputs?: object;
  /** Datatype names per input and output, for predictTensors. */
  tensors?: { inputs?: object; outputs?: object };
}

/** A model table that accepts every model name and any body: createClient() without a type. */
export type AnyModels = Record<
  string,
  {
    inputs: Record<string, unknown>;
    rows: unknown;
    outputs: Record<string, unknown>;
    tensors: { inputs: Record<string, Datatype>; outputs: Record<string, Datatype> };
  }
>;

/** The model names of a model table. */
export type ModelName<M> = keyof M & string;

type Field<T, K extends string, D> = T extends { [P in K]: infer V } ? V : D;

export type InputsOf<M, K extends keyof M> = Field<M[K], "inputs", Record<string, unknown>>;
export type RowsOf<M, K extends keyof M> = Field<M[K], "rows", unknown>;
export type OutputsOf<M, K extends keyof M> = Field<M[K], "outputs", Record<string, unknown>>;
type TensorTypes<M, K extends keyof M> = Field<M[K], "tensors", Record<string, never>>;
export type TensorInputTypesOf<M, K extends keyof M> = Field<
  TensorTypes<M, K>,
  "inputs",
  Record<string, Datatype>
>;
export type TensorOutputTypesOf<M, K extends keyof M> = Field<
  TensorTypes<M, K>,
  "outputs",
  Record<string, Datatype>
>;

/** A native predict body: exactly one of `rows` and `inputs`. */
export type PredictBody<M, K extends keyof M> =
  | { rows: RowsOf<M, K>; inputs?: never }
  | { inputs: InputsOf<M, K>; rows?: never };

/** POST /v1/models/{m}/predict's answer. */
export interface PredictResponse<O = Record<string, unknown>> {
  model: string;
  model_version: string;
  id?: string;
  outputs: O;
}

type DataOf<D> = D extends Datatype ? DataFor<D> : TensorData;

/** predictTensors' inputs: one TensorInput per input, its data the typed array of its datatype. */
export type TensorInputsOf<M, K extends keyof M> = {
  [N in keyof TensorInputTypesOf<M, K>]: TensorInput<DataOf<TensorInputTypesOf<M, K>[N]>>;
};

/** predictTensors' answer (the Open Inference Protocol's, with tensors decoded). */
export interface TensorResponse<O = Record<string, Tensor>> {
  model_name: string;
  model_version?: string;
  id?: string;
  outputs: O;
}

export type TensorOutputsOf<M, K extends keyof M> = {
  [N in keyof TensorOutputTypesOf<M, K>]: Tensor<DataOf<TensorOutputTypesOf<M, K>[N]>>;
};

/** An Open Inference Protocol tensor in JSON. */
export interface OipTensor {
  name: string;
  shape: number[];
  datatype: Datatype | string;
  data?: unknown[];
  parameters?: Record<string, unknown>;
}

/** POST /v2/models/{m}/infer's JSON body. */
export interface OipRequest {
  id?: string;
  parameters?: Record<string, unknown>;
  inputs: OipTensor[];
  outputs?: { name: string; parameters?: Record<string, unknown> }[];
}

export interface OipResponse {
  model_name: string;
  model_version?: string;
  id?: string;
  parameters?: Record<string, unknown>;
  outputs: OipTensor[];
}

/** A tensor's declaration in a model description. */
export interface TensorSpec {
  name: string;
  datatype: Datatype;
  /** -1 is any size; absent when the model does not declare a shape. */
  shape?: number[];
  dimNames?: (string | null)[];
  description?: string;
}

/** GET /v1/models/{m} for a tensor model (the fields the client reads; the server sends more). */
export interface ModelDescription {
  name: string;
  version: string;
  versions: string[];
  backend: string;
  description?: string;
  status: {
    state: string;
    ready: boolean;
    reason?: string;
    code?: string;
    golden?: string;
    loadable?: boolean;
  };
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  batchable: boolean;
  [key: string]: unknown;
}

/** GET /v1/models: every model in OpenAI's shape (`data`), and tensor models described (`models`). */
export interface ModelList {
  object: "list";
  data: {
    id: string;
    object: "model";
    kind?: string;
    backend?: string;
    ready?: boolean;
    [key: string]: unknown;
  }[];
  models: ModelDescription[];
}

export type JobStatus = "queued" | "running" | "succeeded" | "failed" | "canceled";

/** A job as GET /v1/jobs/{id} shows it. */
export interface Job {
  id: string;
  model: string;
  /** The version the job is pinned to (submitted to `name@version`); absent: the current one when it runs. */
  version?: string;
  status: JobStatus;
  priority: number;
  created_at: string;
  updated_at?: string;
  started_at?: string;
  finished_at?: string;
  attempts: number;
  max_attempts: number;
  last_error?: { code: string; message: string } | null;
  cancel_requested?: boolean;
  metadata?: Record<string, unknown>;
  owner?: string;
  result_bytes?: number;
  webhook?: {
    url: string;
    attempts: number;
    last_status?: number;
    last_error?: string;
    delivered_at?: string;
  };
  links: { self: string; result: string; events: string };
}

/** One page of GET /v1/jobs. */
export interface JobPage {
  jobs: Job[];
  next_cursor?: string;
}

export interface JobQuery {
  status?: JobStatus;
  model?: string;
  /** Jobs per page, 1 to 1000 (the server's default: 100). */
  limit?: number;
  /** Start after this page (a next_cursor). */
  cursor?: string;
}
