// buildApp: the Fastify instance with every surface plugin, the shared services as one
// decoration (`app.modelport`), and the close order as Fastify hooks: preClose drains (readiness
// false, new requests 503, jobs and in-flight requests finish), onClose closes each resource.
// It never listens by itself: tests inject requests, cli/serve listens.
import { hostname } from "node:os";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { type Logger, pino } from "pino";
import { BodyBudget } from "../body-budget.js";
import { registerCaptureHooks } from "../capture/hook.js";
import type { CaptureQueue } from "../capture/queue.js";
import { createCaptureQueue } from "../capture/service.js";
import type { CaptureSink } from "../capture/sink.js";
import { Catalogue } from "../catalogue/catalogue.js";
import { bodyBudget, type Config } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import { JobQueue } from "../jobs/job-queue.js";
import type { JobStore } from "../jobs/job-store.js";
import { openJobStore, purgeExpired } from "../jobs/open-job-store.js";
import type { RunnerFactory } from "../lifecycle/local-tensor-model.js";
import { Metrics } from "../metrics/metrics.js";
import { resolveWebhookSecret } from "../notify/webhook.js";
import { INSTANCE_HEADER, OCTET_STREAM, REQUEST_ID_HEADER } from "../protocol/headers.js";
import { SHARED_MEMORY_DIR, SharedMemoryRegions } from "../shared-memory/regions.js";
import type { BlobStore } from "../storage/blob-store.js";
import { createBlobStore } from "../storage/create-blob-store.js";
import { TRACE_LOG_OPTIONS } from "../telemetry/log-fields.js";
import { flushTracing, startTracing } from "../telemetry/tracing.js";
import type { Principal } from "../tenants/principal.js";
import { checkAccess, mayUse } from "../tenants/tenants.js";
import { asciiBody } from "./ascii-body.js";
import { createAudit } from "./audit.js";
import { connectionOptions, limitConnections } from "./connections.js";
import type { AppContext, RequestUsage } from "./context.js";
import { registerJsonParser } from "./json-body.js";
import { KeyChannels } from "./key-channels.js";
import { readOctetBody } from "./octet-body.js";
import { isProbe, registerAuth } from "./plugins/auth.js";
import { registerBodyBudget } from "./plugins/body-budget.js";
import { registerBrowserGuard } from "./plugins/browser-guard.js";
import { frameworkError, registerErrorHandling } from "./plugins/errors.js";
import { registerLimits } from "./plugins/limits.js";
import { registerQueryCheck } from "./plugins/query.js";
import { RequestLogController, requestId } from "./plugins/request-log.js";
import { endRequestSpan, traceRequest } from "./plugins/tracing.js";
import { registerUsage, usageCost } from "./plugins/usage.js";
import { docsRoutes } from "./routes/docs.js";
import { healthRoutes } from "./routes/health.js";
import { jobRoutes } from "./routes/jobs.js";
import { jobsWebSocketRoute } from "./routes/jobs-ws.js";
import { metricsRoutes } from "./routes/metrics.js";
import { nativeRoutes } from "./routes/native.js";
import { oipRoutes } from "./routes/oip.js";
import { openaiRoutes } from "./routes/openai.js";
import { openAiEmbeddingsRoutes } from "./routes/openai-embeddings.js";
import { openaiResponsesRoutes } from "./routes/openai-responses.js";
import { repositoryRoutes } from "./routes/repository.js";
import { sharedMemoryRoutes } from "./routes/shared-memory.js";
import { uiRoutes } from "./routes/ui.js";
import { usageRoutes } from "./routes/usage.js";
import { StreamSlots } from "./stream-slots.js";
import { createTenancy } from "./tenancy.js";

export interface BuildOptions {
  /** Where relative job-store and blob paths start; default process.cwd(). */
  cwd?: string;
  jobStore?: JobStore;
  blobStore?: BlobStore;
  logger?: Logger;
  runnerFactory?: RunnerFactory;
  /** Payload capture (server.capture): a destination or S3 store of the caller's, a seeded sampler. */
  capture?: { sink?: CaptureSink; blobStore?: BlobStore; random?: () => number };
}

/** A listener other than the HTTP one that close() drains before the models close. */
export interface Surface {
  drain(deadline: number): Promise<void>;
}

