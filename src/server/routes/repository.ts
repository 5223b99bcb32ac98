// Changing what is loaded while the server runs (docs/Models-over-time.md), for admin keys only
// (plugins/admin.ts): the Open Inference Protocol's repository extension as Triton and KServe
// clients call it (index, load, unload), and native routes to promote a loaded version and to
// roll back to the one before.
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { ShadowSpec } from "../../catalogue/served-model.js";
import { ModelportError } from "../../errors.js";
import { registerJsonParser } from "../json-body.js";
import { guardManagement } from "../plugins/admin.js";
import { errorHandler } from "../plugins/errors.js";
import { describeAny } from "./native.js";
import { toEveryRunner } from "./runner-management.js";

interface ModelParams {
  model: string;
}

/** Most bytes of a management request's JSON body, and what a 413 over it says. */
const MAX_BODY_BYTES = 64 * 1024;
const TOO_LARGE_ADVICE = "a management request's body is a small JSON object";

/** The management scopes' error handler: their own body limit, in `style`. */
const managementErrors = (style: "oip" | "native") => errorHandler(style, MAX_BODY_BYTES, TOO_LARGE_ADVICE);

/**
 * Management calls carry at most a small JSON object, and clients (Triton's among them) often send
 * `Content-Type: application/json` with an empty body: here that is `{}`, not a 400. The server's
 * depth limit and prototype-poisoning checks apply as on every JSON route (an API tier passes the
 * body on re-serialized, and JSON.stringify overflows the stack on deep nesting).
 */
function smallJsonBodies(app: FastifyInstance): void {
  registerJsonParser(app, {
    maxDepth: app.modelport.config.limits.maxJsonDepth,
    bodyLimit: MAX_BODY_BYTES,
    emptyIsObject: true,
  });
}

/** The OIP repository extension, answering errors in the OIP shape. */
const oipRepositoryRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.setErrorHandler(managementErrors("oip"));
  guardManagement(app);
  smallJsonBodies(app);

  // Body (optional): {"ready": true} lists only the versions ready now.
  app.post("/v2/repository/index", async (req) => {
    const body = req.body as { ready?: unknown } | undefined;
    if (body !== undefined && body !== null && (typeof body !== "object" || Array.isArray(body)))
      throw new ModelportError("MP_ERR_REQUEST_INVALID", "the body must be a JSON object or empty");
    if (body?.ready !== undefined && typeof body.ready !== "boolean")
      throw new ModelportError("MP_ERR_REQUEST_INVALID", "'ready' must be true or false");
    const all = ctx.catalogue.index();
    return body?.ready ? all.filter((e) => e.state === "READY") : all;
  });

  app.post<{ Params: ModelParams }>("/v2/repository/models/:model/load", async (req) => {
    refuseParameters(req.body);
    await ctx.catalogue.load(req.params.model);
    return {};
  });

  app.post<{ Params: ModelParams }>("/v2/repository/models/:model/unload", async (req) => {
    refuseParameters(req.body);
    await ctx.catalogue.unload(req.params.model);
    return {};
  });
};

/**
 * Triton's load accepts `parameters` (a config override, files to write): modelport loads only
 * what the repository holds, so a request that asks for more is refused rather than half-done.
 */
function refuseParameters(body: unknown): void {
  if (body === undefined || body === null) return;
  if (typeof body !== "object" || Array.isArray(body))
    throw new ModelportError("MP_ERR_REQUEST_INVALID", "the body must be a JSON object or empty");
  const params = (body as { parameters?: unknown }).parameters;
  const keys = params && typeof params === "object" ? Object.keys(params) : [];
  const unsupported = keys.filter((k) => k !== "unload_dependents");
  if (unsupported.length) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `parameters ${unsupported.join(", ")} are not supported: put the files in the repository, then load`,
      { param: "parameters" },
    );
  }
}

