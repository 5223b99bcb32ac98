// What every gRPC call goes through, as onRequest/onResponse hooks do for HTTP: the request id
// (the client's x-request-id when sane) and the instance sent back in the initial metadata; the
// drain gate and the API key (health calls exempt, like the HTTP probes); a malformed message
// refused; the error as a status with its MP_ERR code; one metric sample and one log line.
import { type handleUnaryCall, Metadata, type ServerUnaryCall } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { BodyBudget } from "../body-budget.js";
import { CancelHandle } from "../cancel.js";
import type { Catalogue } from "../catalogue/catalogue.js";
import type { Config } from "../config/schema.js";
import { isModelportError, ModelportError } from "../errors.js";
import type { Metrics } from "../metrics/metrics.js";
import { INSTANCE_HEADER, REQUEST_ID_HEADER } from "../protocol/headers.js";
import { requestIdFrom } from "../protocol/request-id.js";
import type { SharedMemoryRegions } from "../shared-memory/regions.js";
import { parseTraceParent, TRACEPARENT, TRACESTATE, type TraceParent } from "../telemetry/propagation.js";
import { ATTR, KIND, parentOf, startSpan, tracing } from "../telemetry/spans.js";
import type { KeyLimiter } from "../tenants/key-limits.js";
import { ANONYMOUS, type Principal } from "../tenants/principal.js";
import { checkRole, mayUse, type Tenants } from "../tenants/tenants.js";
import { MalformedMessage, messageBytes, SERVICE_NAME } from "./proto.js";
import { errorStatus } from "./status.js";

/** The shared services a call reads; buildApp's AppContext has them. */
export interface GrpcContext {
  readonly config: Config;
  readonly catalogue: Catalogue;
  readonly metrics: Metrics;
  readonly tenants: Tenants;
  readonly limiter: KeyLimiter;
  /** limits.maxBodyBytesInFlight: a call's message counts from its start to its end. */
  readonly bodyBudget: BodyBudget;
  /** Registered shared memory regions (server.sharedMemory); undefined where the extension is off. */
  readonly sharedMemory: SharedMemoryRegions | undefined;
  /** Counts what a call used against its key (absent where usage is not recorded). */
  readonly recordUsage:
    | ((
        key: string,
        model: string,
        used: { rows: number; computeMs: number; promptTokens: number; completionTokens: number },
      ) => void)
    | undefined;
  /** True from SIGTERM on: readiness is false and new calls are refused. */
  readonly draining: boolean;
}

/** Everything the calls of one server share. */
export interface CallEnv {
  readonly context: GrpcContext;
  readonly instance: string;
  readonly log: Logger;
  /** Calls being answered now (the drain waits for them). */
  inFlight: number;
}

/** One call as an RPC implementation sees it. */
export interface Call {
  readonly requestId: string;
  readonly metadata: Metadata;
  /** Canceled when the client cancels the call or its deadline passes. */
  readonly cancel: CancelHandle;
  /** The call's gRPC deadline as a Date.now() time; Infinity when the client set none. */
  readonly deadline: number;
  /** The named key the call was let in with (anonymous on a server without keys, and on health calls). */
  readonly principal: Principal;
  /** Its server span's place in a trace (tracing on), else the caller's traceparent metadata as received. */
  readonly trace: TraceParent | undefined;
  /** The client's IP address (undefined where grpc-js cannot tell); read only when needed. */
  remoteAddress(): string | undefined;
}

/** The address in grpc-js's peer string, `<address>:<port>` (an IPv6 address without brackets). */
export function peerAddress(peer: string): string | undefined {
  const m = /^(.+):\d+$/.exec(peer);
  return m ? m[1] : undefined;
}

export interface RpcOptions<Req> {
  /** A health call: answered without an API key and while draining, like GET /v2/health/*. */
  open?: boolean;
  /** The model the request names, for the metrics' model label. */
  model?: (request: Req) => string;
  /** A call that carries tensors: its message counts in limits.maxBodyBytesInFlight while it runs. */
  body?: boolean;
}

/** The first text value of a metadata key (keys are lower case in gRPC metadata). */
export function metadataText(metadata: Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0];
  return typeof value === "string" ? value : undefined;
}

/**
 * A call canceled this close to its deadline was canceled by it: the client's deadline timer
 * fires before the server's by the time the call took to arrive, and sends a plain cancel.
 */
const DEADLINE_SLACK_MS = 1000;

function deadlineOf(call: ServerUnaryCall<unknown, unknown>): number {
  const d = call.getDeadline();
  return d instanceof Date ? d.getTime() : d;
}

/**
 * A grpc-js unary handler around `rpc`. The status counted in the metrics is the HTTP status of
 * the same outcome (200; the error's status; 499 for a call the client canceled, 504 for one whose
 * gRPC deadline passed), so one dashboard covers both surfaces.
 */
