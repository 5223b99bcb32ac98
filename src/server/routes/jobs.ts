// The jobs API: submit (POST /v1/models/{m}/jobs; predict or an OpenAI route with Prefer:
// respond-async; a language model's job is an OpenAI request, {"endpoint", "body"}), status
// with long-poll, result (inline, redirect to a blob URL, or streamed), cancel, list, and an SSE
// stream of a job's state changes (each stream holds a stream slot and lives at most
// limits.maxStreamMs). Event streams and long-polls end when their key is revoked (key-channels.ts).
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { CancelHandle } from "../../cancel.js";
import type { ServedModel } from "../../catalogue/served-model.js";
import { isModelportError, ModelportError } from "../../errors.js";
import type { Job, JobStatus } from "../../jobs/job.js";
import { isFinal, type JobQueue, type SubmitJob } from "../../jobs/job-queue.js";
import { jobView } from "../../jobs/job-view.js";
import { checkEndpoint, type LanguageWork } from "../../jobs/language-work.js";
import { retryRefusal } from "../../jobs/retry-refusal.js";
import { checkAccess } from "../../tenants/tenants.js";
import type { AppContext } from "../context.js";

interface ModelParams {
  model: string;
}
interface JobParams {
  id: string;
}

const STATUSES: JobStatus[] = ["queued", "running", "succeeded", "failed", "canceled"];
const KEY = /^[\x21-\x7e]{1,255}$/;

function requireObject(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ModelportError("MP_ERR_REQUEST_INVALID", "the request body must be a JSON object");
  }
  return body as Record<string, unknown>;
}

/**
 * The key name whose jobs the caller sees and changes: its own, for any key but an admin one on a
 * server with keys; undefined (every job) for admin keys and on a server without keys.
 */
export function jobScope(ctx: AppContext, req: FastifyRequest): string | undefined {
  const p = req.principal;
  return p && p.role !== "admin" && ctx.tenants.required ? p.name : undefined;
}

/**
 * The job `id` if the caller may see it. Another key's job is "not found", exactly as a job that
 * does not exist, so job ids say nothing to other keys.
 * @throws ModelportError MP_ERR_JOB_NOT_FOUND
 */
export async function ownJob(queue: JobQueue, id: string, scope: string | undefined): Promise<Job> {
  const job = await queue.require(id);
  if (scope !== undefined && job.owner !== scope) throw queue.notFound(id);
  return job;
}

/** Whether the request asks to be answered as a job (RFC 7240 `Prefer: respond-async`). */
export function prefersAsync(req: FastifyRequest): boolean {
  const prefer = req.headers.prefer;
  return prefer !== undefined && /\brespond-async\b/i.test(String(prefer));
}

/** What a job body says besides its input: where to call back, what to echo, how urgent. */
interface JobEnvelope {
  callbackUrl?: string;
  metadata?: Record<string, unknown>;
  priority?: number;
}

function envelopeOf(body: Record<string, unknown>): JobEnvelope {
  const callbackUrl = body.callback_url;
  if (callbackUrl !== undefined && typeof callbackUrl !== "string") {
    throw new ModelportError("MP_ERR_REQUEST_INVALID", '"callback_url" must be a URL string');
  }
  const metadata = body.metadata;
  if (
    metadata !== undefined &&
    (typeof metadata !== "object" || metadata === null || Array.isArray(metadata))
  ) {
    throw new ModelportError("MP_ERR_REQUEST_INVALID", '"metadata" must be a JSON object');
  }
  const priority = body.priority;
  if (priority !== undefined && (!Number.isInteger(priority) || Math.abs(priority as number) > 1000)) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      '"priority" must be an integer from -1000 to 1000 (higher runs first)',
    );
  }
  return {
    ...(callbackUrl ? { callbackUrl } : {}),
    ...(metadata ? { metadata: metadata as Record<string, unknown> } : {}),
    ...(priority !== undefined ? { priority: priority as number } : {}),
  };
}

/** The language model `model` names (`name@version` too), or undefined for a tensor or unknown one. */
function languageModel(ctx: AppContext, model: string, version?: string): ServedModel | undefined {
  const { name } = ctx.catalogue.reference(model, version);
  const found = ctx.catalogue.has(name) ? ctx.catalogue.get(name) : undefined;
  return found?.kind === "language" ? found : undefined;
}

/**
 * A language-model job's work from its body `{"endpoint", "body"}`: the OpenAI body gets the
 * path's model (a different `body.model` is refused).
 * @throws ModelportError MP_ERR_REQUEST_INVALID naming the field; MP_ERR_LLM_CAPABILITY_UNSUPPORTED
 * for a tensor-shaped body, naming the routes the model serves.
 */
