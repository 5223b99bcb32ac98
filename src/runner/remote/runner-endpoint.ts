// One runner process as the API tier sees it: a keep-alive connection pool to its HTTP API,
// what its last health poll said (reachable? which models ready, with which signatures?) and
// how many forwarded requests it is working on, for least-loaded routing.
import http from "node:http";
import { INSTANCE_HEADER, POLL_HEADER } from "../../protocol/headers.js";
import { urlPath } from "../../protocol/url-path.js";
import { injectTrace, type TraceParent } from "../../telemetry/propagation.js";
import { KIND, parentOf, type Span, startSpan, tracing } from "../../telemetry/spans.js";
import type { ModelSignature, TensorSpec } from "../../tensor.js";

/** What a runner's health poll said of one model it serves (GET /v1/models). */
export interface RunnerModelReport {
  kind: "tensor" | "language";
  /** Its current version is loaded, checked and ready there. */
  ready: boolean;
  /** Not loaded there now, and its next call there loads it (lazy, idle-unloaded, evicted). */
  loadable: boolean;
  /** Its state there (unloaded: on purpose, not a failure). */
  state: string;
  /** The version that takes unversioned calls there. */
  version: string;
  /** Every loaded version that is ready there, with its signature (tensor models). */
  versions: Map<string, ModelSignature | undefined>;
  backend: string;
  /** Tensor models: the current version's signature. */
  signature?: ModelSignature;
  /** The runner's limits for the model (its describe), so the API tier checks what the runner checks. */
  limits?: Record<string, unknown>;
  /** Why the model is not ready on that runner. */
  reason?: string;
  /** Tensor models: the runner's batching settings, and the rows waiting in its queue when it polled. */
  batching?: RunnerBatching;
  /** Tensor models: how the runner loaded it (its describe's load_ms, memory_bytes, threads). */
  loaded?: { loadMs?: number; memoryBytes?: number; threads?: number };
}

export interface RunnerBatching {
  enabled?: boolean;
  maxBatchRows?: number;
  maxDelayMs?: number;
  queuedRows?: number;
}

export interface RunnerResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** No HTTP answer came: the connection was refused or reset, the time ran out, or the caller aborted. */
export class RunnerUnreachableError extends Error {
  constructor(
    message: string,
    readonly timedOut = false,
  ) {
    super(message);
    this.name = "RunnerUnreachableError";
  }
}

export interface RequestOptions {
  headers?: Record<string, string>;
  body?: Buffer;
  timeoutMs: number;
  /** Aborts the request (the client went away); rejects with RunnerUnreachableError. */
  onAbort?: (abort: () => void) => void;
  /**
   * The caller's place in a trace: the request is an HTTP client span under it (tracing on) and
   * carries its traceparent; with tracing off a caller's traceparent is passed on as received.
   */
  trace?: TraceParent | undefined;
}

export class RunnerEndpoint {
  /** Base URL without a trailing slash. */
  readonly url: string;
  private readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;
  private readonly auth: string | undefined;
  healthy = false;
  reason = "not polled yet";
  /** The runner's own name (its X-Modelport-Instance header). */
  instance: string | undefined;
  inFlight = 0;
  /** Health polls in a row that timed out. */
  private slowPolls = 0;
  /** Every model the runner serves, tensor and language, by name. */
  models = new Map<string, RunnerModelReport>();
  /** Models (and name@version) this runner refused as not ready or draining since the last poll: skip them until it says otherwise. */
  readonly refused = new Set<string>();

