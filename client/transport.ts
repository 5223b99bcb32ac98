// One HTTP call of the client, start to finish: the headers every request carries (API key,
// request id, deadline), the call's deadline and the caller's AbortSignal, retries by the rules
// of retry.ts, and redirects followed by hand so that the Authorization header never goes to
// another origin (a job result's presigned blob URL).
import { errorFromResponse, isModelportError, ModelportError } from "./errors.js";
import { type BackoffOptions, mayRetry, type RetryKind, retryDelay } from "./retry.js";
import { linkedController, sleep } from "./signals.js";

/** What every call takes. */
export interface CallOptions {
  /** Aborts the call (its fetch, a retry's wait); the call then rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * This call's deadline, retries included: sent as X-Request-Timeout-Ms (the time left, on each
   * attempt), and the fetch is aborted deadlineGraceMs after it (MP_ERR_CLIENT_TIMEOUT), so that
   * the server's own 504 can arrive first. Default: the client's timeoutMs (none: no deadline).
   */
  timeoutMs?: number;
  /** Sent as X-Request-Id: the server's log lines for the request carry it. */
  requestId?: string;
  /** Retries for this call (default: the client's `retries`). */
  retries?: number;
  /** Extra headers for this call. */
  headers?: Record<string, string>;
}

/** What onRetry hears before each retry's wait. */
export interface RetryInfo {
  method: string;
  path: string;
  /** 1 for the first retry. */
  retry: number;
  delayMs: number;
  error: ModelportError;
}

export interface TransportOptions {
  /** The server's base URL, such as http://127.0.0.1:8080 (a path prefix is kept). */
  baseUrl: string;
  /** Sent as Authorization: Bearer KEY, to the server's origin only. */
  apiKey?: string;
  /** The fetch to use (default: globalThis.fetch). */
  fetch?: typeof fetch;
  /** Every call's default deadline in ms (default: none). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 3). */
  retries?: number;
  backoff?: BackoffOptions;
  /** How long after a deadline the fetch is aborted (default 1,000 ms). */
  deadlineGraceMs?: number;
  /** Headers sent with every request to the server. */
  headers?: Record<string, string>;
  /** Called before each retry's wait (logging, metrics). */
  onRetry?: (info: RetryInfo) => void;
}

export interface RequestSpec {
  method: "GET" | "POST" | "DELETE";
  /** Starts with "/"; appended to the base URL. */
  path: string;
  query?: Record<string, string | number | undefined>;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  kind: RetryKind;
  /** Send X-Request-Timeout-Ms when the call has a deadline (default true). */
  deadlineHeader?: boolean;
  /**
   * `read` hands back the Response with its body unread: the caller's signal still aborts the
   * body after the call returns (the deadline covers the call up to the answer's headers).
   */
  stream?: boolean;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 5;
const MAX_TIMEOUT_HEADER = 3_600_000;

export class Transport {
  private readonly base: string;
  private readonly origin: string;
  private readonly fetchImpl: typeof fetch;

  constructor(readonly options: TransportOptions) {
    const url = new URL(options.baseUrl);
    this.base = url.href.replace(/\/+$/, "");
    this.origin = url.origin;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch: pass one as createClient({ fetch })");
    this.fetchImpl = (input, init) => f(input, init);
  }

  /** The absolute URL of a path under the base URL. */
  url(path: string, query?: RequestSpec["query"]): string {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) params.set(k, String(v));
    const qs = params.toString();
    return `${this.base}${path}${qs ? `?${qs}` : ""}`;
  }