function languageWork(model: ServedModel, body: Record<string, unknown>): LanguageWork {
  if (body.endpoint === undefined && ("rows" in body || "inputs" in body)) {
    throw new ModelportError(
      "MP_ERR_LLM_CAPABILITY_UNSUPPORTED",
      `model '${model.name}' is a language model: a job for it is {"endpoint": ${servedEndpoints(model)}, "body": {…the OpenAI request…}}`,
      { model: model.name, param: "endpoint" },
    );
  }
  const endpoint = checkEndpoint(body.endpoint);
  const inner = body.body;
  if (typeof inner !== "object" || inner === null || Array.isArray(inner)) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `"body" must be the ${endpoint} request, a JSON object`,
      {
        param: "body",
      },
    );
  }
  const named = (inner as Record<string, unknown>).model;
  if (named !== undefined && named !== model.name) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `"body.model" is ${JSON.stringify(named)}; this job is for model '${model.name}' (leave it out, or name the same model)`,
      { param: "body.model" },
    );
  }
  return { endpoint, body: { ...(inner as Record<string, unknown>), model: model.name } };
}

/** The endpoints `model`'s capabilities serve, in words ("/v1/chat/completions" or …). */
function servedEndpoints(model: ServedModel): string {
  const c = model.capabilities;
  const served = [
    ...(c.chat ? ['"/v1/chat/completions"'] : []),
    ...(c.completion ? ['"/v1/completions"'] : []),
    ...(c.embeddings ? ['"/v1/embeddings"'] : []),
  ];
  return served.join(" or ") || "(none while the model is not loaded)";
}

function idempotencyKey(req: FastifyRequest): string | undefined {
  const key = req.headers["idempotency-key"];
  if (key !== undefined && (typeof key !== "string" || !KEY.test(key))) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      "Idempotency-Key must be 1 to 255 visible ASCII characters",
    );
  }
  return key;
}

/**
 * Accepts a job for `model` (or `name@version`) at `version` when the route names one: a
 * predict-shaped body for a tensor model, `{"endpoint", "body"}` for a language model, plus
 * callback_url, metadata and priority.
 */
export async function submitJob(
  ctx: AppContext,
  model: string,
  req: FastifyRequest,
  reply: FastifyReply,
  version?: string,
) {
  const body = requireObject(req.body);
  if (body.jobs !== undefined) return submitBulk(ctx, model, req, reply, body.jobs, version);
  const language = languageModel(ctx, model, version);
  if (!language && body.endpoint !== undefined) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `"endpoint" is for language models; model '${model}' takes {"rows": […]} or {"inputs": {…}}`,
      { param: "endpoint" },
    );
  }
  const work = language ? languageWork(language, body) : undefined;
  return enqueue(ctx, model, req, reply, body, envelopeOf(body), work, version);
}

/**
 * Accepts `{"jobs": [item, ...]}`: each item a job body as POST /v1/models/{m}/jobs takes one,
 * plus its own optional `idempotency_key`, stored together in one store call. Answers
 * `{"jobs": [...]}` in the items' order: `{id, status}` (with `idempotent_replayed: true` for a
 * replay), or `{"error": {...}}` for an item whose idempotency key was used with another request. A
 * malformed item refuses the whole request (400, naming `jobs[i]`), as do the limits.
 */
