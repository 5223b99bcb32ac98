// The jobs API from the client's side (docs/Jobs.md): submit with an Idempotency-Key (a random
// one by default, so that retries never make a second job), get, wait until final by long-poll
// or by the event stream, the result (following a redirect to a blob URL without the API key),
// cancel, retry, and the list page by page.
import { ModelportError } from "./errors.js";
import { linkedController, sleep } from "./signals.js";
import { readSse } from "./sse.js";
import type { CallOptions, Transport } from "./transport.js";
import type { Job, JobPage, JobQuery, ModelName, PredictBody, PredictResponse } from "./types.js";
import { randomUuid } from "./uuid.js";

export interface SubmitOptions extends CallOptions {
  /**
   * The job's Idempotency-Key: the same key and body return the same job. Default: a random UUID
   * made once per submit call, so the call's own retries never create a second job.
   */
  idempotencyKey?: string;
  /** POSTed the finished job (a webhook; docs/Jobs.md#webhooks). */
  callbackUrl?: string;
  /** Any JSON object, returned with the job as given. */
  metadata?: Record<string, unknown>;
  /** -1000 to 1000, higher runs first. */
  priority?: number;
}

export interface WaitOptions {
  signal?: AbortSignal;
  /**
   * "poll" (default): GET /v1/jobs/{id}?wait=S in a loop. "sse": follow GET /v1/jobs/{id}/events,
   * opened again when the server ends it early (reconnect, error) or the connection drops.
   */
  via?: "poll" | "sse";
  /** Give up after this long: rejects with MP_ERR_CLIENT_TIMEOUT (default: wait for ever). */
  timeoutMs?: number;
  /** Seconds each long-poll may wait on the server, 1 to 60 (default 30). */
  pollSeconds?: number;
  /** Sent as X-Request-Id on every request of the wait. */
  requestId?: string;
}

const FINAL = new Set(["succeeded", "failed", "canceled"]);

/** True once a job can change no more. */
export function isFinal(job: Pick<Job, "status">): boolean {
  return FINAL.has(job.status);
}

const json = <T>(res: Response) => res.json() as Promise<T>;
const path = (id: string) => `/v1/jobs/${encodeURIComponent(id)}`;

export class JobsClient<M> {
  constructor(private readonly transport: Transport) {}

  /** POST /v1/models/{model}/jobs: 202 with the job (200 when the key replays an earlier submit). */
  submit<K extends ModelName<M>>(model: K, body: PredictBody<M, K>, opts: SubmitOptions = {}): Promise<Job> {
    const { idempotencyKey, callbackUrl, metadata, priority, ...call } = opts;
    const payload: Record<string, unknown> = { ...(body as object) };
    if (callbackUrl !== undefined) payload.callback_url = callbackUrl;
    if (metadata !== undefined) payload.metadata = metadata;
    if (priority !== undefined) payload.priority = priority;
    return this.transport.call(
      {
        method: "POST",
        path: `/v1/models/${encodeURIComponent(model)}/jobs`,
        headers: { "idempotency-key": idempotencyKey ?? randomUuid() },
        body: JSON.stringify(payload),
        kind: "idempotent",
      },
      call,
      json<Job>,
    );
  }

  /** GET /v1/jobs/{id}. */
  get(id: string, opts: CallOptions = {}): Promise<Job> {
    return this.transport.call({ method: "GET", path: path(id), kind: "idempotent" }, opts, json<Job>);
  }

  /** Resolves to the job once it is final (succeeded, failed or canceled; check `status`). */
  async wait(id: string, opts: WaitOptions = {}): Promise<Job> {
    const { controller, dispose } = linkedController(opts.signal);
    let last: Job | undefined;
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(
            () =>
              controller.abort(
                new ModelportError({
                  code: "MP_ERR_CLIENT_TIMEOUT",
                  message: `job ${id} was not final within ${opts.timeoutMs} ms${last ? ` (last seen ${last.status})` : ""}`,
                  status: 0,
                  retryable: false,
                  requestId: opts.requestId,
                  details: last ? { job: last } : undefined,
                }),
              ),
            opts.timeoutMs,
          );
    const seen = (job: Job) => {
      last = job;
      return job;
    };
    try {
      const call = { signal: controller.signal, ...(opts.requestId ? { requestId: opts.requestId } : {}) };
      if (opts.via === "sse") return await this.waitSse(id, call, seen);
      return await this.waitPoll(id, call, seen, opts.pollSeconds ?? 30, opts.timeoutMs);
    } finally {
      clearTimeout(timer);
      dispose();
    }
  }

  private async waitPoll(
    id: string,
    call: CallOptions & { signal: AbortSignal },
    seen: (job: Job) => Job,
    pollSeconds: number,
    timeoutMs: number | undefined,
  ): Promise<Job> {
    const seconds = Math.min(60, Math.max(1, Math.ceil(pollSeconds)));
    const end = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    for (;;) {
      const left = end === undefined ? seconds : Math.ceil((end - Date.now()) / 1000);
      const wait = Math.min(seconds, Math.max(1, left));
      const started = Date.now();
      const job = seen(
        await this.transport.call(
          { method: "GET", path: path(id), query: { wait }, kind: "idempotent", deadlineHeader: false },
          // A long-poll that outlives its wait by far is a dead connection: end it, and poll again.
          { ...call, timeoutMs: wait * 1000 + 15_000 },
          json<Job>,
        ),
      );
      if (isFinal(job)) return job;
      // A server that answers at once (an old one without ?wait=) is not polled in a tight loop.
      if (Date.now() - started < 50) await sleep(250, call.signal);
    }
  }

