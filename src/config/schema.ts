// The one configuration schema: server settings, default limits and the models to serve.
// Parsed once at start-up (config/load.ts), then frozen.
import { z } from "zod";
import { redactPathProblem } from "../capture/redact.js";
import { allowPrivateProblems } from "../notify/callback-url.js";

const positiveInt = z.number().int().positive();

export const limitsSchema = z
  .object({
    /** Largest request body accepted, in bytes. */
    maxBodyBytes: positiveInt.default(10 * 1024 * 1024),
    /** Most rows (dim 0) one request may carry. */
    maxBatchRows: positiveInt.default(1024),
    /** Rows allowed to wait in a model's queue; beyond it requests get 503 with Retry-After. */
    maxQueueRows: positiveInt.default(4096),
    /** Default deadline of a request in ms (X-Request-Timeout-Ms overrides); late work is dropped with 504. */
    timeoutMs: positiveInt.default(30_000),
    /**
     * A runner still on one batch after this many ms is stuck: it is terminated (thread) or
     * killed (child process), restarted and golden-checked again. Default: hardTimeoutMs(limits).
     */
    hardTimeoutMs: positiveInt.optional(),
  })
  .strict();

/** The hard limit on one runner call when limits.hardTimeoutMs is not set: max(2 × timeoutMs, 60 s). */
export function hardTimeoutMs(limits: { timeoutMs: number; hardTimeoutMs?: number | undefined }): number {
  return limits.hardTimeoutMs ?? Math.max(2 * limits.timeoutMs, 60_000);
}

/** limits.maxBodyBytesInFlight when not set: 1 GiB, or one largest body if that is more. */
export function bodyBudget(limits: {
  maxBodyBytes: number;
  maxBodyBytesInFlight?: number | undefined;
}): number {
  return limits.maxBodyBytesInFlight ?? Math.max(1 << 30, limits.maxBodyBytes);
}

/** Per-model overrides of the limits; the body size limit is server-wide. */
export const modelLimitsSchema = limitsSchema.omit({ maxBodyBytes: true }).partial().strict();

/** The top-level `limits`: the model defaults above plus server-wide limits on long-lived connections. */
export const serverLimitsSchema = limitsSchema
  .extend({
    // Job event streams and job WebSockets, counted by src/server/stream-slots.ts.
    /** Long-lived connections held at once; beyond it 503 MP_ERR_STREAM_LIMIT_REACHED. */
    maxStreams: positiveInt.max(1_000_000).default(1000),
    /** Long-lived connections per API key (anonymous clients share one); beyond it 429 MP_ERR_STREAM_KEY_LIMIT_REACHED. */
    maxStreamsPerKey: positiveInt.max(1_000_000).default(100),
    /** Longest life of one job event stream; it then ends with a `reconnect` event. */
    maxStreamMs: positiveInt.min(1000).default(900_000),
    /** Keep-alive comments on event streams and pings on WebSockets (a dead client is dropped). */
    streamHeartbeatMs: positiveInt.min(100).default(15_000),
    /**
     * Deepest nesting of arrays and objects in a JSON body; deeper bodies get 400 before parsing.
     * At most 1,000: bodies are serialized again (jobs, capture, an API tier's management calls),
     * and JSON.stringify overflows V8's stack past about 4,000 levels.
     */
    maxJsonDepth: positiveInt.max(1000).default(128),
    /** Request-body bytes held at once across all requests; beyond it 503 MP_ERR_SERVER_BUSY. Default: bodyBudget(). */
    maxBodyBytesInFlight: positiveInt.optional(),
  })
  .strict();

export const batchingSchema = z
  .object({
    /** Join concurrent requests into one inference; default: on when the model has a dynamic batch dim. */
    enabled: z.boolean().optional(),
    /** Largest batch sent to the model; default DEFAULT_MAX_BATCH_ROWS for the model's kind. */
    maxBatchRows: positiveInt.max(65_536).optional(),
    /** Most bytes of input joined into one batch (a single request may be larger and runs alone). */
    maxBatchBytes: positiveInt.default(64 * 1024 * 1024),
    /** Longest a request waits for others to join it. */
    maxDelayMs: z.number().nonnegative().max(10_000).default(2),
    /** Batches in flight at once (2 lets the next batch travel while one computes). */
    maxInFlight: positiveInt.max(64).default(2),
    /** Adaptive: wait only while rows keep arriving and waiting pays; false: wait for a full batch or maxDelayMs. */
    adaptive: z.boolean().default(true),
    /**
     * ONNX on the CPU in a worker: a request that finds the model idle and is predicted (from
     * measured batches) to take at most this many ms runs on a copy in the server's thread, without
     * the thread hop. 0: off. See docs/PERFORMANCE.md.
     */
    inlineMaxMs: z.number().nonnegative().max(100).default(1),
  })
  .strict();

/** Batching settings once the row limit's default is filled in (withBatchDefaults). */
export type BatchingConfig = Omit<z.output<typeof batchingSchema>, "maxBatchRows"> & { maxBatchRows: number };

