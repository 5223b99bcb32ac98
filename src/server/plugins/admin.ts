// Who may change what is loaded (the management routes, routes/repository.ts): callers with an
// admin key (server.adminKeys). A server with no admin key lets only callers on its own loopback
// interface in, and only when it has no API keys either (a development server); any other
// server refuses management until admin keys are configured.
import type { FastifyRequest, preHandlerHookHandler } from "fastify";
import type { Config } from "../../config/schema.js";
import { ModelportError } from "../../errors.js";
import { ApiKeys } from "../../protocol/api-keys.js";

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;

export function adminOnly(server: Config["server"]): preHandlerHookHandler {
  const admin = new ApiKeys(server.adminKeys);
  const open = server.apiKeys.length === 0 && !admin.required;
  return async (request: FastifyRequest) => {
    if (admin.required) {
      try {
        admin.check(request.headers.authorization);
      } catch (err) {
        if ((err as ModelportError).code === "MP_ERR_AUTH_REQUIRED") throw err;
        throw new ModelportError("MP_ERR_ADMIN_REQUIRED", "this route needs an admin key (server.adminKeys)");
      }
      return;
    }
    if (open && LOOPBACK.test(request.socket.remoteAddress ?? "")) return;
    throw new ModelportError(
      "MP_ERR_ADMIN_REQUIRED",
      open
        ? "management routes answer only loopback callers on a server without keys; configure server.adminKeys (--admin-key) to manage it remotely"
        : "management routes need an admin key; configure server.adminKeys (--admin-key)",
    );
  };
}
