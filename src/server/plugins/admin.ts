// Who may change what is loaded (the management routes, routes/repository.ts): callers with an
// admin key (role admin in the key file, or server.adminKeys). A server with no key at all lets
// only callers on its own loopback interface in (a development server); any other server
// refuses management to every other key (tenants/tenants.ts checkAdmin).
import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from "fastify";
import { ModelportError } from "../../errors.js";
import { ANONYMOUS, type Principal } from "../../tenants/principal.js";
import type { Tenants } from "../../tenants/tenants.js";

export function adminOnly(tenants: Tenants): preHandlerHookHandler {
  return async (request: FastifyRequest) => {
    const principal = request.principal ?? ANONYMOUS;
    // An open server with admin keys: a caller who sent none is asked for one (401), not refused.
    if (principal === ANONYMOUS && tenants.hasAdmin && !request.headers.authorization) {
      throw new ModelportError(
        "MP_ERR_AUTH_REQUIRED",
        "this route needs an admin key: send Authorization: Bearer <key>",
      );
    }
    tenants.checkAdmin(principal, request.socket.remoteAddress);
  };
}

/**
 * Who made `request`, as the audit log names it: a valid key (a client key refused for want of
 * the admin role included: we know who), or on a server without keys a caller it lets manage it
 * (loopback), as `anonymous`. Undefined for a caller with no key or a wrong one: nobody we know.
 */
function knownCaller(request: FastifyRequest, tenants: Tenants): Principal | undefined {
  const principal = request.principal;
  if (principal === undefined) return undefined;
  return principal !== ANONYMOUS || tenants.mayManage(principal, request.socket.remoteAddress)
    ? principal
    : undefined;
}

/**
 * Makes every route of `app` (a management scope) admin-only and audited: each action of a known
 * caller answered (read-only index listings aside) becomes one audit line with the key, the
 * action, the model and the result. The line is written as the answer is sent, before any of it
 * reaches the client (not once it has gone out), so a client's actions one after another are
 * audited in their order. Refusals of callers without a valid key are counted in
 * modelport_management_refused_total{action,code} instead: each audit line is a synchronous write,
 * and nobody in particular made them.
 */
export function guardManagement(app: FastifyInstance): void {
  const ctx = app.modelport;
  app.addHook("preHandler", adminOnly(ctx.tenants));
  app.addHook("onSend", (request, reply, payload, done) => {
    const route = request.routeOptions.url ?? "";
    const action = route.slice(route.lastIndexOf("/") + 1);
    const caller = knownCaller(request, ctx.tenants);
    if (caller === undefined) {
      if (reply.statusCode >= 400 && action !== "")
        ctx.metrics.managementRefused.inc({
          action,
          code: request.errorCode ?? `HTTP ${reply.statusCode}`,
        });
    } else if (action !== "index" && action !== "") {
      const model = (request.params as { model?: string } | undefined)?.model;
      // Only a version the routes accept is named: any other body value is the client's, and
      // String() of an object without a callable toString throws.
      const version = (request.body as { version?: unknown } | undefined)?.version;
      const named = typeof version === "string" || typeof version === "number";
      const code = reply.statusCode < 400 ? "ok" : request.errorCode;
      ctx.audit({
        key: caller.name,
        action,
        ...(model !== undefined ? { target: named ? `${model}@${version}` : model } : {}),
        result: code ?? `HTTP ${reply.statusCode}`,
        status: reply.statusCode,
        requestId: request.id,
        ...(request.socket.remoteAddress ? { remoteAddress: request.socket.remoteAddress } : {}),
      });
    }
    done(null, payload);
  });
}