/**
 * Default batch row limits. Tensor models: 256, so a batch of 32-row requests joins 8 of them
 * rather than 2 (+11–26% requests/s at concurrency 64, docs/PERFORMANCE.md); batching.maxBatchBytes
 * bounds a batch of large inputs. Embeddings: 64 texts, since every text is padded to the longest
 * and activations grow with the batch.
 */
export const DEFAULT_MAX_BATCH_ROWS = { tensor: 256, embeddings: 64 } as const;

export function withBatchDefaults(
  b: z.output<typeof batchingSchema>,
  kind: keyof typeof DEFAULT_MAX_BATCH_ROWS,
): BatchingConfig {
  return Object.freeze({ ...b, maxBatchRows: b.maxBatchRows ?? DEFAULT_MAX_BATCH_ROWS[kind] });
}

/** Language models (backends llama-cpp, transformers, upstream): generation settings. */
export const llmSchema = z
  .object({
    /** Context window of each sequence in tokens (prompt + answer); memory grows with contextSize × sequences. */
    contextSize: positiveInt.max(1_048_576).default(2048),
    /** Requests generating at once (llama-cpp: parallel sequences of one context). */
    sequences: positiveInt.max(256).default(1),
    /** Requests allowed to wait for a free sequence; beyond it 503 MP_ERR_MODEL_OVERLOADED with Retry-After. */
    maxWaiting: z.number().int().nonnegative().max(100_000).default(16),
    /**
     * Jobs generating at once on this model (docs/Jobs.md#language-model-jobs); default: one less
     * than `sequences` (at least 1), so an interactive request always finds a sequence soon; a
     * transformers embeddings model: jobs.concurrency.
     */
    jobConcurrency: positiveInt.max(256).optional(),
    /** Jinja chat template; overrides the one in the model file (GGUF tokenizer.chat_template). */
    chatTemplate: z.string().min(1).optional(),
    /** Most new tokens per request, whatever max_tokens asks; default: up to the context's end. */
    maxTokens: positiveInt.optional(),
    /** Tokens evaluated per batch while reading a prompt (llama-cpp batchSize); default: the library's. */
    batchSize: positiveInt.max(65_536).optional(),
    /**
     * Prompt size checked before any templating or tokenizing: a prompt (all message contents, or
     * the completion prompt) of more UTF-8 bytes than contextSize × maxPromptBytesPerToken (for
     * models that know their context: llama-cpp) or than maxPromptBytes gets 400
     * MP_ERR_LLM_CONTEXT_OVERFLOW at once. No real tokenizer averages 32 bytes a token.
     */
    maxPromptBytesPerToken: positiveInt.max(1024).default(32),
    /** Absolute cap on a prompt's UTF-8 bytes, for every language backend (upstream included); default: none beyond the above and limits.maxBodyBytes. */
    maxPromptBytes: positiveInt.optional(),
    /** Most messages in one chat request; more: 400 MP_ERR_REQUEST_INVALID. */
    maxMessages: positiveInt.max(1_000_000).default(1024),
    /** Most stop sequences in one request; more: 400 MP_ERR_REQUEST_INVALID. */
    maxStops: positiveInt.max(1024).default(16),
    /** Longest stop sequence (characters); longer: 400 MP_ERR_REQUEST_INVALID. */
    maxStopChars: positiveInt.max(1_000_000).default(1000),
    /**
     * llama-cpp: a sequence keeps its last request's evaluated tokens, and a request goes to the
     * free sequence sharing the longest prefix with it, evaluating only the rest (a long system
     * prompt, a chat growing turn by turn). false: every request starts from an empty sequence.
     */
    prefixCache: z.boolean().default(true),
    /** Most choices (`n`) one request may ask for; each takes a sequence while it generates. */
    maxChoices: positiveInt.max(128).default(8),
  })
  .strict();

export type LlmConfig = z.output<typeof llmSchema>;

/** backend upstream: where requests go, how the key is found, and how failures are retried. */
export const upstreamSchema = z
  .object({
    /** Base URL of an OpenAI-compatible API, e.g. https://api.openai.com/v1 (routes are appended). */
    url: z.string().url(),
    /** Name of the environment variable that holds the API key (never the key itself in a file). */
    apiKeyEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name")
      .optional(),
    /** The model name the upstream knows; default: this model's name. */
    model: z.string().min(1).optional(),
    /** Limit for one attempt (until the first byte of a stream, then between chunks). */
    timeoutMs: positiveInt.default(60_000),
    /** Attempts after the first, on 429, 5xx and connection errors before any byte was streamed. */
    retries: z.number().int().nonnegative().max(10).default(3),
    /** First backoff; doubles each attempt (a Retry-After header wins, up to maxBackoffMs). */
    backoffMs: positiveInt.default(500),
    maxBackoffMs: positiveInt.default(30_000),
    /** Longest Server-Sent Events line or event a stream may send (characters); beyond it the stream is cut with MP_ERR_LLM_UPSTREAM_FAILED. */
    maxEventChars: positiveInt.max(1 << 28).default(1 << 20),
    /** Largest non-streamed answer (embeddings, the /models probe) read from the upstream, in bytes; beyond it MP_ERR_LLM_UPSTREAM_FAILED. */
    maxResponseBytes: positiveInt.max(1 << 30).default(64 << 20),
  })
  .strict();

