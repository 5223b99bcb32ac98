// Changing what is loaded while the server runs (docs/Repository.md), for admin keys only
// (plugins/admin.ts): the Open Inference Protocol's repository extension as Triton and KServe
// clients call it (index, load, unload), and native routes to promote a loaded version and to
// roll back to the one before.
import type { FastifyPluginAsync } from "fastify";
import { ModelportError } from "../../errors.js";
import { adminOnly } from "../plugins/admin.js";
import { errorHandler } from "../plugins/errors.js";
import { describeModel } from "./native.js";
import { describeLanguageModel } from "./openai.js";

interface ModelParams {
  model: string;
}

/** The OIP repository extension, answering errors in the OIP shape. */
const oipRepositoryRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.setErrorHandler(errorHandler("oip", ctx.config.limits.maxBodyBytes));
  app.addHook("preHandler", adminOnly(ctx.config.server));

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
  app.addHook("preHandler", adminOnly(ctx.config.server));
  const describe = (name: string) => {
    const m = ctx.catalogue.get(name);
    return m.kind === "language" ? describeLanguageModel(m) : describeModel(m);
  };

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
};

export const repositoryRoutes: FastifyPluginAsync = async (app) => {
  await app.register(oipRepositoryRoutes);
  await app.register(nativeRepositoryRoutes);
};
