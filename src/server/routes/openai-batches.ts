// The OpenAI Batch API (docs/Batch.md): POST /v1/batches, GET /v1/batches (newest first, `after`
// and `limit`), GET /v1/batches/{id}, POST /v1/batches/{id}/cancel, over batches/batch-runner.ts.
// A client key sees and cancels only its own batches, and a batch may use only the models its key
// may; another key's id answers the same 404 as an unknown one. Errors in OpenAI's shape.
import type { FastifyPluginAsync } from "fastify";
import { batchObject, listObject } from "../../batches/batch-view.js";
import { ModelportError } from "../../errors.js";
import { checkAccess } from "../../tenants/tenants.js";
import { errorHandler } from "../plugins/errors.js";
import { jobScope } from "./jobs.js";
import { auditForeign, ownerOf, pageQuery } from "./openai-files.js";

interface BatchParams {
  id: string;
}

export const openAiBatchesRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  const batches = ctx.batches;
  app.setErrorHandler(errorHandler("openai", ctx.config.limits.maxBodyBytes));
  const served = (name: string) => ctx.catalogue.has(name);

  app.post("/v1/batches", async (req) => {
    const body = req.body;
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      throw new ModelportError("MP_ERR_REQUEST_INVALID", "the request body must be a JSON object");
    }
    const owner = ownerOf(ctx, req);
    const maxActive = req.principal?.limits.queuedJobs;
    const batch = await batches.create({
      ...(owner !== undefined ? { owner } : {}),
      ...(owner !== undefined && maxActive !== undefined ? { maxActive } : {}),
      scope: jobScope(ctx, req),
      mayUse: (name) => {
        try {
          checkAccess(req.principal, name, served);
          return true;
        } catch {
          return false;
        }
      },
      body: body as Record<string, unknown>,
    });
    return batchObject(batch);
  });

  app.get<{ Querystring: { limit?: string; after?: string } }>("/v1/batches", async (req) => {
    const owner = jobScope(ctx, req);
    const page = await batches.list({
      ...pageQuery(req.query, 20, 100),
      ...(owner !== undefined ? { owner } : {}),
    });
    return listObject(page.items, page.hasMore, batchObject);
  });

  app.get<{ Params: BatchParams }>("/v1/batches/:id", async (req) =>
    batchObject(await batches.get(req.params.id, jobScope(ctx, req))),
  );

  app.post<{ Params: BatchParams }>("/v1/batches/:id/cancel", async (req) => {
    const batch = await batches.get(req.params.id, jobScope(ctx, req));
    const cancelled = await batches.cancel(batch);
    auditForeign(ctx, req, batch.owner, "batch.cancel", batch.id);
    return batchObject(cancelled);
  });
};
