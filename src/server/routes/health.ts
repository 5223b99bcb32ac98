// Probes: /livez (the process answers), /readyz (every model, tensor and language, loaded and
// golden-checked, not draining; the job store's reachability and whether the blob store can be
// used reported beside it) and the Open Inference Protocol's /v2/health/live and /v2/health/ready.
// Probes need no key; what /readyz's body names depends on the key sent, if any.
import type { FastifyPluginAsync } from "fastify";
import { visibleModels } from "../../tenants/visibility.js";

/** Marks a probe route (plugins/auth.ts): no key, answered while draining, logged at debug. */
const probe = { config: { probe: true } };

/** How long a job-store check is reused: probes come every few seconds, from several places. */
const STORE_CHECK_MS = 2000;

export const healthRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  // The job store is reported, not required: a Redis outage must not take every pod out of the
  // load balancer (synchronous predicts do not need it), but /readyz says so.
  let storeCheck: { at: number; result: Promise<{ reachable: boolean; reason?: string }> } | undefined;
  const jobStore = () => {
    if (!storeCheck || performance.now() - storeCheck.at > STORE_CHECK_MS) {
      const result = Promise.race([
        ctx.jobs.counts().then(() => ({ reachable: true })),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error("no answer within 1 s")), 1000).unref(),
        ),
      ]).catch((err: Error) => ({ reachable: false, reason: err.message }));
      storeCheck = { at: performance.now(), result };
    }
    return storeCheck.result;
  };

  // The blob store likewise: reported with its code and what is wrong (a missing bucket, refused
  // credentials), so a misconfiguration shows here before the first large job result fails.
  type BlobCheck = { reachable: boolean; code?: string; reason?: string };
  let blobCheck: { at: number; result: Promise<BlobCheck> } | undefined;
  const blobStore = () => {
    if (!blobCheck || performance.now() - blobCheck.at > STORE_CHECK_MS) {
      const result = Promise.race([
        Promise.resolve()
          .then(() => ctx.blobs.check())
          .then((): BlobCheck => ({ reachable: true })),
        new Promise<never>((_, reject) =>
          setTimeout(
            () =>
              reject(
                Object.assign(new Error("no answer within 2 s"), { code: "MP_ERR_BLOB_STORE_UNAVAILABLE" }),
              ),
            2000,
          ).unref(),
        ),
      ]).catch((err: { code?: string; message?: string }) => ({
        reachable: false,
        code: err.code ?? "MP_ERR_BLOB_STORE_UNAVAILABLE",
        reason: String(err.message),
      }));
      blobCheck = { at: performance.now(), result };
    }
    return blobCheck.result;
  };

  const readiness = (visible?: (name: string) => boolean) => {
    const r = ctx.catalogue.readiness(visible);
    if (ctx.draining) return { ...r, ready: false, reasons: ["server is shutting down", ...r.reasons] };
    return r;
  };

  app.get("/livez", probe, async () => ({ live: true }));

  // The status is everyone's (probes carry no key). On a server with keys the body names models
  // only to a caller with a valid key, and then only those it may use (admin and metrics keys:
  // all); without one it gets the status and counts, and no reason (reasons quote model names,
  // paths and runner addresses).
  app.get("/readyz", probe, async (req, reply) => {
    const caller = ctx.tenants.identify(req.headers.authorization);
    const anonymous = ctx.tenants.required && caller === undefined;
    const r = readiness(anonymous ? undefined : visibleModels(caller, ctx.tenants.required));
    reply.code(r.ready ? 200 : 503);
    const [store, blobs] = await Promise.all([jobStore(), blobStore()]);
    ctx.metrics.jobStoreUp.set(store.reachable ? 1 : 0);
    const backend = ctx.config.jobs.blobs.backend;
    if (anonymous) {
      const all = ctx.catalogue.all();
      return {
        ready: r.ready,
        counts: { models: all.length, ready: all.filter((m) => m.ready).length },
        jobs: {
          store: ctx.config.jobs.store,
          reachable: store.reachable,
          blobs: { backend, reachable: blobs.reachable },
        },
      };
    }
    return { ...r, jobs: { store: ctx.config.jobs.store, ...store, blobs: { backend, ...blobs } } };
  });

  app.get("/v2/health/live", probe, async () => ({ live: true }));

  app.get("/v2/health/ready", probe, async (_req, reply) => {
    const r = readiness();
    reply.code(r.ready ? 200 : 503);
    return { ready: r.ready };
  });
};