export interface ModelportApp {
  readonly app: FastifyInstance;
  /** Every served model, tensor and language. */
  readonly catalogue: Catalogue;
  readonly jobs: JobQueue;
  readonly metrics: Metrics;
  readonly context: AppContext;
  /** The payload capture queue (docs/Capture.md), when server.capture is set. */
  readonly capture: CaptureQueue | undefined;
  /** Loads and golden-checks every model; never rejects (failures show in /readyz). */
  loadModels(): Promise<void>;
  /** This process's name (server.instanceId, default HOST:PID): on every response, metric and log line. */
  readonly instance: string;
  readonly logger: Logger;
  /** Requests currently being answered. */
  inFlight(): number;
  /**
   * Adds a surface that listens beside the HTTP one (the gRPC server, src/grpc/). It refuses new
   * calls itself once `context.draining` is set; close() then awaits `drain(deadline)` (a
   * Date.now() time, server.drainTimeoutMs away) beside the HTTP requests, and only then closes
   * the models. `drain` must have stopped its listener when it resolves.
   */
  addSurface(surface: Surface): void;
  /**
   * Graceful stop: readiness false at once, new requests 503, in-flight ones finish (up to
   * server.drainTimeoutMs), then the listener and the models close. Idempotent.
   */
  close(): Promise<void>;
}

