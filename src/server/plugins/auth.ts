// API-key auth: `Authorization: Bearer <key>` on every route except the probes (`config: { probe:
// true }`) and the routes marked public (`config: { public: true }`: the dashboard's static files,
// which hold no data and ask for the key themselves); a metrics key (role metrics) is let into
// GET /metrics only. Both flags and /metrics are properties of the route the request matched,
// never a test of its URL: the router decodes the path (`/%6civez` reaches /livez), so a list of
// raw paths misses what the router reaches. The caller's named key (its principal: name, role,
// models, limits) rides on the request for every later step; the lookup itself is
// tenants/tenants.ts, shared with the gRPC surface.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { urlPath } from "../../protocol/url-path.js";
import { checkRole, type Tenants } from "../../tenants/tenants.js";

/** Whether `request` reached a probe route (routes/health.ts), however its path was spelled. */
export function isProbe(request: FastifyRequest): boolean {
  return request.routeOptions.config?.probe === true;
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** A liveness or readiness probe: no key, answered while draining, logged at debug. */
    probe?: boolean;
    /** Served without a key (static files that hold no data: the dashboard's page and bundle). */
    public?: boolean;
  }
}

export function registerAuth(app: FastifyInstance, tenants: Tenants): void {
  // A callback hook, not an async one: no promise and no microtask turn on every request.
  app.addHook("onRequest", (request, _reply, done) => {
    const config = request.routeOptions.config;
    if (config?.probe === true || config?.public === true) {
      done();
      return;
    }
    try {
      const principal = tenants.authenticate(request.headers.authorization);
      request.principal = principal;
      // A metrics key reads /metrics (and the probes, above) and nothing else, before any other check.
      if (request.routeOptions.url !== "/metrics")
        checkRole(principal, `${request.method} ${urlPath(request.url)}`);
    } catch (err) {
      done(err as Error);
      return;
    }
    done();
  });
}