export type UpstreamConfig = z.output<typeof upstreamSchema>;

/**
 * Payload capture of one model (docs/Capture.md): which share of its requests is recorded with
 * its answer, which fields are redacted, and how large one record may grow.
 */
export const captureSchema = z
  .object({
    /** Share of requests recorded, 0..1, decided before anything is serialized. */
    sampleRate: z.number().min(0).max(1).default(1),
    /** Fields replaced by "[redacted]" in the request and response bodies (src/capture/redact.ts syntax). */
    redact: z
      .array(
        z.string().superRefine((path, ctx) => {
          const problem = redactPathProblem(path);
          if (problem) ctx.addIssue({ code: "custom", message: problem });
        }),
      )
      .max(256)
      .default([]),
    /** Largest record (one request/response pair as a JSON line); bodies beyond it are cut and marked. */
    maxBytes: positiveInt
      .min(1024)
      .max(64 * 1024 * 1024)
      .default(64 * 1024),
  })
  .strict();

export type CaptureConfig = z.output<typeof captureSchema>;

const captureS3Schema = z
  .object({
    bucket: z.string().min(3),
    /** Key prefix inside the bucket; objects go under PREFIX/YYYY/MM/DD/. */
    prefix: z.string().default("modelport/capture/"),
    region: z.string().default("us-east-1"),
    /** Any S3-compatible endpoint (MinIO, R2, a local test server); default: AWS. */
    endpoint: z.string().url().optional(),
    /** Path-style URLs (needed by most S3-compatible servers). */
    forcePathStyle: z.boolean().default(false),
    /** Credentials come from the AWS SDK's usual chain (AWS_ACCESS_KEY_ID, profiles, roles). */
  })
  .strict();

/** Where captured records go (server.capture): rotated JSONL files in a folder, or JSONL objects in S3. */
export const captureDestinationSchema = z
  .object({
    /** Folder of JSONL files, relative to the config file (the working directory without one); files 0600, the folder made 0700. */
    dir: z.string().min(1).optional(),
    /** A new file once the current one reaches this size. */
    rotateBytes: positiveInt.min(1024).default(64 * 1024 * 1024),
    /** Files kept in the folder; the oldest are deleted beyond it. */
    keepFiles: positiveInt.max(100_000).default(10),
    /** S3 (or compatible) bucket: one JSONL object per batch. */
    s3: captureS3Schema.optional(),
    /** S3: a batch is written once this many bytes of records wait... */
    batchBytes: positiveInt.max(1024 * 1024 * 1024).default(4 * 1024 * 1024),
    /** ...or once its oldest record has waited this long. */
    flushMs: positiveInt.max(3_600_000).default(10_000),
    /** Records waiting to be written; beyond it new ones are dropped (and counted). */
    queueRecords: positiveInt.max(1_000_000).default(1000),
    /** Bytes of bodies waiting to be written (estimated before serializing); beyond it new records are dropped. */
    queueBytes: positiveInt.default(64 * 1024 * 1024),
  })
  .strict()
  .refine((c) => (c.dir === undefined) !== (c.s3 === undefined), {
    message: "give exactly one destination: dir (rotated JSONL files) or s3 (JSONL objects in a bucket)",
  });

export type CaptureDestinationConfig = z.output<typeof captureDestinationSchema>;

