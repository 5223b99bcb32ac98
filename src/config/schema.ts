// The one configuration schema: server settings, default limits and the models to serve.
// Parsed once at start-up (config/load.ts), then frozen.
import { z } from "zod";

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
  })
  .strict();

/** Per-model overrides of the limits; the body size limit is server-wide. */
const modelLimitsSchema = limitsSchema.omit({ maxBodyBytes: true }).partial().strict();

export const batchingSchema = z
  .object({
    /** Join concurrent requests into one inference; default: on when the model has a dynamic batch dim. */
    enabled: z.boolean().optional(),
    /** Largest batch sent to the model. */
    maxBatchRows: positiveInt.max(65_536).default(64),
    /** Longest a request waits for others to join it. */
    maxDelayMs: z.number().nonnegative().max(10_000).default(2),
    /** Batches in flight at once (2 lets the next batch travel while one computes). */
    maxInFlight: positiveInt.max(64).default(2),
    /** Adaptive: wait only while rows keep arriving and waiting pays; false: wait for a full batch or maxDelayMs. */
    adaptive: z.boolean().default(true),
  })
  .strict();

export type BatchingConfig = z.output<typeof batchingSchema>;

export const modelSchema = z
  .object({
    name: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/,
        "use letters, digits, '.', '_' or '-' (max 128), starting with a letter or digit",
      ),
    backend: z.enum(["onnx", "custom"]).default("onnx"),
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
    /** Where the runner lives: a worker thread of the server process, or a supervised child process. */
    placement: z.enum(["worker", "process"]).default("worker"),
    /** Child-process runners only: recycle the runner (after draining) when its RSS exceeds this many MiB. */
    maxRssMb: positiveInt.optional(),
    /** cpu, or cuda (onnxruntime's CUDA execution provider; needs a CUDA build and a GPU). */
    device: z.enum(["cpu", "cuda"]).default("cpu"),
    limits: modelLimitsSchema.optional(),
    batching: batchingSchema.default(batchingSchema.parse({})),
    options: z.record(z.string(), z.unknown()).default({}),
    description: z.string().optional(),
  })
  .strict();

export const serverSchema = z
  .object({
    host: z.string().min(1).default("127.0.0.1"),
    port: z.number().int().min(0).max(65535).default(8080),
    /** Bearer tokens accepted on every route but the probes; empty means no auth. */
    apiKeys: z.array(z.string().min(8, "API keys must be at least 8 characters")).default([]),
    /** Longest wait for in-flight requests on SIGTERM before closing anyway. */
    drainTimeoutMs: z.number().int().nonnegative().default(10_000),
    logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    /** Log one line per request (at info). Off saves a few microseconds per request. */
    requestLogging: z.boolean().default(true),
    /** HTTP front processes (each loads its own copy of every model); processes × model threads must fit the cores. */
    processes: positiveInt.max(256).default(1),
    /** Accept a layout whose multi-threaded models oversubscribe the cores (not recommended). */
    allowOversubscription: z.boolean().default(false),
  })
  .strict();

const fsBlobsSchema = z
  .object({
    backend: z.literal("fs"),
    /** Folder for result blobs, relative to the working directory. */
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
    /** SQLite file, relative to the working directory. */
    sqlitePath: z.string().min(1).default(".modelport/jobs.db"),
    /** Jobs run at once per model (each also goes through the model's batcher). */
    concurrency: positiveInt.max(1024).default(4),
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
    blobs: z
      .discriminatedUnion("backend", [fsBlobsSchema, s3BlobsSchema])
      .default({ backend: "fs", dir: ".modelport/blobs" }),
    webhooks: z
      .object({
        /** HMAC-SHA256 key for X-Modelport-Signature; default: MODELPORT_WEBHOOK_SECRET. */
        secret: z.string().min(16).optional(),
        timeoutMs: positiveInt.default(5000),
        maxAttempts: positiveInt.max(50).default(6),
        /** Hosts or CIDRs allowed although private, loopback or link-local (default: none). */
        allowPrivate: z.array(z.string().min(1)).default([]),
      })
      .strict()
      .default({ timeoutMs: 5000, maxAttempts: 6, allowPrivate: [] }),
  })
  .strict();

export type JobsConfig = z.output<typeof jobsSchema>;

export const configSchema = z
  .object({
    server: serverSchema.default(serverSchema.parse({})),
    limits: limitsSchema.default(limitsSchema.parse({})),
    jobs: jobsSchema.default(jobsSchema.parse({})),
    models: z.array(modelSchema).min(1, "serve at least one model"),
  })
  .strict();

export type ConfigInput = z.input<typeof configSchema>;
export type ModelConfigInput = z.input<typeof modelSchema>;

export interface ModelConfig {
  readonly name: string;
  readonly backend: "onnx" | "custom";
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
}

export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  readonly apiKeys: readonly string[];
  readonly drainTimeoutMs: number;
  readonly logLevel: z.output<typeof serverSchema>["logLevel"];
  readonly requestLogging: boolean;
  readonly processes: number;
  readonly allowOversubscription: boolean;
}

export interface Config {
  readonly server: ServerConfig;
  readonly limits: Readonly<z.output<typeof limitsSchema>>;
  readonly jobs: Readonly<JobsConfig>;
  readonly models: readonly ModelConfig[];
  /** The file the config came from, if any. */
  readonly source?: string;
}
