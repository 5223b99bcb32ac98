// The jobs API: submit (POST /v1/models/{m}/jobs, or predict with Prefer: respond-async), status
// with long-poll, result (inline, redirect to a blob URL, or streamed), cancel, list, and an SSE
// stream of a job's state changes (each stream holds a stream slot and lives at most
// limits.maxStreamMs). Event streams and long-polls end when their key is revoked (key-channels.ts).
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { CancelHandle } from "../../cancel.js";
import { isModelportError, ModelportError } from "../../errors.js";
import type { Job, JobStatus } from "../../jobs/job.js";
import { isFinal, type JobQueue } from "../../jobs/job-queue.js";
import { jobView } from "../../jobs/job-view.js";
import { retryRefusal } from "../../jobs/retry-refusal.js";
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

/**
 * Accepts a job from a predict-shaped body plus callback_url, metadata and priority, for `model`
 * (or `name@version`) at `version` when the route names one.
 */
export async function submitJob(
  ctx: AppContext,
  model: string,
  req: FastifyRequest,
  reply: FastifyReply,
  version?: string,
) {
  const queue = ctx.jobs;
  const body = requireObject(req.body);
  const key = req.headers["idempotency-key"];
  if (key !== undefined && (typeof key !== "string" || !KEY.test(key))) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      "Idempotency-Key must be 1 to 255 visible ASCII characters",
    );
  }
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
  const owner = ctx.tenants.required ? req.principal?.name : undefined;
  const maxActive = req.principal?.limits.queuedJobs;
  const { job, created } = await queue.submit({
    model,
    ...(version !== undefined ? { version } : {}),
    body,
    ...(owner !== undefined ? { owner } : {}),
    ...(owner !== undefined && maxActive !== undefined ? { maxActive } : {}),
    ...(key ? { idempotencyKey: key } : {}),
    ...(callbackUrl ? { callbackUrl } : {}),
    ...(metadata ? { metadata: metadata as Record<string, unknown> } : {}),
    ...(priority !== undefined ? { priority: priority as number } : {}),
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