export const modelSchema = z
  .object({
    name: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/,
        "use letters, digits, '.', '_' or '-' (max 128), starting with a letter or digit",
      ),
    /** onnx and custom are tensor models; llama-cpp, transformers and upstream are language models (src/llm/). */
    backend: z.enum(["onnx", "custom", "llama-cpp", "transformers", "upstream"]).default("onnx"),
    path: z.string().min(1),
    version: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/, "use letters, digits, '.', '_' or '-'")
      .default("1"),
    sha256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, "expected 64 hexadecimal characters")
      .transform((s) => s.toLowerCase())
      .optional(),
    /** Golden file; by default `<model base>.golden.json` beside the model when it exists. */
    golden: z.string().min(1).optional(),
    /** Default tolerance for golden outputs; the golden file's own tolerance wins. */
    tolerance: z.number().nonnegative().default(1e-5),
    threads: positiveInt.max(256).default(1),
    /** eager: loaded at start-up; lazy: on the first request that needs it (docs/Models-over-time.md#lazy-loading-and-eviction). */
    load: z.enum(["eager", "lazy"]).default("eager"),
    /** Unloaded after this many ms without a call; the next call loads it again (a cold start). */
    idleUnloadMs: positiveInt.min(1000).optional(),
    /** Where the runner lives: a worker thread of the server process, or a supervised child process. */
    placement: z.enum(["worker", "process"]).default("worker"),
    /** Child-process runners only: recycle the runner (after draining) when its RSS exceeds this many MiB. */
    maxRssMb: positiveInt.optional(),
    /** cpu, or cuda (onnxruntime's CUDA execution provider; needs a CUDA build and a GPU). */
    device: z.enum(["cpu", "cuda"]).default("cpu"),
    limits: modelLimitsSchema.optional(),
    batching: batchingSchema.default(batchingSchema.parse({})),
    /** Language backends only (defaults filled in by config/load.ts). */
    llm: llmSchema.optional(),
    options: z.record(z.string(), z.unknown()).default({}),
    description: z.string().optional(),
    /**
     * Dollars per machine-hour for this model's compute (cost per request); default
     * server.pricePerHour. Local models only: an upstream model is refused with it.
     */
    pricePerHour: z.number().nonnegative().optional(),
    /** Language models (upstream, llama-cpp, transformers): dollars per million prompt tokens. */
    pricePerMillionInputTokens: z.number().nonnegative().optional(),
    /** Language models: dollars per million completion tokens. */
    pricePerMillionOutputTokens: z.number().nonnegative().optional(),
    /** Work run as a job is counted at this fraction of the price (0.5: half, as hosted batch APIs charge). */
    batchPriceFactor: z.number().nonnegative().optional(),
    /** backend upstream: the OpenAI-compatible service requests are forwarded to (src/backends/upstream/). */
    upstream: upstreamSchema.optional(),
    /** Record this model's request/response pairs (docs/Capture.md); needs server.capture. */
    capture: captureSchema.optional(),
  })
  .strict();