export function buildApp(config: Config, options: BuildOptions = {}): ModelportApp {
  // Which tier and which process answered: on every response, metric and (split tiers) log line.
  const role = config.server.role;
  const instance = config.server.instanceId ?? `${hostname()}:${process.pid}`;
  const baseLogger = options.logger ?? pino({ level: config.server.logLevel, ...TRACE_LOG_OPTIONS });
  const logger = role === "all" ? baseLogger : baseLogger.child({ role, instance });
  const maxBodyBytes = config.limits.maxBodyBytes;
  const app: FastifyInstance = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new RequestLogController(config.server.requestLogging),
    genReqId: requestId,
    requestIdHeader: false,
    bodyLimit: maxBodyBytes,
    // Draining answers 503 MP_ERR_SERVER_SHUTTING_DOWN itself (the onRequest hook below), in
    // the route's error style; Fastify's own 503 would have no code.
    return503OnClosing: false,
    frameworkErrors: frameworkError,
    ...connectionOptions(config.server.connections),
  });
  limitConnections(app.server, config.server.connections.maxConnections);
  // JSON (nesting depth checked before parsing; see json-body.ts), and binary tensors as
  // application/octet-stream (read whole into memory of its own, within bodyLimit: octet-body.ts);
  // 415 otherwise.
  // Fastify's default text/plain parser would let strings through.
  app.removeContentTypeParser("text/plain");
  registerJsonParser(app, { maxDepth: config.limits.maxJsonDepth });
  app.addContentTypeParser(OCTET_STREAM, readOctetBody);
  const metrics = new Metrics();
  // Split tiers: every metric says which tier and process it is from. `instance_id`, since
  // Prometheus sets `instance` itself (the scrape target).
  if (role !== "all") metrics.registry.setDefaultLabels({ role, instance_id: instance });
  const catalogue = new Catalogue(config, {
    log: logger,
    metrics,
    ...(options.runnerFactory ? { runnerFactory: options.runnerFactory } : {}),
    ...(config.server.apiKeys[0] ? { runnerApiKey: config.server.apiKeys[0] } : {}),
  });
  const cwd = options.cwd ?? process.cwd();
  const jobStore = options.jobStore ?? openJobStore(config.jobs, cwd);
  const blobStore = options.blobStore ?? createBlobStore(config.jobs.blobs, cwd);
  const webhookSecret = resolveWebhookSecret(config.jobs.webhooks.secret);
  const auditLog = createAudit(config.server.auditLog, logger);
  const tenancy = createTenancy(config, { cwd, log: logger, metrics, instance });
  const { tenants, usage } = tenancy;
  // Whether a request's model may name its metric series: a caller let in that may use it (before
  // the auth hook ran, only on a server without keys, where everyone may).
  const mayLabel = (principal: Principal | undefined, name: string) =>
    principal === undefined ? !tenants.required : mayUse(principal, name);
  const recordUsage = usage
    ? (key: string, model: string, used: Omit<RequestUsage, "model">) =>
        usage.record(key, model, usageCost(catalogue, config, model, used))
    : undefined;
  const jobs = new JobQueue({
    ...(webhookSecret ? { webhookSecret } : {}),
    store: jobStore,
    blobs: blobStore,
    catalogue,
    config: config.jobs,
    log: logger,
    ...(usage
      ? {
          onUsage: (owner, model, used) =>
            usage.record(
              owner,
              model,
              usageCost(catalogue, config, model, { ...used, promptTokens: 0, completionTokens: 0 }),
            ),
        }
      : {}),
  });
  const context: AppContext = {
    config,
    catalogue,
    metrics,
    jobs,
    streams: new StreamSlots(config.limits),
    channels: new KeyChannels((p) => tenants.isRevoked(p)),
    tenants,
    limiter: tenancy.limiter,
    recordUsage,
    usage,
    audit: auditLog.audit,
    bodyBudget: new BodyBudget(bodyBudget(config.limits)),
    sharedMemory: config.server.sharedMemory.enabled
      ? new SharedMemoryRegions({ ...config.server.sharedMemory, dir: SHARED_MEMORY_DIR })
      : undefined,
    draining: false,
  };
  app.decorate("modelport", context);
  // A key the key file no longer holds (removed, or its hash changed) loses what it holds open:
  // its streams, WebSockets and long-polls end with MP_ERR_AUTH_KEY_REVOKED, and its shared memory
  // regions are unregistered (docs/Multi-tenant.md).
  const stopRevoking = tenants.onRevoke((names) => {
    context.channels.revoke(names);
    for (const name of names)
      context.sharedMemory
        ?.revoke(name)
        .catch((err) =>
          logger.warn({ err, key: name }, "shared memory: a revoked key's regions did not all close"),
        );
  });
  // Finished jobs and their results go after the retention time, so storage does not grow forever.
  const purgeTimer = setInterval(
    () => void purgeExpired(jobStore, blobStore, config.jobs.retentionMs, logger),
    600_000,
  );
  purgeTimer.unref();
  metrics.languageModelLoad = () =>
    catalogue.all().flatMap((m) => {
      const c = m.kind === "language" ? m.status().concurrency : undefined;
      return c ? [{ model: m.name, active: c.active, waiting: c.waiting }] : [];
    });
  let inFlight = 0;

  // Tracing (docs/Tracing.md) is on when the OTEL_* environment asks for it: the SDK loads once
  // per process, before the app is ready; a setting it cannot honour fails the start.
  const tracingStarted = startTracing();
  tracingStarted.catch(() => {});
  app.addHook("onReady", async () => {
    await tracingStarted;
  });
  // Every field a request may be given later (context.ts) is declared up front, so that all
  // requests share one object shape whichever of them a route sets: V8's optimized code for the
  // hooks and routes then never meets a request of a shape it has not seen.
  for (const field of ["trace", "span", "cancelHandle", "principal", "errorCode", "usage"] as const)
    app.decorateRequest(field, undefined);

  app.addHook("onRequest", (request, reply, done) => {
    traceRequest(request, reply);
    reply.header(REQUEST_ID_HEADER, request.id);
    reply.header(INSTANCE_HEADER, instance);
    if (context.draining && !isProbe(request)) {
      reply.header("connection", "close");
      done(
        new ModelportError(
          "MP_ERR_SERVER_SHUTTING_DOWN",
          "the server is shutting down; retry on another instance",
        ),
      );
      return;
    }
    inFlight++;
    // One listener per request: count it done, and if the client left before the answer,
    // cancel its queued work. `on`, not `once`: a response emits "close" once and is then dropped,
    // and `once` costs every request a bound wrapper and a listener removal (~1 us at
    // concurrency 64, docs/PERFORMANCE.md).
    const res = reply.raw;
    let counted = true;
    const finished = () => {
      if (counted) {
        counted = false;
        inFlight--;
      }
    };
    res.on("close", () => {
      finished();
      if (!res.writableFinished) {
        request.cancelHandle?.cancel();
        // 499: the client closed the connection before the answer (no onResponse comes).
        endRequestSpan(request, 499, "");
      }
    });
    // An upgrade's response is not the server's own: it never emits "close". A refused upgrade
    // (401, stream limit) ends when its answer is written; an accepted one when its socket closes.
    // A refused upgrade's socket has left the HTTP parser and no timeout covers it: close it.
    if (request.raw.headers.upgrade !== undefined) {
      const socket = request.raw.socket;
      res.once("finish", () => {
        finished();
        socket.end();
      });
      socket.once("close", finished);
    }
    done();
  });
  // Before auth and routing: a web page may neither reach a keyless server under a rebound DNS
  // name nor send state-changing requests from another origin (plugins/browser-guard.ts).
  registerBrowserGuard(app, {
    allowedHosts: config.server.allowedHosts,
    allowedOrigins: config.server.allowedOrigins,
    keyed: tenants.required,
  });
  // The model label names only served models, and never on a 401 (the caller was not let in):
  // a name taken from the URL as is would make one new series per random name, kept forever.
  // Nor a model the caller may not use: that answer was the 404 of a name that does not exist.
  app.addHook("onResponse", (request, reply, done) => {
    const route = request.routeOptions.url ?? "unmatched";
    const status = reply.statusCode;
    const name = (request.params as { model?: string } | undefined)?.model;
    const model =
      name !== undefined && status !== 401 && catalogue.has(name) && mayLabel(request.principal, name)
        ? name
        : "";
    metrics.requestDone(model, route, status, reply.elapsedTime / 1000);
    if (request.span !== undefined) endRequestSpan(request, status, model);
    done();
  });

  app.addHook("onSend", asciiBody);
  // Payload capture (docs/Capture.md): request/response pairs of models with `capture`, through a
  // bounded queue that never holds up or fails a request.
  const capture = config.server.capture
    ? createCaptureQueue(config.server.capture, {
        cwd,
        metrics,
        log: logger,
        ...(options.capture?.sink ? { sink: options.capture.sink } : {}),
        ...(options.capture?.blobStore ? { blobStore: options.capture.blobStore } : {}),
      })
    : undefined;
  if (capture)
    registerCaptureHooks(app, { catalogue, queue: capture, random: options.capture?.random ?? Math.random });
  registerAuth(app, tenants);
  registerBodyBudget(app, context.bodyBudget, maxBodyBytes);
  registerLimits(app, tenancy.limiter);
  registerQueryCheck(app);
  if (recordUsage) registerUsage(app, recordUsage);
  // A key limited to some models hears of no other: the same 404 as for a model that does not exist.
  const served = (name: string) => catalogue.has(name);
  app.addHook("preHandler", (request, _reply, done) => {
    const name = (request.params as { model?: string } | undefined)?.model;
    try {
      if (name !== undefined) checkAccess(request.principal, name, served);
    } catch (err) {
      done(err as Error);
      return;
    }
    done();
  });
  registerErrorHandling(app, maxBodyBytes);
  // Each surface is a plugin of one signature (FastifyPluginAsync) reading `app.modelport`; the
  // OIP and OpenAI ones answer errors in their protocol's shape from their own scope.
  for (const surface of [
    healthRoutes,
    nativeRoutes,
    oipRoutes,
    docsRoutes,
    metricsRoutes,
    jobRoutes,
    jobsWebSocketRoute,
    openaiRoutes,
    openaiResponsesRoutes,
    openAiEmbeddingsRoutes,
    repositoryRoutes,
    sharedMemoryRoutes,
    usageRoutes,
    uiRoutes,
  ])
    app.register(surface);

  // Drain: readiness false and new requests 503 at once; running jobs finish within the drain
  // time (the rest go back to the queue for the next process), in-flight requests up to the
  // deadline, on the HTTP listener and every added surface (gRPC) alike. Fastify then stops the
  // listener, and the onClose hooks close each resource.
  const surfaces: Surface[] = [];
  let drainDeadline = 0;
  app.addHook("preClose", async () => {
    context.draining = true;
    const deadline = Date.now() + config.server.drainTimeoutMs;
    drainDeadline = deadline;
    clearInterval(purgeTimer);
    await jobs.stop(config.server.drainTimeoutMs);
    const http = async () => {
      while (inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      if (inFlight > 0)
        logger.warn({ inFlight }, "drain timeout reached; closing with requests still in flight");
    };
    await Promise.all([http(), ...surfaces.map((s) => s.drain(deadline))]);
  });
  // Captured pairs still queued are written within the drain time (at least a second), before
  // the models close; what is left then is counted as dropped.
  if (capture) app.addHook("onClose", () => capture.close(Math.max(drainDeadline, Date.now() + 1000)));
  app.addHook("onClose", () => catalogue.closeAll());
  app.addHook("onClose", async () => context.sharedMemory?.close());
  app.addHook("onClose", () => jobStore.close());
  app.addHook("onClose", () => blobStore.close());
  app.addHook("onClose", () => {
    stopRevoking();
    return tenancy.close();
  });
  app.addHook("onClose", async () => auditLog.close());
  // The SDK is the process's (other apps may share it): export what this one traced, keep it running.
  app.addHook("onClose", () => flushTracing());
  let closing: Promise<void> | undefined;

  return {
    app,
    catalogue,
    metrics,
    context,
    jobs,
    capture,
    async loadModels() {
      await catalogue.startAll();
      // The API tier accepts jobs; the runners, which hold the models, execute them.
      if (role !== "api") {
        jobs.start();
        catalogue.onAdded((m) => jobs.startModel(m));
      }
      for (const h of catalogue.all()) {
        const s = h.status();
        if (s.loadMs !== undefined) metrics.modelLoadSeconds.set({ model: s.name }, s.loadMs / 1000);
        metrics.modelReady.set({ model: s.name }, s.ready ? 1 : 0);
      }
    },
    instance,
    logger,
    inFlight: () => inFlight,
    addSurface(surface) {
      surfaces.push(surface);
    },
    close() {
      context.draining = true;
      // Fastify runs preClose and onClose hooks only on an instance that has booted.
      closing ??= (async () => {
        await app.ready().then(
          () => undefined,
          () => undefined,
        );
        await app.close();
      })();
      return closing;
    },
  };
}