  constructor(url: string, apiKey: string | undefined) {
    this.url = url.replace(/\/+$/, "");
    const u = new URL(this.url);
    this.host = u.hostname.replace(/^\[|\]$/g, "");
    this.port = Number(u.port || 80);
    this.auth = apiKey ? `Bearer ${apiKey}` : undefined;
    // Keep-alive under the runner's own 65 s idle timeout, so a reused socket is never one it is closing.
    this.agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 1000, maxSockets: 256, timeout: 60_000 });
  }

  /**
   * The runner answers, and can serve `model` now: ready, or loaded by the call (a cold start
   * there); at `version` when given (then that version is loaded and ready there, or it is the
   * version a cold start would load).
   */
  serves(model: string, version?: string): boolean {
    const r = this.models.get(model);
    if (!this.healthy || !r || this.refused.has(version === undefined ? model : `${model}@${version}`))
      return false;
    if (version === undefined) return r.ready || r.loadable;
    return r.versions.has(version) || (r.loadable && r.version === version);
  }

  markDown(reason: string): void {
    this.healthy = false;
    this.reason = reason;
  }

  /**
   * Asks the runner which models it serves (GET /v1/models). Never throws: an unreachable or
   * draining runner becomes unhealthy with the reason.
   */
  async poll(timeoutMs: number): Promise<void> {
    try {
      const res = await this.request("GET", "/v1/models", { timeoutMs, headers: { [POLL_HEADER]: "1" } });
      if (res.status !== 200) {
        const why = res.status === 503 ? "draining or starting" : `GET /v1/models answered ${res.status}`;
        this.markDown(why);
        return;
      }
      const body = JSON.parse(res.body.toString("utf8")) as { models?: ListedModel[]; data?: OpenAiListed[] };
      const models = new Map<string, RunnerModelReport>();
      for (const m of body.models ?? []) models.set(m.name, tensorReport(m));
      for (const m of body.data ?? []) if (m.kind === "language") models.set(m.id, languageReport(m));
      this.models = models;
      this.refused.clear();
      this.healthy = true;
      this.reason = "";
    } catch (err) {
      // A refused or reset connection means the runner is gone: out at once. A slow answer may be
      // a busy runner: out after two in a row, so one slow poll under load does not flap it.
      const slow = err instanceof RunnerUnreachableError && err.timedOut;
      this.slowPolls = slow ? this.slowPolls + 1 : 0;
      if (!slow || this.slowPolls >= 2 || !this.healthy) this.markDown((err as Error).message);
      return;
    }
    this.slowPolls = 0;
  }

  /**
   * One HTTP request over the keep-alive pool.
   * @throws RunnerUnreachableError when no answer came (connection refused or reset, timeout, abort).
   */
  request(method: string, path: string, options: RequestOptions): Promise<RunnerResponse> {
    const span = tracing.on && options.trace ? this.clientSpan(method, path, options.trace) : undefined;
    const answer = this.send(method, path, options, span ? parentOf(span) : options.trace);
    if (span === undefined) return answer;
    return answer.then(
      (res) => {
        span.setAttribute("http.response.status_code", res.status);
        if (res.status >= 400) span.setStatus({ code: 2 });
        span.end();
        return res;
      },
      (err: unknown) => {
        span.recordException(err as Error);
        span.setStatus({ code: 2, message: (err as Error).message });
        span.end();
        throw err;
      },
    );
  }

  private clientSpan(method: string, path: string, parent: TraceParent): Span {
    return startSpan(
      method,
      parent,
      {
        "http.request.method": method,
        "url.full": `${this.url}${urlPath(path)}`,
        "server.address": this.host,
        "server.port": this.port,
      },
      KIND.client,
    );
  }

  private send(
    method: string,
    path: string,
    options: RequestOptions,
    trace: TraceParent | undefined,
  ): Promise<RunnerResponse> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { ...options.headers };
      if (this.auth && headers.authorization === undefined) headers.authorization = this.auth;
      if (options.body) headers["content-length"] = String(options.body.length);
      if (trace !== undefined) injectTrace(headers, trace);
      const req = http.request(
        { host: this.host, port: this.port, method, path, headers, agent: this.agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            clearTimeout(timer);
            this.noteInstance(res.headers);
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
          });
          res.on("error", (err) => fail(new RunnerUnreachableError(`${this.url}: ${err.message}`)));
        },
      );
      const fail = (err: RunnerUnreachableError) => {
        clearTimeout(timer);
        reject(err);
      };
      const timer = setTimeout(() => {
        req.destroy();
        fail(new RunnerUnreachableError(`${this.url}: no answer within ${options.timeoutMs} ms`, true));
      }, options.timeoutMs);
      req.on("error", (err) => fail(new RunnerUnreachableError(`${this.url}: ${err.message}`)));
      options.onAbort?.(() => {
        req.destroy();
        fail(new RunnerUnreachableError(`${this.url}: canceled`));
      });
      req.end(options.body);
    });
  }

  private noteInstance(headers: http.IncomingHttpHeaders): void {
    const id = headers[INSTANCE_HEADER];
    if (typeof id === "string") this.instance = id;
  }

  close(): void {
    this.agent.destroy();
  }
}