/** Server-wide limits on client connections: slow or idle clients and connection floods. */
export const connectionsSchema = z
  .object({
    /** All request headers must arrive within this long of the connection's request start, else 408 and close. */
    headersTimeoutMs: positiveInt.max(3_600_000).default(10_000),
    /**
     * The whole request (headers and body) must arrive within this long, else 408 and close. It
     * covers receiving only: a response (a stream, a long-poll) may last longer.
     */
    requestTimeoutMs: positiveInt.max(3_600_000).default(60_000),
    /** An idle kept-alive connection is closed after this long without a new request. */
    keepAliveTimeoutMs: positiveInt.max(3_600_000).default(65_000),
    /**
     * A connection with no bytes in either direction for this long is closed, even mid-response
     * (a client that stops reading). 0: off, since a response may be silent up to the request's deadline.
     */
    idleTimeoutMs: z.number().int().nonnegative().max(86_400_000).default(0),
    /** Open client connections; over it a new connection gets 503 MP_ERR_SERVER_TOO_MANY_CONNECTIONS and is closed. */
    maxConnections: positiveInt.max(1_000_000).default(4096),
    /** Requests served on one kept-alive connection before it is closed (spreads load behind a balancer); 0: no limit. */
    maxRequestsPerSocket: z.number().int().nonnegative().default(0),
    /** gRPC: calls open at once on one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
    maxStreamsPerConnection: positiveInt.max(1_000_000).default(100),
  })
  .strict()
  .refine((c) => c.headersTimeoutMs <= c.requestTimeoutMs, {
    message: "headersTimeoutMs must not exceed requestTimeoutMs",
    path: ["headersTimeoutMs"],
  });

export type ConnectionsConfig = z.output<typeof connectionsSchema>;

/** The Open Inference Protocol's system shared-memory extension (docs/API.md, "Shared memory"). */
export const sharedMemorySchema = z
  .object({
    /**
     * Let clients on this host register shared memory objects (/dev/shm) and send and receive
     * tensors through them. Any key allowed to infer may then make the server read and write the
     * objects of the server's own user under keyPrefix (each object serves the first key that
     * registers it, while it exists): enable it for clients you trust on this host. Without API
     * keys, only loopback callers may use it.
     */
    enabled: z.boolean().default(false),
    /**
     * Only objects whose names start with this (after the leading '/') may be registered, so the
     * objects of other programs of the same user stay out of reach. "" (every name) is an explicit
     * opt-out.
     */
    keyPrefix: z
      .string()
      .regex(/^[A-Za-z0-9._-]*$/, "use letters, digits, '.', '_' or '-'")
      .max(200)
      .default("modelport_"),
    /** Regions registered at once, all keys together; beyond it 409 MP_ERR_SHARED_MEMORY_LIMIT. */
    maxRegions: positiveInt.max(65_536).default(64),
    /** Regions registered at once by one key (at most maxRegions; default 16, or maxRegions if less). */
    maxRegionsPerKey: positiveInt.max(65_536).optional(),
  })
  .strict()
  .refine((s) => s.maxRegionsPerKey === undefined || s.maxRegionsPerKey <= s.maxRegions, {
    message: "maxRegionsPerKey must not exceed maxRegions",
    path: ["maxRegionsPerKey"],
  })
  .transform((s) => ({ ...s, maxRegionsPerKey: s.maxRegionsPerKey ?? Math.min(16, s.maxRegions) }));

export const serverSchema = z
  .object({
    host: z.string().min(1).default("127.0.0.1"),
    port: z.number().int().min(0).max(65535).default(8080),
    /** The Open Inference Protocol over gRPC on this port (0 picks a free one); unset: no gRPC. */
    grpcPort: z.number().int().min(0).max(65535).optional(),
    /**
     * Bearer tokens accepted on every route but the probes; empty means no auth. Client keys that
     * list no models: every model, and of /metrics only their own series (docs/Multi-tenant.md).
     */
    apiKeys: z.array(z.string().min(8, "API keys must be at least 8 characters")).default([]),
    /**
     * Bearer tokens that may also use the management routes (load, unload, promote, rollback,
     * weights; docs/Models-over-time.md). Without any: management answers only callers on the loopback
     * interface of a server with no API keys at all.
     */
    adminKeys: z.array(z.string().min(16, "admin keys must be at least 16 characters")).default([]),
    /**
     * The key file: named keys with roles (client, admin, metrics), models and limits (docs/Multi-tenant.md); re-read on
     * change and on SIGHUP. With it, every route but the probes needs a key.
     */
    keys: z.string().min(1).optional(),
    /** The audit log of admin actions: a file (JSON lines, appended; created 0600); default the server's log, marked "log":"audit". */
    auditLog: z.string().min(1).optional(),
    /**
     * Host names (the Host header without its port) the server answers to besides IP addresses,
     * localhost and *.localhost: "models.internal" that name, ".example.com" it and its subdomains,
     * "*" any (no check). Checked on a server that needs no key; on one with keys only when set
     * (docs/Multi-tenant.md, "Browsers: Host and Origin").
     */
    allowedHosts: z
      .array(
        z
          .string()
          .regex(/^(\*|\.?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)$/, 'expected a host name, ".domain" or "*"'),
      )
      .optional(),
    /**
     * Origins (scheme://host[:port]) whose web pages may send state-changing requests and open
     * WebSockets, besides the server's own; "*" any. Requests without an Origin header never need it.
     */
    allowedOrigins: z
      .array(
        z.string().refine((o) => o === "*" || originOf(o) === o.toLowerCase(), {
          message:
            'expected an origin like "https://app.example.com" (scheme, host, optional port; no path) or "*"',
        }),
      )
      .default([]),
    /** Longest wait for in-flight requests on SIGTERM before closing anyway. */
    drainTimeoutMs: z.number().int().nonnegative().default(10_000),
    logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    /** Log one line per request (at info). Off saves a few microseconds per request. */
    requestLogging: z.boolean().default(true),
    /** HTTP front processes (each loads its own copy of every model); processes × model threads must fit the cores. */
    processes: positiveInt.max(256).default(1),
    /**
     * Most models loaded at once; loading another first unloads the least recently used idle one,
     * or answers 503 MP_ERR_MODEL_CAPACITY (docs/Models-over-time.md#lazy-loading-and-eviction).
     */
    maxLoadedModels: positiveInt.max(100_000).optional(),
    /** Most bytes of loaded models (measured memory, else file size), with the same eviction. */
    maxLoadedBytes: positiveInt.optional(),
    /** Accept a layout whose multi-threaded models oversubscribe the cores (not recommended). */
    allowOversubscription: z.boolean().default(false),
    /** Default dollars per machine-hour for local models' cost per request (0: time is measured, cost 0). */
    pricePerHour: z.number().nonnegative().default(0),
    /**
     * all: HTTP and the models in one process (default). api: HTTP, validation, auth and the jobs
     * API; loads no weights and forwards predict requests to `runners`. runner: loads the models
     * and executes work (its own HTTP API answers the API tier; job workers pull from the store).
     */
    role: z.enum(["all", "api", "runner"]).default("all"),
    /**
     * role api: the runners' base URLs (http://host:port). `dns+http://name:port` expands to one
     * runner per address the name resolves to (a Kubernetes headless Service), re-resolved on every
     * health poll. Also MODELPORT_RUNNERS (comma-separated).
     */
    runners: z.array(z.string().min(1)).default([]),
    /** role api: how often each runner's health and models are polled. */
    runnerPollMs: positiveInt.max(60_000).default(1000),
    /** This process's name in logs, metrics and the X-Modelport-Instance header; default host:pid. */
    instanceId: z.string().min(1).max(128).optional(),
    /** Timeouts and the connection cap (docs/Guarantees.md, "Connections and request timeouts"). */
    connections: connectionsSchema.default(connectionsSchema.parse({})),
    /** Where models' captured request/response pairs go (docs/Capture.md); unset: no capture. */
    capture: captureDestinationSchema.optional(),
    /** Tensors through shared memory for clients on the same host; off by default. */
    sharedMemory: sharedMemorySchema.default(sharedMemorySchema.parse({})),
  })
  .strict()
  // Each HTTP process would keep its own regions: a region registered on one would be unknown to the next.
  .refine((s) => !s.sharedMemory.enabled || s.processes === 1, {
    message: "sharedMemory.enabled needs processes: 1 (each process would keep its own registered regions)",
    path: ["sharedMemory", "enabled"],
  });

const fsBlobsSchema = z
  .object({
    backend: z.literal("fs"),
    /** Folder for result blobs, relative to the working directory; blobs 0600, folders made 0700. */
    dir: z.string().min(1).default(".modelport/blobs"),
  })
  .strict();

const s3BlobsSchema = z
  .object({
    backend: z.literal("s3"),
    bucket: z.string().min(3),
    /** Key prefix inside the bucket. */
    prefix: z.string().default("modelport/"),
    region: z.string().default("us-east-1"),
    /** Any S3-compatible endpoint (MinIO, R2, a local test server); default: AWS. */
    endpoint: z.string().url().optional(),
    /** Path-style URLs (needed by most S3-compatible servers). */
    forcePathStyle: z.boolean().default(false),
    /** Lifetime of presigned GET URLs. */
    urlTtlSeconds: positiveInt.default(3600),
    /** Credentials come from the AWS SDK's usual chain (AWS_ACCESS_KEY_ID, profiles, roles). */
  })
  .strict();

/** The OpenAI Batch API (docs/Batch.md): its files and batches, run as jobs. */
export const batchesSchema = z
  .object({
    /** Largest file POST /v1/files takes (OpenAI's limit: 200 MB); beyond it 413 MP_ERR_FILE_TOO_LARGE. */
    maxFileBytes: positiveInt.default(200 * 1024 * 1024),
    /** Most requests (lines) in one batch file (OpenAI's limit: 50,000); beyond it 400 MP_ERR_FILE_INVALID. */
    maxFileLines: positiveInt.max(1_000_000).default(50_000),
    /** Priority of a batch's jobs: below interactive traffic and the default job priority (0). */
    priority: z.number().int().min(-1000).max(1000).default(-100),
    /** Requests submitted as jobs per turn of the event loop, so a large batch never blocks it. */
    submitChunk: positiveInt.max(10_000).default(100),
    /** How often each process looks at the batches still running (progress, expiry, a restart's leftovers). */
    checkMs: positiveInt.min(50).max(600_000).default(5000),
  })
  .strict();

export const jobsSchema = z
  .object({
    /** sqlite: an embedded file, created on first use; redis: shared by every process and machine. */
    store: z.enum(["sqlite", "redis"]).default("sqlite"),
    /** Redis URL for store: redis; default REDIS_URL, else redis://127.0.0.1:6379. */
    redisUrl: z
      .string()
      .regex(/^rediss?:\/\//, "expected a redis:// or rediss:// URL")
      .optional(),
    /** Key prefix in Redis, so several deployments can share one server. */
    redisPrefix: z.string().min(1).default("modelport:"),
    /** SQLite file, relative to the working directory; created 0600 (its missing folders 0700). */
    sqlitePath: z.string().min(1).default(".modelport/jobs.db"),
    /** Jobs run at once per model (each also goes through the model's batcher). */
    concurrency: positiveInt.max(1024).default(4),
    /**
     * Jobs one worker of a tensor model claims at once (one store call) and sends to the model
     * together, so its batcher sees them as one batch; each is leased and recorded on its own.
     */
    claimBatch: positiveInt.max(1024).default(32),
    /** Jobs one bulk submission (`{"jobs": [...]}`) may hold; beyond it 413 MP_ERR_JOB_BULK_TOO_LARGE. */
    maxBulkJobs: positiveInt.max(100_000).default(1000),
    maxAttempts: positiveInt.max(100).default(3),
    /** Per-attempt limit. */
    timeoutMs: positiveInt.default(300_000),
    /** A running job whose worker stops renewing its lease for this long goes back to the queue. */
    leaseMs: positiveInt.min(1000).default(30_000),
    /** Retry backoff: base × 2^(attempt−1), capped. */
    backoffBaseMs: positiveInt.default(1000),
    backoffMaxMs: positiveInt.default(60_000),
    /** Finished jobs and their results are purged after this long. */
    retentionMs: positiveInt.default(7 * 24 * 3600 * 1000),
    /** How long an Idempotency-Key keeps returning the same job. */
    idempotencyTtlMs: positiveInt.default(24 * 3600 * 1000),
    /** Results up to this size stay inline; larger ones go to the blob store. */
    inlineResultMaxBytes: positiveInt.default(256 * 1024),
    // Bounds on what one job may hold and how many may wait (413 / 503 beyond them).
    /** Largest stored job input (the predict body as JSON); beyond it 413 MP_ERR_JOB_PAYLOAD_TOO_LARGE. */
    maxInputBytes: positiveInt.default(4 * 1024 * 1024),
    /** Largest `metadata` (as JSON); beyond it 413 MP_ERR_JOB_PAYLOAD_TOO_LARGE. */
    maxMetadataBytes: positiveInt.default(16 * 1024),
    /** Jobs queued per model; beyond it 503 MP_ERR_JOB_QUEUE_FULL with Retry-After. */
    maxQueuedPerModel: positiveInt.default(10_000),
    /** Jobs one WebSocket may follow at once; beyond it an MP_ERR_JOB_SUBSCRIPTIONS_EXCEEDED frame. */
    maxSubscriptionsPerSocket: positiveInt.max(100_000).default(1000),
    /** SQLite: how long a store call keeps retrying (asynchronously) while another process holds the write lock, then 503 MP_ERR_JOB_STORE_UNAVAILABLE. */
    storeBusyRetryMs: z.number().int().nonnegative().max(60_000).default(5000),
    batches: batchesSchema.default(batchesSchema.parse({})),
    blobs: z
      .discriminatedUnion("backend", [fsBlobsSchema, s3BlobsSchema])
      .default({ backend: "fs", dir: ".modelport/blobs" }),
    webhooks: z
      .object({
        /** Signing secret: `whsec_<base64 key>` (Standard Webhooks) or a plain string used as raw
         * key bytes; default: MODELPORT_WEBHOOK_SECRET. */
        secret: z
          .string()
          .min(16)
          .refine((s) => !s.startsWith("whsec_") || whsecKeyBytes(s) >= 16, {
            message: "a whsec_ secret must be standard base64 of a key of at least 16 bytes",
          })
          .optional(),
        timeoutMs: positiveInt.default(5000),
        maxAttempts: positiveInt.max(50).default(6),
        /** Hosts, IPs or CIDRs allowed although not public unicast (default: none). */
        allowPrivate: z
          .array(z.string().min(1))
          .superRefine((entries, ctx) => {
            for (const message of allowPrivateProblems(entries)) ctx.addIssue({ code: "custom", message });
          })
          .default([]),
        /** Longest wait for resolving a callback host, at submission and at each attempt. */
        dnsTimeoutMs: positiveInt.max(60_000).default(3000),
      })
      .strict()
      .default({ timeoutMs: 5000, maxAttempts: 6, allowPrivate: [], dnsTimeoutMs: 3000 }),
  })
  .strict();

/** The origin (scheme://host[:port]) of an http(s) URL, as a browser writes it; undefined for anything else. */
function originOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.origin : undefined;
  } catch {
    return undefined;
  }
}

/** Bytes of key in a `whsec_<base64>` secret; 0 when the rest is not standard base64. */
function whsecKeyBytes(secret: string): number {
  const b64 = secret.slice("whsec_".length);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) return 0;
  return Buffer.from(b64, "base64").length;
}

