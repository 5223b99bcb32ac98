// API-key auth: `Authorization: Bearer <key>` on every route except the probes and the routes
// marked public (`config: { public: true }`: the dashboard's static files, which hold no data and
// ask for the key themselves); a metrics key (role metrics) is let into GET /metrics only. The
// caller's named key (its principal: name, role, models, limits) rides on the request for every
// later step; the lookup itself is tenants/tenants.ts, shared with the gRPC surface.
import type { FastifyInstance } from "fastify";
import { urlPath } from "../../protocol/url-path.js";
import { checkRole, type Tenants } from "../../tenants/tenants.js";

export const PROBE_PATHS = new Set(["/livez", "/readyz", "/v2/health/live", "/v2/health/ready"]);

/** Whether `url` (a request's, query string and all) is a probe's. */
export function isProbe(url: string): boolean {
  return PROBE_PATHS.has(urlPath(url));
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** Served without a key (static files that hold no data: the dashboard's page and bundle). */
    public?: boolean;
  }
}

export function registerAuth(app: FastifyInstance, tenants: Tenants): void {
  // A callback hook, not an async one: no promise and no microtask turn on every request.
  app.addHook("onRequest", (request, _reply, done) => {
    if (isProbe(request.url) || request.routeOptions.config?.public === true) {
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