async function submitBulk(
  ctx: AppContext,
  model: string,
  req: FastifyRequest,
  reply: FastifyReply,
  items: unknown,
  version?: string,
) {
  if (!Array.isArray(items) || items.length === 0) {
    throw new ModelportError("MP_ERR_REQUEST_INVALID", '"jobs" must be a non-empty array of job bodies', {
      param: "jobs",
    });
  }
  const max = ctx.config.jobs.maxBulkJobs;
  if (items.length > max) {
    throw new ModelportError(
      "MP_ERR_JOB_BULK_TOO_LARGE",
      `"jobs" holds ${items.length} jobs; at most ${max} per request (jobs.maxBulkJobs): split it`,
      { param: "jobs", count: items.length, limit: max },
    );
  }
  if (req.headers["idempotency-key"] !== undefined) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      'a bulk submission takes an "idempotency_key" per job, not an Idempotency-Key header',
      { param: "Idempotency-Key" },
    );
  }
  const language = languageModel(ctx, model, version);
  const owner = ctx.tenants.required ? req.principal?.name : undefined;
  const maxActive = req.principal?.limits.queuedJobs;
  const submissions = items.map((item, i): SubmitJob => {
    const at = (err: unknown): never => {
      if (!isModelportError(err)) throw err;
      throw new ModelportError(err.code, `jobs[${i}]: ${err.message}`, { ...err.details, index: i });
    };
    try {
      const body = requireObject(item);
      if (!language && body.endpoint !== undefined) {
        throw new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          `"endpoint" is for language models; model '${model}' takes {"rows": […]} or {"inputs": {…}}`,
          { param: `jobs[${i}].endpoint` },
        );
      }
      const key = body.idempotency_key;
      if (key !== undefined && (typeof key !== "string" || !KEY.test(key))) {
        throw new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          '"idempotency_key" must be 1 to 255 visible ASCII characters',
          { param: `jobs[${i}].idempotency_key` },
        );
      }
      return {
        model,
        ...(version !== undefined ? { version } : {}),
        body,
        ...(language ? { work: languageWork(language, body) } : {}),
        ...(owner !== undefined ? { owner } : {}),
        ...(owner !== undefined && maxActive !== undefined ? { maxActive } : {}),
        ...(key !== undefined ? { idempotencyKey: key } : {}),
        ...envelopeOf(body),
        ...(req.trace ? { trace: req.trace } : {}),
      };
    } catch (err) {
      return at(err);
    }
  });
  const results = await ctx.jobs.submitMany(submissions);
  reply.code(results.some((r) => "job" in r && r.created) ? 202 : 200);
  // Ids and states only: a thousand whole job views would be most of the work of the request.
  return {
    jobs: results.map((r) =>
      "error" in r
        ? r.error.toJSON()
        : { id: r.job.id, status: r.job.status, ...(r.created ? {} : { idempotent_replayed: true }) },
    ),
  };
}

/**
 * Accepts an OpenAI request to a language model as a job (`Prefer: respond-async` on its route):
 * the body is the request itself, with no job fields.
 */
export async function submitLanguageJob(
  ctx: AppContext,
  model: string,
  work: LanguageWork,
  req: FastifyRequest,
  reply: FastifyReply,
) {
  checkAccess(req.principal, model, (n) => ctx.catalogue.has(n));
  return enqueue(ctx, model, req, reply, {}, {}, work);
}

async function enqueue(
  ctx: AppContext,
  model: string,
  req: FastifyRequest,
  reply: FastifyReply,
  body: Record<string, unknown>,
  envelope: JobEnvelope,
  work: LanguageWork | undefined,
  version?: string,
) {
  const key = idempotencyKey(req);
  const owner = ctx.tenants.required ? req.principal?.name : undefined;
  const maxActive = req.principal?.limits.queuedJobs;
  const { job, created } = await ctx.jobs.submit({
    model,
    ...(version !== undefined ? { version } : {}),
    body,
    ...(work ? { work } : {}),
    ...(owner !== undefined ? { owner } : {}),
    ...(owner !== undefined && maxActive !== undefined ? { maxActive } : {}),
    ...(key ? { idempotencyKey: key } : {}),
    ...envelope,
    ...(req.trace ? { trace: req.trace } : {}),
  });
  reply.code(created ? 202 : 200).header("location", `/v1/jobs/${job.id}`);
  if (!created) reply.header("idempotent-replayed", "true");
  return jobView(job);
}

function waitSeconds(raw: unknown): number {
  if (raw === undefined) return 0;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0 || n > 60) {
    throw new ModelportError("MP_ERR_REQUEST_INVALID", "wait must be a number of seconds from 0 to 60");
  }
  return n;
}