export function unary<Req extends object, Res>(
  env: CallEnv,
  name: string,
  rpc: (request: Req, call: Call) => Res | Promise<Res>,
  options: RpcOptions<Req> = {},
): handleUnaryCall<Req | MalformedMessage, Res> {
  const route = `grpc:${name}`;
  const path = `/${SERVICE_NAME}/${name}`;
  return (grpcCall, callback) => {
    const started = performance.now();
    const requestId = requestIdFrom(metadataText(grpcCall.metadata, REQUEST_ID_HEADER));
    const initial = new Metadata();
    initial.set(REQUEST_ID_HEADER, requestId);
    initial.set(INSTANCE_HEADER, env.instance);
    grpcCall.sendMetadata(initial);
    const cancel = new CancelHandle();
    let canceledAt = Number.NaN;
    const onCancelled = () => {
      canceledAt = Date.now();
      cancel.cancel();
    };
    grpcCall.once("cancelled", onCancelled);
    if (grpcCall.cancelled) onCancelled();
    const deadline = deadlineOf(grpcCall);
    env.inFlight++;
    // The RPC server span (semantic conventions: "package.Service/Method"), a child of the
    // caller's traceparent metadata when it sent one.
    const caller = parseTraceParent(
      metadataText(grpcCall.metadata, TRACEPARENT),
      metadataText(grpcCall.metadata, TRACESTATE),
    );
    const span = tracing.on
      ? startSpan(
          `${SERVICE_NAME}/${name}`,
          caller,
          {
            "rpc.system": "grpc",
            "rpc.service": SERVICE_NAME,
            "rpc.method": name,
            [ATTR.requestId]: requestId,
          },
          KIND.server,
        )
      : undefined;
    const trace = span ? parentOf(span) : caller;

    let release: (() => void) | undefined;
    let releaseBody: (() => void) | undefined;
    // The caller once let in (health calls: anonymous); undefined while it is not.
    let principal: Principal | undefined;
    const run = async (): Promise<Res> => {
      if (options.open) principal = ANONYMOUS;
      else {
        if (env.context.draining) {
          throw new ModelportError(
            "MP_ERR_SERVER_SHUTTING_DOWN",
            "the server is shutting down; retry on another instance",
          );
        }
        principal = env.context.tenants.authenticate(metadataText(grpcCall.metadata, "authorization"));
        // A metrics key reads /metrics over HTTP and calls nothing here.
        checkRole(principal, `gRPC ${name}`);
        // The key's request and concurrency limits hold here as on HTTP (429 → RESOURCE_EXHAUSTED).
        if (principal.limitsSet) release = (await env.context.limiter.admit(principal, false)).release;
      }
      const request = grpcCall.request;
      // The message was read before the call started; from here it is held until the call ends.
      if (options.body) releaseBody = env.context.bodyBudget.reserve(messageBytes(request));
      if (request instanceof MalformedMessage) {
        throw new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          `the message is not a valid ${name}Request (protobuf): ${request.reason}`,
        );
      }
      return rpc(request, {
        requestId,
        metadata: grpcCall.metadata,
        cancel,
        deadline,
        principal: principal ?? ANONYMOUS,
        trace,
        remoteAddress: () => peerAddress(grpcCall.getPeer()),
      });
    };

    const finish = (err: unknown, response?: Res) => {
      env.inFlight--;
      release?.();
      releaseBody?.();
      grpcCall.off("cancelled", onCancelled);
      const mp =
        err === undefined
          ? undefined
          : isModelportError(err)
            ? err
            : new ModelportError(
                "MP_ERR_SERVER_INTERNAL",
                "internal error; the server log has details under this request id",
              );
      // A canceled call's answer goes nowhere; count what the client saw.
      const httpStatus = grpcCall.cancelled
        ? canceledAt >= deadline - DEADLINE_SLACK_MS
          ? 504
          : 499
        : (mp?.status ?? 200);
      const request = grpcCall.request;
      const named =
        options.model && !(request instanceof MalformedMessage) ? options.model(request) : undefined;
      // Only served models' names label the metrics (a name from the request as is would make one
      // series per random name), and only for a caller that may use the model (as over HTTP).
      const who = principal ?? (env.context.tenants.required ? undefined : ANONYMOUS);
      const model =
        named !== undefined &&
        httpStatus !== 401 &&
        env.context.catalogue.has(named) &&
        who !== undefined &&
        mayUse(who, named)
          ? named
          : "";
      const seconds = (performance.now() - started) / 1000;
      env.context.metrics.requestDone(model, route, httpStatus, seconds);
      if (span) {
        if (model !== "") span.setAttribute(ATTR.model, model);
        span.setAttribute("rpc.grpc.status_code", mp ? errorStatus(mp).code : 0);
        if (httpStatus >= 500) span.setStatus({ code: 2, ...(mp ? { message: mp.code } : {}) });
        span.end();
      }
      logCall(env, options.open === true, {
        reqId: requestId,
        rpc: path,
        status: httpStatus,
        seconds,
        err,
        mp,
      });
      if (grpcCall.cancelled) return;
      if (mp) callback(errorStatus(mp));
      else callback(null, response);
    };
    run().then(
      (response) => finish(undefined, response),
      (err: unknown) => finish(err ?? new Error("rejected without a reason")),
    );
  };
}

/** One line per call, as the HTTP request log: health calls that succeed only at debug. */
function logCall(
  env: CallEnv,
  health: boolean,
  c: {
    reqId: string;
    rpc: string;
    status: number;
    seconds: number;
    err: unknown;
    mp: ModelportError | undefined;
  },
): void {
  if (!env.context.config.server.requestLogging) return;
  const fields = {
    reqId: c.reqId,
    method: "gRPC",
    url: c.rpc,
    status: c.status,
    ...(c.mp ? { code: c.mp.code } : {}),
    ms: Math.round(c.seconds * 100_000) / 100,
  };
  if (c.mp?.code === "MP_ERR_SERVER_INTERNAL") env.log.error({ ...fields, err: c.err }, "request failed");
  else if (c.status < 400 && health) env.log.debug(fields, "request completed");
  else env.log.info(fields, "request completed");
}
