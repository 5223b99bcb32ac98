// The header names and media types modelport speaks, shared by the server, the runners' clients
// and the API tier.

/** The length of the JSON header at the start of a binary OIP body (Triton's name). */
export const INFERENCE_HEADER = "inference-header-content-length";
/** A raw tensor body's shape, datatype and name (the native route's application/octet-stream). */
export const SHAPE_HEADER = "x-tensor-shape";
export const DATATYPE_HEADER = "x-tensor-datatype";
export const NAME_HEADER = "x-tensor-name";
export const OCTET_STREAM = "application/octet-stream";
/** A request's own deadline in ms, instead of the model's limits.timeoutMs. */
export const TIMEOUT_HEADER = "x-request-timeout-ms";
/** Marks a poll (the API tier's health checks): a successful one is not logged. */
export const POLL_HEADER = "x-modelport-poll";
/** The request id, taken from the client when it is well formed, on every response. */
export const REQUEST_ID_HEADER = "x-request-id";
/** Which process answered, on every response. */
export const INSTANCE_HEADER = "x-modelport-instance";
/** On a response whose model had to be loaded first (lazy, idle-unloaded, evicted): the ms waited. */
export const COLD_START_HEADER = "x-modelport-cold-start-ms";
/** A JSON body modelport writes as bytes itself (the type Fastify gives the objects it serializes). */
export const JSON_TYPE = "application/json; charset=utf-8";