  /**
   * Sends the request (again, as retry.ts allows) until a 2xx answer, which `read` consumes while
   * the deadline still runs. A non-2xx answer becomes a ModelportError.
   */
  async call<T>(spec: RequestSpec, opts: CallOptions, read: (res: Response) => Promise<T>): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? this.options.timeoutMs;
    const retries = opts.retries ?? this.options.retries ?? 3;
    const url = this.url(spec.path, spec.query);
    const { controller, dispose } = linkedController(opts.signal);
    const signal = controller.signal;
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    const timeoutError = () =>
      new ModelportError({
        code: "MP_ERR_CLIENT_TIMEOUT",
        message: `${spec.method} ${spec.path}: no answer within timeoutMs ${timeoutMs}`,
        status: 0,
        retryable: false,
        requestId: opts.requestId,
      });
    let keepLink = false;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(
            () => controller.abort(timeoutError()),
            timeoutMs + (this.options.deadlineGraceMs ?? 1000),
          );
    try {
      for (let attempt = 0; ; attempt++) {
        let err: ModelportError;
        try {
          const headers = this.headers(spec, opts, deadline);
          const res = await this.fetchFollowing(url, spec, headers, signal);
          if (!res.ok) throw await errorFromResponse(res, opts.requestId);
          const value = await read(res);
          keepLink = spec.stream === true;
          return value;
        } catch (raw) {
          if (signal.aborted) throw signal.reason;
          err = this.asError(raw, spec, opts.requestId);
        }
        if (attempt >= retries || !mayRetry(spec.kind, err)) throw err;
        const delayMs = retryDelay(attempt + 1, err, this.options.backoff);
        if (delayMs === undefined) throw err;
        if (deadline !== undefined && Date.now() + delayMs >= deadline) throw err;
        this.options.onRetry?.({
          method: spec.method,
          path: spec.path,
          retry: attempt + 1,
          delayMs,
          error: err,
        });
        await sleep(delayMs, signal);
      }
    } finally {
      clearTimeout(timer);
      if (!keepLink) dispose();
    }
  }

  private headers(
    spec: RequestSpec,
    opts: CallOptions,
    deadline: number | undefined,
  ): Record<string, string> {
    const h: Record<string, string> = {
      accept: "application/json",
      ...this.options.headers,
      ...spec.headers,
    };
    if (spec.body !== undefined && h["content-type"] === undefined) h["content-type"] = "application/json";
    if (this.options.apiKey) h.authorization = `Bearer ${this.options.apiKey}`;
    if (opts.requestId !== undefined) h["x-request-id"] = opts.requestId;
    if (deadline !== undefined && spec.deadlineHeader !== false) {
      const left = Math.ceil(deadline - Date.now());
      if (left <= 0) {
        throw new ModelportError({
          code: "MP_ERR_CLIENT_TIMEOUT",
          message: `${spec.method} ${spec.path}: the deadline passed before the request could be sent`,
          status: 0,
          retryable: false,
          requestId: opts.requestId,
        });
      }
      h["x-request-timeout-ms"] = String(Math.min(left, MAX_TIMEOUT_HEADER));
    }
    return { ...h, ...opts.headers };
  }

  /**
   * fetch with redirects followed here: to the server's own origin with every header, to any other
   * origin (a presigned blob URL) with Accept only. In a browser, where a manual redirect is opaque,
   * the request is sent again with redirect "follow": the Fetch standard drops Authorization on a
   * cross-origin redirect.
   */
  private async fetchFollowing(
    url: string,
    spec: RequestSpec,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<Response> {
    let current = url;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const own = new URL(current).origin === this.origin;
      const init: RequestInit = {
        method: hop === 0 ? spec.method : "GET",
        headers: own ? headers : { accept: headers.accept ?? "*/*" },
        redirect: "manual",
        signal,
      };
      if (hop === 0 && spec.body !== undefined) init.body = spec.body as BodyInit;
      const res = await this.fetchImpl(current, init);
      if (res.type === "opaqueredirect") return this.fetchImpl(current, { ...init, redirect: "follow" });
      const location = res.headers.get("location");
      if (!REDIRECTS.has(res.status) || location === null || spec.method !== "GET") return res;
      await res.body?.cancel().catch(() => {});
      current = new URL(location, current).href;
    }
    throw new ModelportError({
      code: "MP_ERR_CLIENT_HTTP",
      message: `${spec.method} ${spec.path}: more than ${MAX_REDIRECTS} redirects`,
      status: 0,
      retryable: false,
    });
  }

  private asError(raw: unknown, spec: RequestSpec, requestId: string | undefined): ModelportError {
    if (isModelportError(raw)) return raw;
    if (raw instanceof SyntaxError || raw instanceof RangeError) {
      return new ModelportError({
        code: "MP_ERR_CLIENT_RESPONSE",
        message: `${spec.method} ${spec.path}: the answer could not be read: ${raw.message}`,
        status: 0,
        retryable: false,
        requestId,
        cause: raw,
      });
    }
    const cause = (raw as { cause?: { code?: unknown; message?: unknown } }).cause;
    const why = typeof cause?.code === "string" ? cause.code : String((raw as Error)?.message ?? raw);
    return new ModelportError({
      code: "MP_ERR_CLIENT_NETWORK",
      message: `${spec.method} ${spec.path}: the request failed without an answer (${why})`,
      status: 0,
      retryable: true,
      requestId,
      cause: raw,
    });
  }
}