export type JobsConfig = z.output<typeof jobsSchema>;

/** A model repository: DIR/NAME/VERSION/ folders (docs/Models-over-time.md). */
export const repositorySchema = z
  .object({
    /** The repository folder, relative to the config file. */
    dir: z.string().min(1),
    /** poll: new, changed and removed versions are picked up every pollMs; explicit: only the management API changes what is loaded after start-up. */
    mode: z.enum(["explicit", "poll"]).default("explicit"),
    /** How often poll mode rescans the folder. */
    pollMs: positiveInt.min(100).max(3_600_000).default(5000),
  })
  .strict();

export type RepositoryConfig = z.output<typeof repositorySchema>;

/** Which of a repository model's versions are loaded (as Triton's version_policy). */
export const versionPolicySchema = z.union([
  z.literal("all"),
  z.object({ latest: positiveInt.max(1000) }).strict(),
  z
    .object({ specific: z.array(z.string().regex(/^[1-9][0-9]{0,17}$/, "a version folder name")).min(1) })
    .strict(),
]);

export type VersionPolicy = z.output<typeof versionPolicySchema>;

/**
 * A repository model's own settings (DIR/NAME/model.yaml): any key of a `models` entry but the
 * name, path and version, which the folders give, plus the version policy.
 */
export const repositoryModelSchema = modelSchema
  .omit({ name: true, path: true, version: true })
  .partial()
  .extend({ versionPolicy: versionPolicySchema.default({ latest: 1 }) })
  .strict();