  private async waitSse(
    id: string,
    call: CallOptions & { signal: AbortSignal },
    seen: (job: Job) => Job,
  ): Promise<Job> {
    for (;;) {
      // One stream, read inside the call: a dropped connection, an `error` event or a stream that
      // ends before `end` fails the call, and the transport opens it again with its backoff.
      const outcome = await this.transport.call(
        {
          method: "GET",
          path: `${path(id)}/events`,
          headers: { accept: "text/event-stream" },
          kind: "idempotent",
        },
        call,
        async (res): Promise<{ job: Job } | { reconnectMs: number }> => {
          if (!res.body) throw new ModelportError(noStream(id, "the answer has no body"));
          let job: Job | undefined;
          for await (const ev of readSse(res.body)) {
            if (ev.event === "status") {
              job = seen(JSON.parse(ev.data) as Job);
              if (isFinal(job)) return { job };
            } else if (ev.event === "end") {
              if (job && isFinal(job)) return { job };
              throw new ModelportError(noStream(id, "the stream ended before a final state"));
            } else if (ev.event === "reconnect") {
              return { reconnectMs: ev.retry ?? 1000 };
            } else if (ev.event === "error") {
              const e = JSON.parse(ev.data) as { code?: string; message?: string };
              throw new ModelportError({
                code: e.code ?? "MP_ERR_JOB_STORE_UNAVAILABLE",
                message: e.message ?? "the job's event stream failed",
                status: 503,
                retryable: true,
                requestId: res.headers.get("x-request-id") ?? undefined,
              });
            }
          }
          throw new ModelportError(noStream(id, "the stream ended before a final state"));
        },
      );
      if ("job" in outcome) return outcome.job;
      await sleep(outcome.reconnectMs, call.signal);
    }
  }

  /**
   * GET /v1/jobs/{id}/result as parsed JSON (the predict answer). A redirect to a presigned blob
   * URL is followed without the API key. Rejects with MP_ERR_JOB_NOT_FINISHED (409) before the
   * job is final and MP_ERR_JOB_NOT_SUCCEEDED when it failed or was canceled.
   */
  result<T = PredictResponse>(id: string, opts: CallOptions = {}): Promise<T> {
    return this.transport.call(
      { method: "GET", path: `${path(id)}/result`, kind: "idempotent" },
      opts,
      async (res) => {
        const type = res.headers.get("content-type") ?? "";
        if (!/json/i.test(type)) {
          await res.body?.cancel().catch(() => {});
          throw new ModelportError({
            code: "MP_ERR_CLIENT_RESPONSE",
            message: `job ${id}'s result is ${type || "untyped"}, not JSON: read it with jobs.resultResponse`,
            status: 0,
            retryable: false,
          });
        }
        return (await res.json()) as T;
      },
    );
  }

  /**
   * The result's Response with its body unread, for large or non-JSON results (stream it). The
   * signal still aborts the body; timeoutMs covers the call up to the answer's headers.
   */
  resultResponse(id: string, opts: CallOptions = {}): Promise<Response> {
    return this.transport.call(
      {
        method: "GET",
        path: `${path(id)}/result`,
        kind: "idempotent",
        headers: { accept: "*/*" },
        stream: true,
      },
      opts,
      async (res) => res,
    );
  }

  /** DELETE /v1/jobs/{id}: a queued job ends canceled at once, a running one is asked to stop. */
  cancel(id: string, opts: CallOptions = {}): Promise<Job> {
    return this.transport.call({ method: "DELETE", path: path(id), kind: "idempotent" }, opts, json<Job>);
  }

  /** POST /v1/jobs/{id}/retry: a failed or canceled job is queued again (not retried on a dropped connection). */
  retry(id: string, opts: CallOptions = {}): Promise<Job> {
    return this.transport.call(
      { method: "POST", path: `${path(id)}/retry`, kind: "unsafe" },
      opts,
      json<Job>,
    );
  }

  /** GET /v1/jobs, newest first: one page at a time, following next_cursor until the last. */
  async *list(query: JobQuery = {}, opts: CallOptions = {}): AsyncGenerator<JobPage> {
    let cursor = query.cursor;
    do {
      const page = await this.transport.call(
        {
          method: "GET",
          path: "/v1/jobs",
          query: { status: query.status, model: query.model, limit: query.limit, cursor },
          kind: "idempotent",
        },
        opts,
        json<JobPage>,
      );
      yield page;
      cursor = page.next_cursor;
    } while (cursor);
  }
}

function noStream(id: string, why: string) {
  return {
    code: "MP_ERR_CLIENT_NETWORK",
    message: `job ${id}'s event stream: ${why}`,
    status: 0,
    retryable: true,
  };
}