export const jobRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  const queue = ctx.jobs;
  const { maxStreamMs, streamHeartbeatMs } = ctx.config.limits;
  app.post<{ Params: ModelParams }>("/v1/models/:model/jobs", async (req, reply) =>
    submitJob(ctx, req.params.model, req, reply),
  );

  app.get<{ Params: JobParams; Querystring: { wait?: string } }>("/v1/jobs/:id", async (req) => {
    const wait = waitSeconds(req.query.wait);
    const job = await ownJob(queue, req.params.id, jobScope(ctx, req));
    if (wait === 0) return jobView(job);
    // A long-poll is a channel of its key: a revoked key's ends at once, with a 401.
    let revoked: ModelportError | undefined;
    const stop = new CancelHandle();
    const close = ctx.channels.open(req.principal, (reason) => {
      revoked = reason;
      stop.cancel();
    });
    try {
      const waited = await queue.waitFor(job.id, wait * 1000, job, stop);
      if (revoked) throw revoked;
      return jobView(waited);
    } finally {
      close();
    }
  });

  app.get<{ Params: JobParams }>("/v1/jobs/:id/result", async (req, reply) => {
    const result = await queue.result(await ownJob(queue, req.params.id, jobScope(ctx, req)));
    if ("json" in result) return reply.type("application/json; charset=utf-8").send(result.json);
    if ("url" in result) return reply.redirect(result.url, 302);
    return reply.type(result.contentType).send(result.data);
  });

  // An admin changing another key's job is an admin action: it goes to the audit log.
  const audited = (req: FastifyRequest, job: Job, action: string) => {
    const p = req.principal;
    if (p?.role === "admin" && job.owner !== undefined && job.owner !== p.name)
      ctx.audit({ key: p.name, action, target: job.id, result: "ok", requestId: req.id });
  };

  app.delete<{ Params: JobParams }>("/v1/jobs/:id", async (req) => {
    const job = await ownJob(queue, req.params.id, jobScope(ctx, req));
    const canceled = await queue.cancel(job.id);
    audited(req, job, "job.cancel");
    return jobView(canceled);
  });

  app.post<{ Params: JobParams }>("/v1/jobs/:id/retry", async (req) => {
    const job = await ownJob(queue, req.params.id, jobScope(ctx, req));
    const refused = retryRefusal(job);
    if (refused) throw refused;
    const retried = await queue.retry(job.id);
    audited(req, job, "job.retry");
    return jobView(retried);
  });

  app.get<{ Querystring: { status?: string; model?: string; cursor?: string; limit?: string } }>(
    "/v1/jobs",
    async (req) => {
      const { status, model, cursor } = req.query;
      if (status !== undefined && !STATUSES.includes(status as JobStatus)) {
        throw new ModelportError("MP_ERR_REQUEST_INVALID", `status must be one of ${STATUSES.join(", ")}`);
      }
      const limit = req.query.limit === undefined ? 100 : Number(req.query.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
        throw new ModelportError("MP_ERR_REQUEST_INVALID", "limit must be an integer from 1 to 1000");
      }
      const owner = jobScope(ctx, req);
      const page = await queue.list({
        limit,
        ...(owner !== undefined ? { owner } : {}),
        ...(status ? { status: status as JobStatus } : {}),
        ...(model ? { model } : {}),
        ...(cursor ? { cursor } : {}),
      });
      return {
        jobs: page.jobs.map(jobView),
        ...(page.nextCursor ? { next_cursor: page.nextCursor } : {}),
      };
    },
  );

  // Server-Sent Events: one "status" event per change, ending with the final state ("end"), or
  // after limits.maxStreamMs with a "reconnect" event; a keep-alive comment every
  // limits.streamHeartbeatMs finds dead clients.
  app.get<{ Params: JobParams }>("/v1/jobs/:id/events", async (req, reply) => {
    let job = await ownJob(queue, req.params.id, jobScope(ctx, req));
    const slot = ctx.streams.acquire(req.headers);
    const res = reply.raw;
    let closed = false;
    // A revoked key's stream ends with an error event naming why, rather than when the job does.
    let revoked: ModelportError | undefined;
    const stop = new CancelHandle();
    const closeChannel = ctx.channels.open(req.principal, (reason) => {
      revoked = reason;
      stop.cancel();
    });
    res.on("close", () => {
      closed = true;
      slot.release();
      closeChannel();
    });
    reply.hijack();
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
      "x-request-id": req.id,
    });
    let last = "";
    const send = (j: typeof job) => {
      const data = JSON.stringify(jobView(j));
      if (data === last) return;
      last = data;
      res.write(`event: status\ndata: ${data}\n\n`);
    };
    send(job);
    const endAt = Date.now() + maxStreamMs;
    let expired = false;
    let failure: ModelportError | undefined;
    try {
      while (!closed && !isFinal(job) && !queue.stopping && !revoked) {
        const left = endAt - Date.now();
        if (left <= 0) {
          expired = true;
          break;
        }
        job = await queue.waitFor(job.id, Math.min(streamHeartbeatMs, left), job, stop);
        if (revoked) break;
        if (!closed) {
          send(job);
          if (!isFinal(job)) res.write(": keep-alive\n\n");
        }
      }
    } catch (err) {
      req.log.warn({ err }, "job event stream ended early");
      failure = isModelportError(err)
        ? err
        : new ModelportError("MP_ERR_JOB_STORE_UNAVAILABLE", "the job could not be read");
    } finally {
      slot.release();
      closeChannel();
    }
    if (closed) return;
    failure ??= revoked;
    if (failure) {
      // The job is not final: say why the stream ends (a store failure: reconnect; a revoked key: stop).
      res.end(`event: error\ndata: ${JSON.stringify({ code: failure.code, message: failure.message })}\n\n`);
    } else if (expired) {
      // The job goes on; the client opens a new stream (EventSource does so by itself after `retry`).
      res.end(
        `retry: 1000\nevent: reconnect\ndata: ${JSON.stringify({ reason: "max_stream_duration", max_stream_ms: maxStreamMs })}\n\n`,
      );
    } else {
      res.end("event: end\ndata: {}\n\n");
    }
  });
};