export const configSchema = z
  .object({
    server: serverSchema.default(serverSchema.parse({})),
    limits: serverLimitsSchema.default(serverLimitsSchema.parse({})),
    jobs: jobsSchema.default(jobsSchema.parse({})),
    models: z.array(modelSchema).default([]),
    repository: repositorySchema.optional(),
  })
  .strict()
  // The API tier may list none: it serves what its runners report.
  .refine((c) => c.models.length > 0 || c.repository !== undefined || c.server.role === "api", {
    message: "serve at least one model: list models, or give a repository",
    path: ["models"],
  });

export type ConfigInput = z.input<typeof configSchema>;
export type ModelConfigInput = z.input<typeof modelSchema>;

export interface ModelConfig {
  readonly name: string;
  /** "transformers" only as the runner settings of an embeddings model (src/lifecycle/local-tensor-model.ts). */
  readonly backend: "onnx" | "custom" | "transformers";
  /** Absolute path. */
  readonly path: string;
  readonly version: string;
  readonly sha256?: string;
  /** Where the expected sha256 came from (config key or manifest file), for error messages. */
  readonly sha256Source?: string;
  /** Absolute path of the golden file, when there is one. */
  readonly golden?: string;
  readonly tolerance: number;
  readonly threads: number;
  readonly limits: Readonly<z.output<typeof limitsSchema>>;
  readonly batching: Readonly<BatchingConfig>;
  readonly placement: "worker" | "process";
  readonly maxRssMb?: number;
  readonly device: "cpu" | "cuda";
  readonly options: Readonly<Record<string, unknown>>;
  readonly description?: string;
  /** Dollars per machine-hour (the model's own, else server.pricePerHour); for cost per request. */
  readonly pricePerHour?: number;
  /** Jobs are counted at this fraction of the price; absent: 1 (docs/Cost.md). */
  readonly batchPriceFactor?: number;
  /** "lazy": loaded on first use; absent: at start-up. */
  readonly load?: "eager" | "lazy";
  readonly idleUnloadMs?: number;
  /** Payload capture (docs/Capture.md); absent: none. */
  readonly capture?: Readonly<CaptureConfig>;
}