/** Native management: promote and roll back. */
const nativeRepositoryRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.setErrorHandler(managementErrors("native"));
  guardManagement(app);
  smallJsonBodies(app);
  const describe = (name: string) => describeAny(ctx.catalogue.get(name));

  app.post<{ Params: ModelParams; Body: { version?: unknown } | undefined }>(
    "/v1/models/:model/promote",
    async (req) => {
      const version = req.body?.version;
      if (typeof version !== "string" && typeof version !== "number")
        throw new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          "the body needs 'version' (a version folder name)",
          {
            param: "version",
          },
        );
      await ctx.catalogue.promote(req.params.model, String(version));
      return describe(req.params.model);
    },
  );

  app.post<{ Params: ModelParams }>("/v1/models/:model/rollback", async (req) => {
    const { from, to } = await ctx.catalogue.rollback(req.params.model);
    return { from, to, model: describe(req.params.model) };
  });

  // {"weights": {"2": 90, "3": 10}} splits unversioned calls; {"weights": null} ends the split.
  app.post<{ Params: ModelParams; Body: { weights?: unknown } | undefined }>(
    "/v1/models/:model/weights",
    async (req) => {
      const weights = req.body?.weights;
      if (
        weights !== null &&
        (typeof weights !== "object" || weights === undefined || Array.isArray(weights))
      )
        throw new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          'the body needs "weights": {"<version>": <weight>, ...} or null',
          { param: "weights" },
        );
      await ctx.catalogue.setWeights(req.params.model, weights as Record<string, number> | null);
      return describe(req.params.model);
    },
  );

  // {"version": "3", "sample": 0.1, "tolerance": 0.001} mirrors a sample; {"version": null} stops.
  app.post<{ Params: ModelParams; Body: Record<string, unknown> | undefined }>(
    "/v1/models/:model/shadow",
    async (req) => {
      const b = req.body ?? {};
      const model = ctx.catalogue.get(req.params.model);
      await ctx.catalogue.setShadow(
        req.params.model,
        b.version === null ? null : shadowSpec(b, model.config as { tolerance?: number }),
      );
      return describe(req.params.model);
    },
  );
};

/** The shadow settings of a request body, checked. */
function shadowSpec(b: Record<string, unknown>, config: { tolerance?: number }): ShadowSpec {
  const { version, sample = 1, tolerance = config.tolerance ?? 1e-5 } = b;
  if (typeof version !== "string" && typeof version !== "number")
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      'the body needs "version" (the version to shadow) or null',
      {
        param: "version",
      },
    );
  if (typeof sample !== "number" || !(sample > 0 && sample <= 1))
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      '"sample" must be a share of calls above 0 and at most 1',
      {
        param: "sample",
      },
    );
  if (typeof tolerance !== "number" || !(tolerance >= 0) || !Number.isFinite(tolerance))
    throw new ModelportError("MP_ERR_REQUEST_INVALID", '"tolerance" must be a number ≥ 0', {
      param: "tolerance",
    });
  return { version: String(version), sample, tolerance };
}

/** API tier: every management route goes to every runner (runner-management.ts). */
const runnerManagementRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  const pool = ctx.catalogue.pool!;
  app.setErrorHandler(managementErrors("native"));
  guardManagement(app);
  smallJsonBodies(app);
  const forward = (req: FastifyRequest, reply: FastifyReply) => toEveryRunner(pool, req, reply);
  await app.register(async (oip) => {
    oip.setErrorHandler(managementErrors("oip"));
    oip.post("/v2/repository/index", forward);
    oip.post("/v2/repository/models/:model/load", forward);
    oip.post("/v2/repository/models/:model/unload", forward);
  });
  for (const action of ["promote", "rollback", "weights", "shadow"])
    app.post<{ Params: ModelParams }>(`/v1/models/:model/${action}`, forward);
};

export const repositoryRoutes: FastifyPluginAsync = async (app) => {
  if (app.modelport.catalogue.pool) {
    await app.register(runnerManagementRoutes);
    return;
  }
  await app.register(oipRepositoryRoutes);
  await app.register(nativeRepositoryRoutes);
};
