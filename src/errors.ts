// Every error modelport can answer with: one table of MP_ERR_* codes, each with an HTTP
// status, whether a retry can help, whether another runner may answer where this one could
// not, and a hint that tells the user what to do. docs/Errors.md
// is kept in step with this table by a test.

export interface ErrorSpec {
  status: number;
  retryable: boolean;
  /**
   * The API tier sends the request to another runner once when a runner answers this (the
   * runner, not the request, is the problem: draining, loading, crashed, full; for a language
   * model, the runner's own call failed). Absent: false.
   */
  tryElsewhere?: true;
  /**
   * The gRPC status where the one for the HTTP status (src/grpc/status.ts) would mislead: a 409
   * that is a duplicate (ALREADY_EXISTS) or a full table (RESOURCE_EXHAUSTED). Absent: by status.
   */
  grpc?: "ALREADY_EXISTS" | "RESOURCE_EXHAUSTED";
  /** What the code means, for docs/Errors.md. */
  summary: string;
}

export const ERRORS = {
  // Request shape and content
  MP_ERR_REQUEST_MALFORMED_JSON: {
    status: 400,
    retryable: false,
    summary: "The body, or the JSON header of a binary request, is not valid JSON.",
  },
  MP_ERR_REQUEST_UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    retryable: false,
    summary:
      "The Content-Type is not one the route accepts (application/json; application/octet-stream on predict and infer).",
  },
  MP_ERR_REQUEST_BODY_TOO_LARGE: {
    status: 413,
    retryable: false,
    summary: "The body is larger than the configured limit (limits.maxBodyBytes).",
  },
  MP_ERR_REQUEST_INVALID: {
    status: 400,
    retryable: false,
    summary: "The body does not have the documented shape (for example neither `rows` nor `inputs`).",
  },
  MP_ERR_INPUT_MISSING: { status: 400, retryable: false, summary: "A required model input is absent." },
  MP_ERR_INPUT_UNKNOWN: {
    status: 400,
    retryable: false,
    summary: "An input the model does not declare was sent.",
  },
  MP_ERR_INPUT_SHAPE: {
    status: 400,
    retryable: false,
    summary:
      "An input's shape does not match the model's declared shape, or its data does not fill the shape.",
  },
  MP_ERR_INPUT_DATATYPE: {
    status: 400,
    retryable: false,
    summary: "An input's datatype or element type does not match the model's.",
  },
  MP_ERR_INPUT_NOT_FINITE: {
    status: 400,
    retryable: false,
    summary:
      'A floating-point input holds NaN or Infinity (JSON cannot carry them; strings like "NaN" are refused).',
  },
  MP_ERR_INPUT_OUT_OF_RANGE: {
    status: 400,
    retryable: false,
    summary: "An integer input holds a value outside its datatype's range, or a non-integer.",
  },
  MP_ERR_INPUT_EMPTY_BATCH: { status: 400, retryable: false, summary: "The request holds zero rows." },
  MP_ERR_INPUT_TOO_MANY_ROWS: {
    status: 413,
    retryable: false,
    summary: "The request holds more rows than the model's limit (limits.maxBatchRows).",
  },
  MP_ERR_INPUT_BATCH_MISMATCH: {
    status: 400,
    retryable: false,
    summary: "Inputs disagree on the number of rows (dim 0).",
  },
  MP_ERR_DATATYPE_UNSUPPORTED: {
    status: 400,
    retryable: false,
    summary: "A datatype modelport cannot carry on this route yet (for example BYTES for an ONNX model).",
  },
  MP_ERR_BINARY_HEADER_LENGTH: {
    status: 400,
    retryable: false,
    summary:
      "A binary infer request's Inference-Header-Content-Length is missing, not a positive whole number, or beyond the body.",
  },
  MP_ERR_BINARY_DATA_SIZE: {
    status: 400,
    retryable: false,
    summary:
      "A binary tensor's byte count (binary_data_size, shared_memory_byte_size, or the raw body) does not match its shape and datatype, or runs past the body.",
  },
  MP_ERR_BINARY_TRAILING_BYTES: {
    status: 400,
    retryable: false,
    summary:
      "Bytes are left after the last binary input: the binary_data_size values do not add up to the body.",
  },
  MP_ERR_RESPONSE_NOT_ACCEPTABLE: {
    status: 406,
    retryable: false,
    summary:
      "`Accept: application/octet-stream` asks for one raw tensor but the response would hold several outputs; select one.",
  },
  MP_ERR_OUTPUT_UNKNOWN: {
    status: 400,
    retryable: false,
    summary: "An output requested in `outputs` is not one the model produces.",
  },
  // The shared-memory extension (docs/API.md, "Shared memory")
  MP_ERR_SHARED_MEMORY_DISABLED: {
    status: 400,
    retryable: false,
    summary:
      "The request uses shared memory, but the server was not started with it (server.sharedMemory.enabled, `--shared-memory`).",
  },
  MP_ERR_SHARED_MEMORY_KEY: {
    status: 400,
    retryable: false,
    summary:
      "A region's key is not an allowed shared memory object: not a valid name, outside server.sharedMemory.keyPrefix, missing, a link, not a regular file owned by the server's user, not openable, or bound to another API key (docs/API.md, Shared memory).",
  },
  MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND: {
    status: 400,
    retryable: false,
    summary: "No shared memory region of that name is registered for the caller's key.",
  },
  MP_ERR_SHARED_MEMORY_REGION_EXISTS: {
    status: 409,
    retryable: false,
    grpc: "ALREADY_EXISTS",
    summary: "A region of that name is already registered for the caller's key; unregister it first.",
  },
  MP_ERR_SHARED_MEMORY_RANGE: {
    status: 400,
    retryable: false,
    summary:
      "A byte range runs past its region or object, or an output is larger than the shared_memory_byte_size given for it.",
  },
  MP_ERR_SHARED_MEMORY_LIMIT: {
    status: 409,
    retryable: false,
    grpc: "RESOURCE_EXHAUSTED",
    summary:
      "server.sharedMemory.maxRegions regions are registered, or the caller's key holds server.sharedMemory.maxRegionsPerKey; unregister one first.",
  },
  MP_ERR_SHARED_MEMORY_REMOTE: {
    status: 403,
    retryable: false,
    summary:
      "Shared memory was used by a caller without a key from an address other than loopback; a server without API keys serves shared memory only to 127.0.0.1 and ::1.",
  },
  // Routing and models
  MP_ERR_ROUTE_NOT_FOUND: { status: 404, retryable: false, summary: "No route matches the method and path." },
  MP_ERR_MODEL_NOT_FOUND: { status: 404, retryable: false, summary: "No model is served under that name." },
  MP_ERR_MODEL_VERSION_NOT_FOUND: {
    status: 404,
    retryable: false,
    summary: "The model is served, but not at that version.",
  },
  MP_ERR_MODEL_NOT_READY: {
    status: 503,
    retryable: true,
    tryElsewhere: true,
    summary: "The model is loading, or failed its integrity or golden check; /readyz says why.",
  },
  MP_ERR_MODEL_LOAD_FAILED: {
    status: 503,
    retryable: false,
    summary: "The model could not be loaded (file missing, unreadable, or rejected by the backend).",
  },
  MP_ERR_MODEL_CHECKSUM_MISMATCH: {
    status: 503,
    retryable: false,
    summary:
      "The model file's sha256 differs from the one in config or manifest: the file is not the one expected.",
  },
  MP_ERR_MODEL_GOLDEN_MISMATCH: {
    status: 503,
    retryable: false,
    summary: "The model loaded but its golden example scored outside tolerance.",
  },
  MP_ERR_MODEL_VERSION_REFUSED: {
    status: 409,
    retryable: false,
    summary:
      "A load or promote was refused: that version failed its checks (cause) and never served; the version serving before still serves.",
  },
  MP_ERR_MODEL_CAPACITY: {
    status: 503,
    retryable: true,
    tryElsewhere: true,
    summary:
      "The model is not loaded, and loading it would pass the server's budget (server.maxLoadedModels / maxLoadedBytes) while every loaded model is busy; retry after Retry-After.",
  },
  MP_ERR_ADMIN_REQUIRED: {
    status: 403,
    retryable: false,
    summary:
      "A management route (load, unload, promote, rollback) needs an admin key (server.adminKeys); without any, only loopback callers of a server without API keys.",
  },
  MP_ERR_ROLE_FORBIDDEN: {
    status: 403,
    retryable: false,
    summary:
      "The key's role does not open this route: a metrics key (role: metrics) reads GET /metrics and the full /readyz body, nothing else.",
  },
  MP_ERR_INFERENCE_FAILED: {
    status: 422,
    retryable: false,
    summary: "The backend rejected these inputs at run time (for example a dim the graph cannot take).",
  },
  MP_ERR_HANDLER_BAD_INPUT: {
    status: 400,
    retryable: false,
    summary: "A custom handler refused the input (ctx.badInput); its message says what to change.",
  },
  MP_ERR_HANDLER_FAILED: {
    status: 500,
    retryable: false,
    summary: "A custom handler threw; the message is the handler's own.",
  },
  MP_ERR_MODEL_OVERLOADED: {
    status: 503,
    retryable: true,
    tryElsewhere: true,
    summary:
      "The model's queue is full (limits.maxQueueRows); Retry-After estimates when it will have drained.",
  },
  MP_ERR_DEADLINE_EXCEEDED: {
    status: 504,
    retryable: true,
    summary:
      "The request's deadline (X-Request-Timeout-Ms or limits.timeoutMs) could not be met: dropped before inference, or answered at the deadline while the model still computed.",
  },
  MP_ERR_REQUEST_CANCELED: {
    status: 499,
    retryable: false,
    summary:
      "The client closed the connection; its queued work was removed (only ever seen in logs and metrics).",
  },
  MP_ERR_RUNNER_CRASHED: {
    status: 503,
    retryable: true,
    tryElsewhere: true,
    summary: "The runner that owns the model stopped while the request was in flight; it restarts by itself.",
  },
  MP_ERR_RUNNER_UNAVAILABLE: {
    status: 503,
    retryable: true,
    summary:
      "API tier: no runner serving the model answered (none ready, or the request failed on two runners); retry after Retry-After.",
  },
  // Language models (OpenAI-compatible routes)
  MP_ERR_LLM_CONTEXT_OVERFLOW: {
    status: 400,
    retryable: false,
    summary:
      "The prompt does not fit the model's context (llm.contextSize): in tokens, or in UTF-8 bytes checked before tokenizing (llm.maxPromptBytesPerToken, llm.maxPromptBytes).",
  },
  MP_ERR_LLM_CAPABILITY_UNSUPPORTED: {
    status: 400,
    retryable: false,
    summary:
      "The model does not do what the route asks (for example chat or completions on an embeddings model, or embeddings on a chat model).",
  },
  MP_ERR_LLM_OUTPUT_INVALID: {
    status: 422,
    retryable: false,
    summary:
      "A structured answer (response_format json_schema or json_object, or tool calls) did not parse and validate against its schema in the attempts max_tokens allowed; nothing invalid is sent.",
  },
  MP_ERR_LLM_UPSTREAM_FAILED: {
    status: 502,
    retryable: true,
    tryElsewhere: true,
    summary:
      "The upstream server behind an `upstream` model failed or could not be reached, or its answer broke a limit (upstream.maxEventChars, upstream.maxResponseBytes).",
  },
  MP_ERR_LLM_UPSTREAM_REJECTED: {
    status: 502,
    retryable: false,
    summary:
      "The upstream server behind an `upstream` model refused the request with a 4xx other than 429 (a bad key, an unknown model or a parameter); its message is quoted, keys redacted.",
  },
  // Jobs
  MP_ERR_JOB_NOT_FOUND: {
    status: 404,
    retryable: false,
    summary:
      "No job with that id (it never existed, or it finished and was purged after the retention time).",
  },
  MP_ERR_RESPONSE_NOT_FOUND: {
    status: 404,
    retryable: false,
    summary:
      "No stored response with that id for this key (never stored, sent with store: false, deleted, or purged after the jobs' retention time).",
  },
  MP_ERR_JOB_IDEMPOTENCY_CONFLICT: {
    status: 409,
    retryable: false,
    grpc: "ALREADY_EXISTS",
    summary:
      "The Idempotency-Key was already used with a different request body; use a new key for a new request.",
  },
  MP_ERR_JOB_NOT_FINISHED: {
    status: 409,
    retryable: true,
    summary: "The job has no result yet; wait with GET /v1/jobs/{id}?wait=N or its event stream.",
  },
  MP_ERR_JOB_NOT_SUCCEEDED: {
    status: 409,
    retryable: false,
    summary: "The job ended failed or canceled, so it has no result; GET /v1/jobs/{id} shows the last error.",
  },
  MP_ERR_JOB_TIMEOUT: {
    status: 504,
    retryable: true,
    summary:
      "An attempt ran longer than the job's timeout (jobs.timeoutMs); it is retried until maxAttempts.",
  },
  MP_ERR_JOB_CALLBACK_REFUSED: {
    status: 400,
    retryable: false,
    summary:
      "The callback_url is not http(s), does not resolve within jobs.webhooks.dnsTimeoutMs, or resolves to an address not public unicast and not in jobs.webhooks.allowPrivate.",
  },
  MP_ERR_JOB_STORE_UNAVAILABLE: {
    status: 503,
    retryable: true,
    summary: "The job store could not be reached or written; nothing was accepted, retry.",
  },
  // Jobs, streams and WebSockets: limits
  MP_ERR_JOB_PAYLOAD_TOO_LARGE: {
    status: 413,
    retryable: false,
    summary:
      "A job's input (jobs.maxInputBytes) or metadata (jobs.maxMetadataBytes) is larger than the limit, or its callback_url is longer than 2048 characters.",
  },
  MP_ERR_JOB_QUEUE_FULL: {
    status: 503,
    retryable: true,
    summary:
      "The model already has jobs.maxQueuedPerModel jobs queued; retry after Retry-After, once some have run.",
  },
  MP_ERR_JOB_SUBSCRIPTIONS_EXCEEDED: {
    status: 429,
    retryable: false,
    summary:
      "A job WebSocket already follows jobs.maxSubscriptionsPerSocket jobs; unsubscribe from some, or open another connection.",
  },
  MP_ERR_STREAM_LIMIT_REACHED: {
    status: 503,
    retryable: true,
    summary:
      "The server already holds limits.maxStreams long-lived connections (job event streams and WebSockets); retry later.",
  },
  MP_ERR_STREAM_KEY_LIMIT_REACHED: {
    status: 429,
    retryable: true,
    summary:
      "This API key (or, without auth, all anonymous clients together) already holds limits.maxStreamsPerKey long-lived connections; close one first.",
  },
  MP_ERR_RATE_LIMITED: {
    status: 429,
    retryable: true,
    summary:
      "This key is over one of its limits (requests per second, concurrent requests, tokens per minute or queued jobs; docs/Multi-tenant.md); retry after Retry-After. Other keys are not affected.",
  },
  // Server state and access
  MP_ERR_SERVER_SHUTTING_DOWN: {
    status: 503,
    retryable: true,
    tryElsewhere: true,
    summary: "The server is draining for shutdown; retry on another instance.",
  },
  MP_ERR_SERVER_BUSY: {
    status: 503,
    retryable: true,
    tryElsewhere: true,
    summary:
      "Requests in progress hold limits.maxBodyBytesInFlight bytes of bodies (gRPC messages included); this one is refused before its body is read (gRPC: UNAVAILABLE). Retry after Retry-After or on another instance.",
  },
  // Connections (server.connections)
  MP_ERR_SERVER_TOO_MANY_CONNECTIONS: {
    status: 503,
    retryable: true,
    summary:
      "The server holds server.connections.maxConnections open connections; this one is answered and closed. Retry shortly or on another instance.",
  },
  MP_ERR_REQUEST_TIMEOUT: {
    status: 408,
    retryable: true,
    summary:
      "The request's headers or body did not arrive in time (server.connections.headersTimeoutMs, requestTimeoutMs); the connection is closed.",
  },
  MP_ERR_REQUEST_HEADERS_TOO_LARGE: {
    status: 431,
    retryable: false,
    summary:
      "The request line and headers are larger than Node's limit (16 KiB by default); the connection is closed.",
  },
  MP_ERR_REQUEST_UPGRADE_REQUIRED: {
    status: 426,
    retryable: false,
    summary:
      "A WebSocket route (GET /v1/jobs/ws) was requested as plain HTTP; connect with a WebSocket client (`Upgrade: websocket`).",
  },
  MP_ERR_AUTH_REQUIRED: {
    status: 401,
    retryable: false,
    summary: "An API key is required: send `Authorization: Bearer <key>`.",
  },
  MP_ERR_AUTH_INVALID: {
    status: 401,
    retryable: false,
    summary: "The API key is not one of the configured keys.",
  },
  MP_ERR_AUTH_KEY_REVOKED: {
    status: 401,
    retryable: false,
    summary:
      "The API key was removed from the key file (or its hash changed) while this stream, WebSocket, long-poll or shared memory call was under way; the server ended it. Use a current key.",
  },
  MP_ERR_HOST_NOT_ALLOWED: {
    status: 403,
    retryable: false,
    summary:
      "The Host header names a host this server does not answer to (a DNS rebinding attempt, or a name the server was not told about): a server without keys answers IP addresses, localhost and server.allowedHosts; add the name there.",
  },
  MP_ERR_ORIGIN_NOT_ALLOWED: {
    status: 403,
    retryable: false,
    summary:
      "A state-changing request or WebSocket upgrade came from a web page of another origin (its Origin header is not this server's own, nor in server.allowedOrigins); modelport serves no cross-origin browser apps unless allowed there.",
  },
  MP_ERR_SERVER_INTERNAL: {
    status: 500,
    retryable: true,
    summary: "An unexpected failure inside modelport; the log line with the request id has the details.",
  },
  // Configuration (reported at start-up, not over HTTP)
  MP_ERR_CONFIG_INVALID: {
    status: 500,
    retryable: false,
    summary: "The configuration has errors; each is listed with its file and key.",
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

/** The codes marked tryElsewhere: a runner's answer that another runner might not give. */
export const TRY_ELSEWHERE: ReadonlySet<string> = new Set(
  Object.entries(ERRORS as Record<string, ErrorSpec>)
    .filter(([, spec]) => spec.tryElsewhere)
    .map(([code]) => code),
);

/** The error every modelport path throws: a table code plus a message that says what to do. */
export class ModelportError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = "ModelportError";
    this.code = code;
    this.status = ERRORS[code].status;
    this.retryable = ERRORS[code].retryable;
    if (details) this.details = details;
  }

  /** The wire form used by the native routes. */
  toJSON(): {
    error: { code: ErrorCode; message: string; retryable: boolean; details?: Record<string, unknown> };
  } {
    return {
      error: {
        code: this.code,
        message: this.message,
        retryable: this.retryable,
        ...(this.details ? { details: this.details } : {}),
      },
    };
  }
}

export function isModelportError(err: unknown): err is ModelportError {
  return err instanceof ModelportError;
}

/** Rebuilds a ModelportError that crossed a thread or process boundary as plain data. */
export function reviveError(data: {
  code?: string;
  message?: string;
  details?: Record<string, unknown>;
}): ModelportError {
  const code = (data.code && data.code in ERRORS ? data.code : "MP_ERR_SERVER_INTERNAL") as ErrorCode;
  return new ModelportError(code, data.message ?? "unknown error", data.details);
}
