// What every route needs: the models, the metrics and whether the server is draining; and
// how a request's deadline and disconnect reach the model's queue.

import type { FastifyReply, FastifyRequest } from "fastify";
import type { BatchFiles } from "../batches/batch-files.js";
import type { BatchRunner } from "../batches/batch-runner.js";
import type { BodyBudget } from "../body-budget.js";
import { CancelHandle } from "../cancel.js";
import type { Catalogue } from "../catalogue/catalogue.js";
import type { Capability, ServedModel } from "../catalogue/served-model.js";
import type { Config } from "../config/schema.js";
import type { JobQueue } from "../jobs/job-queue.js";
import type { Metrics } from "../metrics/metrics.js";
import { COLD_START_HEADER, TIMEOUT_HEADER } from "../protocol/headers.js";
import { requestTimeoutMs } from "../protocol/request-timeout.js";
import type { SharedMemoryRegions } from "../shared-memory/regions.js";
import type { BlobStore } from "../storage/blob-store.js";
import type { TraceParent } from "../telemetry/propagation.js";
import { ATTR, SPAN, type Span, stage, tracing } from "../telemetry/spans.js";
import type { KeyLimiter } from "../tenants/key-limits.js";
import type { Principal } from "../tenants/principal.js";
import { checkAccess, type Tenants } from "../tenants/tenants.js";
import type { UsageRecorder } from "../tenants/usage.js";
import type { TensorMap } from "../tensor.js";
import type { Audit } from "./audit.js";
import type { KeyChannels } from "./key-channels.js";
import type { StreamSlots } from "./stream-slots.js";

/** One request's use of a model, filled in as it is answered. */
export interface RequestUsage {
  readonly model: string;
  rows: number;
  promptTokens: number;
  completionTokens: number;
  computeMs: number;
}

export interface AppContext {
  readonly config: Config;
  /** Every served model, tensor and language, local or remote. */
  readonly catalogue: Catalogue;
  readonly metrics: Metrics;
  readonly jobs: JobQueue;
  /** The OpenAI Files API's files (batch inputs and outputs). */
  readonly files: BatchFiles;
  /** The OpenAI Batch API's batches, run as jobs. */
  readonly batches: BatchRunner;
  /** Where large job results go (jobs.blobs): checked at start and by /readyz. */
  readonly blobs: BlobStore;
  /** Long-lived connections held (job event streams, job WebSockets), total and per API key. */
  readonly streams: StreamSlots;
  /** The long-lived channels each key holds, ended when a key file reload revokes the key. */
  readonly channels: KeyChannels;
  /** Every accepted key by name: authentication, roles, the models each may use (tenants/). */
  readonly tenants: Tenants;
  /** Each key's limits (tenants/key-limits.ts), for the surfaces that admit requests. */
  readonly limiter: KeyLimiter;
  /** The audit log of admin actions (audit.ts). */
  readonly audit: Audit;
  /** limits.maxBodyBytesInFlight: request bodies and gRPC messages held at once. */
  readonly bodyBudget: BodyBudget;
  /** Registered shared memory regions (server.sharedMemory); undefined where the extension is off. */
  readonly sharedMemory: SharedMemoryRegions | undefined;
  /** Counts what a request or call used against its key, priced (undefined where usage is not recorded). */
  readonly recordUsage: ((key: string, model: string, used: Omit<RequestUsage, "model">) => void) | undefined;
  /** Usage per key (tenants/usage.ts); undefined on a server without keys, which records none. */
  readonly usage: UsageRecorder | undefined;
  /** True from SIGTERM on: readiness is false and new requests are refused. */
  draining: boolean;
}

declare module "fastify" {
  interface FastifyInstance {
    /** The shared services every surface plugin reads (decorated once by buildApp). */
    readonly modelport: AppContext;
  }
  interface FastifyRequest {
    /** Set by requestCancel(): canceled when the client disconnects before its answer. */
    cancelHandle?: CancelHandle;
    /** The named key the request was let in with (set by the auth plugin; anonymous without keys). */
    principal?: Principal;
    /** The MP_ERR_* code the request was answered with, if it failed (set by the error handler). */
    errorCode?: string;
    /** What the request used of which model, where usage per key is recorded (plugins/usage.ts). */
    usage?: RequestUsage;
    /**
     * Where the request's work sits in a trace: its server span while tracing is on; with tracing
     * off, the caller's traceparent as received (passed on to runners, upstreams and jobs as is).
     */
    trace: TraceParent | undefined;
    /** The request's server span (tracing on only); ended with the response. */
    span: Span | undefined;
  }
}

/**
 * The model a request asks for, ready (catalogue.acquire): an unloaded model that loads on demand
 * is loaded first, within the request's deadline, and the response says how long that took
 * (X-Modelport-Cold-Start-Ms).
 */
export function acquire(
  ctx: AppContext,
  req: FastifyRequest,
  reply: FastifyReply,
  name: string,
  capability: Capability,
  version?: string,
): ServedModel | Promise<ServedModel> {
  checkAccess(req.principal, name, (n) => ctx.catalogue.has(n));
  if (ctx.usage) {
    const at = name.lastIndexOf("@");
    const model = at > 0 && !ctx.catalogue.has(name) ? name.slice(0, at) : name;
    req.usage = { model, rows: 0, promptTokens: 0, completionTokens: 0, computeMs: 0 };
  }
  return ctx.catalogue.acquire(name, capability, version, () => ({
    deadline:
      performance.now() + (requestTimeoutMs(req.headers[TIMEOUT_HEADER]) ?? ctx.config.limits.timeoutMs),
    onCold: (ms) => reply.header(COLD_START_HEADER, Math.round(ms)),
  }));
}

/**
 * Scores `inputs` with the request's deadline (X-Request-Timeout-Ms or the model's
 * limits.timeoutMs) and removes the work from the queue if the client disconnects; `onVersion`
 * hears the version that answered. The model's own promise is returned, not wrapped: a wrapper
 * would cost every request a promise and a microtask turn.
 */
export function infer(
  host: ServedModel,
  inputs: TensorMap,
  req: FastifyRequest,
  onVersion: (version: string) => void,
): Promise<TensorMap> {
  const timeoutMs = requestTimeoutMs(req.headers[TIMEOUT_HEADER]) ?? host.config.limits.timeoutMs;
  const usage = req.usage;
  if (usage) usage.rows += Object.values(inputs)[0]?.shape[0] ?? 0;
  return host.predict!(inputs, {
    deadline: performance.now() + timeoutMs,
    cancel: requestCancel(req),
    requestId: req.id,
    trace: req.trace,
    onVersion,
    onCompute: usage
      ? (ms: number) => {
          usage.computeMs += ms;
        }
      : undefined,
  });
}

const noop = () => {};

/**
 * Starts the encode stage of a request's answer; the function returned ends it (records the
 * stage's span and time). With tracing off, a no-op made once: nothing is built per request.
 */
export function encodeStage(req: FastifyRequest, host: ServedModel): () => void {
  if (!tracing.on) return noop;
  const encodeAt = performance.now();
  return () => stage(SPAN.encode, ATTR.encodeMs, req.trace, encodeAt, () => ({ [ATTR.model]: host.name }));
}

/** The request's cancellation handle (src/cancel.ts), canceled when its client disconnects before the answer. */
export function requestCancel(req: FastifyRequest): CancelHandle {
  req.cancelHandle ??= new CancelHandle();
  return req.cancelHandle;
}
