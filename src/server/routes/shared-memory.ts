// The system shared-memory extension's registry routes, as Triton serves them: status, register
// and unregister of the caller's regions (src/shared-memory/regions.ts). Errors in the OIP shape.
import type { FastifyPluginAsync, FastifyRequest, onRequestHookHandler } from "fastify";
import { requireObject } from "../../protocol/decode-tensor.js";
import { callerRegions, type SharedMemoryCaller } from "../../shared-memory/tensors.js";
import { ANONYMOUS } from "../../tenants/principal.js";
import type { AppContext } from "../context.js";
import { errorHandler } from "../plugins/errors.js";

/**
 * Who asks, for the shared memory of a request: regions are kept per key (anonymous on a server
 * without keys, where only loopback callers may use them).
 */
export function sharedMemoryCaller(ctx: AppContext, req: FastifyRequest): SharedMemoryCaller {
  return {
    regions: ctx.sharedMemory,
    owner: (req.principal ?? ANONYMOUS).name,
    admit: () => ctx.tenants.checkSharedMemory(req.principal, req.socket.remoteAddress),
  };
}

interface Params {
  region?: string;
}

// Unregister takes no body; a client that still labels its empty body JSON is not refused for it.
const noBody: onRequestHookHandler = (req, _reply, done) => {
  if (req.headers["content-length"] === "0") delete req.headers["content-type"];
  done();
};

export const sharedMemoryRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.setErrorHandler(errorHandler("oip", ctx.config.limits.maxBodyBytes));

  for (const prefix of ["/v2/systemsharedmemory", "/v2/systemsharedmemory/region/:region"]) {
    app.get<{ Params: Params }>(`${prefix}/status`, async (req) => {
      const caller = sharedMemoryCaller(ctx, req);
      return callerRegions(caller).status(caller.owner, req.params.region);
    });
    // Without a region: every region of the caller's key.
    app.post<{ Params: Params }>(`${prefix}/unregister`, { onRequest: noBody }, async (req, reply) => {
      const caller = sharedMemoryCaller(ctx, req);
      await callerRegions(caller).unregister(caller.owner, req.params.region);
      return reply.code(200).send();
    });
  }

  app.post<{ Params: Required<Params> }>(
    "/v2/systemsharedmemory/region/:region/register",
    async (req, reply) => {
      const caller = sharedMemoryCaller(ctx, req);
      const regions = callerRegions(caller);
      const body = requireObject(req.body, "the request body");
      await regions.register(caller.owner, req.params.region, body.key, body.offset, body.byte_size);
      return reply.code(200).send();
    },
  );
};