/** One loaded version as a runner lists it (version_status). */
interface ListedVersion {
  version: string;
  ready?: boolean;
  signature?: ModelSignature;
}

/** A tensor model of GET /v1/models `models` (the native description). */
interface ListedModel {
  name: string;
  /** The version taking unversioned calls. */
  version?: string;
  version_status?: ListedVersion[];
  backend?: string;
  status?: { ready?: boolean; state?: string; reason?: string; loadable?: boolean };
  inputs?: TensorSpec[];
  outputs?: TensorSpec[];
  batchable?: boolean;
  limits?: Record<string, unknown>;
  batching?: RunnerBatching;
  load_ms?: number;
  memory_bytes?: number;
  threads?: number;
}

/** An entry of GET /v1/models `data` (OpenAI's model list, with modelport's kind, state and versions). */
interface OpenAiListed {
  id: string;
  kind?: string;
  backend?: string;
  ready?: boolean;
  state?: string;
  loadable?: boolean;
  version?: string;
  version_status?: ListedVersion[];
}

/** The ready versions of a listing, each with its signature. */
function readyVersions(
  list: ListedVersion[] | undefined,
  current: { version: string; ready: boolean; signature?: ModelSignature },
): Map<string, ModelSignature | undefined> {
  const out = new Map<string, ModelSignature | undefined>();
  // A runner that lists no versions serves its current one.
  if (!Array.isArray(list)) return current.ready ? out.set(current.version, current.signature) : out;
  for (const v of list)
    if (v?.ready === true && typeof v.version === "string") out.set(v.version, v.signature);
  return out;
}

/** `from`'s fields named in `keys` (renamed as `keys` maps them) that are finite numbers: a runner is not trusted to be well formed. */
function numbers<K extends string>(
  from: Record<string, unknown>,
  keys: Record<string, K>,
): Partial<Record<K, number>> {
  const out: Partial<Record<K, number>> = {};
  for (const [k, as] of Object.entries(keys))
    if (typeof from[k] === "number" && Number.isFinite(from[k])) out[as] = from[k] as number;
  return out;
}

/** The batching fields of a runner's listing that have the expected types. */
function runnerBatching(b: RunnerBatching): RunnerBatching {
  const out: RunnerBatching = numbers(b as unknown as Record<string, unknown>, {
    maxBatchRows: "maxBatchRows",
    maxDelayMs: "maxDelayMs",
    queuedRows: "queuedRows",
  });
  if (typeof b.enabled === "boolean") out.enabled = b.enabled;
  return out;
}

function tensorReport(m: ListedModel): RunnerModelReport {
  const ready = m.status?.ready === true;
  const version = m.version ?? "1";
  const signature = { inputs: m.inputs ?? [], outputs: m.outputs ?? [], batchable: m.batchable === true };
  return {
    kind: "tensor",
    ready,
    loadable: m.status?.loadable === true,
    state: m.status?.state ?? (ready ? "ready" : "loading"),
    version,
    versions: readyVersions(m.version_status, { version, ready, signature }),
    backend: m.backend ?? "onnx",
    signature,
    ...(m.limits && typeof m.limits === "object" ? { limits: m.limits } : {}),
    ...(m.status?.reason ? { reason: m.status.reason } : {}),
    ...(m.batching && typeof m.batching === "object" ? { batching: runnerBatching(m.batching) } : {}),
    loaded: numbers(m as unknown as Record<string, unknown>, {
      load_ms: "loadMs",
      memory_bytes: "memoryBytes",
      threads: "threads",
    }),
  };
}

function languageReport(m: OpenAiListed): RunnerModelReport {
  const ready = m.ready === true;
  const version = m.version ?? "1";
  return {
    kind: "language",
    ready,
    loadable: m.loadable === true,
    state: m.state ?? (ready ? "ready" : "loading"),
    version,
    versions: readyVersions(m.version_status, { version, ready }),
    backend: m.backend ?? "llama-cpp",
  };
}
