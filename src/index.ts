// modelport's public entry: build the app in code, load config, and the types a custom
// handler module needs.
export type { Backend, LoadedModel, LoadOptions } from "./backends/backend.js";
export type {
  HandlerContext,
  HandlerModule,
  HandlerSignature,
  HandlerTensorSpec,
} from "./backends/custom/handler.js";
export { ConfigError, loadConfig } from "./config/load.js";
export type { Config, ModelConfig } from "./config/schema.js";
export { ERRORS, type ErrorCode, ModelportError } from "./errors.js";
export type { GoldenFile, ModelManifest } from "./golden.js";
export { signWebhook, verifyWebhook } from "./notify/webhook.js";
export { buildApp, type ModelportApp } from "./server/app.js";
export { TRACE_LOG_OPTIONS } from "./telemetry/log-fields.js";
export type { Datatype, ModelSignature, Tensor, TensorMap, TensorSpec } from "./tensor.js";
export { VERSION } from "./version.js";
