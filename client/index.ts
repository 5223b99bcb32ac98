// modelport/client: a typed, dependency-free client for a modelport server, built on fetch (Node
// 20+ and browsers). Everything a user imports is re-exported here; docs/Client.md describes it.
export { Client, type ClientOptions, createClient, type ModelClient, type PredictOptions } from "./client.js";
export { type ClientErrorCode, isModelportError, ModelportError, type ModelportErrorInit } from "./errors.js";
export { isFinal, JobsClient, type SubmitOptions, type WaitOptions } from "./jobs.js";
export { type BackoffOptions, CONNECT_ERRORS, type RetryKind } from "./retry.js";
export {
  type DataFor,
  type Datatype,
  datatypeOf,
  type Tensor,
  type TensorData,
  type TensorInput,
  tensor,
} from "./tensors.js";
export type { CallOptions, RetryInfo, TransportOptions } from "./transport.js";
export type {
  AnyModels,
  InputsOf,
  Job,
  JobPage,
  JobQuery,
  JobStatus,
  ModelDescription,
  ModelList,
  ModelName,
  ModelTypes,
  OipRequest,
  OipResponse,
  OipTensor,
  OutputsOf,
  PredictBody,
  PredictResponse,
  RowsOf,
  TensorInputsOf,
  TensorOutputsOf,
  TensorResponse,
  TensorSpec,
} from "./types.js";
