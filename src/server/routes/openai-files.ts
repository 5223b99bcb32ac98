// The OpenAI Files API, for batches (docs/Batch.md): POST /v1/files (multipart/form-data with
// `purpose` and `file`, as the openai SDK's files.create sends it), GET /v1/files, GET
// /v1/files/{id}, GET /v1/files/{id}/content, DELETE /v1/files/{id}. A client key sees and deletes
// only its own files; another key's id answers the same 404 as an unknown one. Errors in OpenAI's shape.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { FILE_PURPOSES } from "../../batches/batch-files.js";
import type { FilePurpose } from "../../batches/batch-store.js";
import { fileObject, listObject } from "../../batches/batch-view.js";
import { ModelportError } from "../../errors.js";
import type { AppContext } from "../context.js";
import { parseMultipart, readWholeBody } from "../multipart-body.js";
import { errorHandler } from "../plugins/errors.js";
import { jobScope } from "./jobs.js";

/** Room for the form around the file (boundaries, part headers, the purpose field). */
const FORM_OVERHEAD_BYTES = 64 * 1024;

interface FileParams {
  id: string;
}

/** `limit` (1..10000, default 10000 as OpenAI's), `after` and `purpose` of a list request. */
export function pageQuery(
  query: { limit?: string; after?: string },
  defaultLimit: number,
  maxLimit: number,
): { limit: number; after?: string } {
  const limit = query.limit === undefined ? defaultLimit : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > maxLimit) {
    throw new ModelportError("MP_ERR_REQUEST_INVALID", `limit must be an integer from 1 to ${maxLimit}`, {
      param: "limit",
    });
  }
  return { limit, ...(query.after ? { after: query.after } : {}) };
}

/** An admin changing another key's file or batch is an admin action: it goes to the audit log, as for jobs. */
export function auditForeign(
  ctx: AppContext,
  req: FastifyRequest,
  owner: string | undefined,
  action: string,
  target: string,
): void {
  const p = req.principal;
  if (p?.role === "admin" && owner !== undefined && owner !== p.name)
    ctx.audit({ key: p.name, action, target, result: "ok", requestId: req.id });
}

/** The key name whose files and batches the caller sees and changes (undefined: all), as for jobs. */
export function ownerOf(ctx: AppContext, req: FastifyRequest): string | undefined {
  return ctx.tenants.required ? req.principal?.name : undefined;
}

export const openAiFilesRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  const files = ctx.files;
  const settings = ctx.config.jobs.batches;
  app.setErrorHandler(errorHandler("openai", ctx.config.limits.maxBodyBytes));
  // Only this plugin's routes take multipart bodies.
  app.addContentTypeParser(
    "multipart/form-data",
    readWholeBody(() => files.tooLarge(settings.maxFileBytes + 1)),
  );

  app.post("/v1/files", { bodyLimit: settings.maxFileBytes + FORM_OVERHEAD_BYTES }, async (req) => {
    if (!Buffer.isBuffer(req.body)) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        "POST /v1/files takes a multipart/form-data body with the fields `purpose` and `file`",
        { param: "file" },
      );
    }
    const parts = parseMultipart(req.body, req.headers["content-type"]);
    const purpose = parts.find((p) => p.name === "purpose" && p.filename === undefined);
    const file = parts.find((p) => p.name === "file");
    if (!purpose)
      throw new ModelportError("MP_ERR_REQUEST_INVALID", 'the form has no "purpose" field', {
        param: "purpose",
      });
    if (!file)
      throw new ModelportError("MP_ERR_REQUEST_INVALID", 'the form has no "file" field', { param: "file" });
    const owner = ownerOf(ctx, req);
    const record = await files.upload({
      ...(owner !== undefined ? { owner } : {}),
      filename: file.filename ?? "file.jsonl",
      purpose: purpose.data.toString("utf8"),
      data: file.data,
    });
    return fileObject(record);
  });

  app.get<{ Querystring: { limit?: string; after?: string; purpose?: string; order?: string } }>(
    "/v1/files",
    async (req) => {
      const { purpose, order } = req.query;
      if (purpose !== undefined && !FILE_PURPOSES.includes(purpose as FilePurpose)) {
        throw new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          `purpose must be one of ${FILE_PURPOSES.join(", ")}`,
          {
            param: "purpose",
          },
        );
      }
      if (order !== undefined && order !== "desc") {
        throw new ModelportError("MP_ERR_REQUEST_INVALID", 'order must be "desc" (newest first)', {
          param: "order",
        });
      }
      const owner = jobScope(ctx, req);
      const page = await files.list({
        ...pageQuery(req.query, 10_000, 10_000),
        ...(owner !== undefined ? { owner } : {}),
        ...(purpose !== undefined ? { purpose: purpose as FilePurpose } : {}),
      });
      return listObject(page.items, page.hasMore, fileObject);
    },
  );

  app.get<{ Params: FileParams }>("/v1/files/:id", async (req) =>
    fileObject(await files.get(req.params.id, jobScope(ctx, req))),
  );

  app.get<{ Params: FileParams }>("/v1/files/:id/content", async (req, reply) => {
    const file = await files.get(req.params.id, jobScope(ctx, req));
    return reply.type("application/jsonl").send(await files.content(file));
  });

  app.delete<{ Params: FileParams }>("/v1/files/:id", async (req) => {
    const file = await files.get(req.params.id, jobScope(ctx, req));
    await files.delete(file);
    auditForeign(ctx, req, file.owner, "file.delete", file.id);
    return { id: file.id, object: "file", deleted: true };
  });
};