/** A model served through the LanguageModel interface (src/llm/language-model.ts), not a tensor runner. */
export interface LanguageModelConfig {
  readonly name: string;
  readonly backend: "llama-cpp" | "transformers" | "upstream";
  /** Absolute path of the model file or folder. */
  readonly path: string;
  readonly version: string;
  readonly sha256?: string;
  readonly sha256Source?: string;
  /** Absolute path of the golden file (src/lifecycle/text-golden.ts format), when there is one. */
  readonly golden?: string;
  /** Math threads; always passed to the library explicitly. */
  readonly threads: number;
  readonly limits: Readonly<z.output<typeof limitsSchema>>;
  readonly llm: Readonly<LlmConfig>;
  readonly options: Readonly<Record<string, unknown>>;
  readonly description?: string;
  /** backend transformers: batching of concurrent embedding requests (as for tensor models). */
  readonly batching?: Readonly<BatchingConfig>;
  /**
   * Cost per request (src/metrics/cost.ts): local models' machine time at pricePerHour (absent on
   * upstream models), plus tokens at the per-million prices where set.
   */
  readonly pricePerHour?: number;
  /** Jobs are counted at this fraction of the price; absent: 1. */
  readonly batchPriceFactor?: number;
  /** "lazy": loaded on first use; absent: at start-up. */
  readonly load?: "eager" | "lazy";
  readonly idleUnloadMs?: number;
  readonly pricePerMillionInputTokens?: number;
  readonly pricePerMillionOutputTokens?: number;
  /** backend upstream only. */
  readonly upstream?: Readonly<UpstreamConfig>;
  /** Payload capture (docs/Capture.md); absent: none. */
  readonly capture?: Readonly<CaptureConfig>;
}

export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** The gRPC port (src/grpc/); absent: no gRPC. */
  readonly grpcPort?: number;
  readonly apiKeys: readonly string[];
  /** The key file (absolute): named keys with roles, models and limits. */
  readonly keys?: string;
  /** The audit log file; absent: the server's log. */
  readonly auditLog?: string;
  /** Host names answered besides IP addresses and localhost; absent: not set (docs/Multi-tenant.md). */
  readonly allowedHosts?: readonly string[];
  /** Origins whose pages may send state-changing requests, besides the server's own. */
  readonly allowedOrigins: readonly string[];
  /** Keys that may also use the management routes. */
  readonly adminKeys: readonly string[];
  readonly maxLoadedModels?: number;
  readonly maxLoadedBytes?: number;
  readonly drainTimeoutMs: number;
  readonly logLevel: z.output<typeof serverSchema>["logLevel"];
  readonly requestLogging: boolean;
  readonly processes: number;
  readonly allowOversubscription: boolean;
  /** Default machine-hour price for cost per request; absent means 0. */
  readonly pricePerHour?: number;
  readonly role: "all" | "api" | "runner";
  readonly runners: readonly string[];
  readonly runnerPollMs: number;
  readonly instanceId?: string;
  readonly connections: Readonly<ConnectionsConfig>;
  /** Where captured request/response pairs go (docs/Capture.md); absent: nothing is captured. */
  readonly capture?: Readonly<CaptureDestinationConfig>;
  /** Tensors through shared memory for clients on the same host (docs/API.md, "Shared memory"). */
  readonly sharedMemory: Readonly<z.output<typeof sharedMemorySchema>>;
}

export interface Config {
  readonly server: ServerConfig;
  readonly limits: Readonly<z.output<typeof serverLimitsSchema>>;
  readonly jobs: Readonly<JobsConfig>;
  /** Tensor models (onnx, custom); with languageModels, the one catalogue (src/catalogue/). */
  readonly models: readonly ModelConfig[];
  /** Language models (llama-cpp, transformers, upstream); in the same catalogue. Absent = none. */
  readonly languageModels?: readonly LanguageModelConfig[];
  /** The model repository (absolute dir), when one is served. */
  readonly repository?: Readonly<RepositoryConfig>;
  /** The file the config came from, if any. */
  readonly source?: string;
}
