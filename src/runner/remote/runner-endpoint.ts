// One runner process as the API tier sees it: a keep-alive connection pool to its HTTP API,
// what its last health poll said (reachable? which models ready, with which signatures?) and
// how many forwarded requests it is working on, for least-loaded routing.
import http from "node:http";
import { INSTANCE_HEADER, POLL_HEADER } from "../../protocol/headers.js";
import type { ModelSignature, TensorSpec } from "../../tensor.js";

export interface RunnerModelReport {
  ready: boolean;
  version: string;
  signature: ModelSignature;
  /** Why the model is not ready on that runner. */
  reason?: string;
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
  models = new Map<string, RunnerModelReport>();
  /** Language models the runner serves (GET /v1/models `data`, kind "language"), and whether each is ready. */
  languageModels = new Map<string, boolean>();
  /** Models this runner refused as not ready or draining since the last poll: skip them until it says otherwise. */
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

  /** The model is ready on this runner and the runner answers. */
  serves(model: string): boolean {
    const ready = this.models.get(model)?.ready === true || this.languageModels.get(model) === true;
    return this.healthy && ready && !this.refused.has(model);
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
      this.models = new Map((body.models ?? []).map((m) => [m.name, report(m)]));
      const language = (body.data ?? []).filter((m) => m.kind === "language");
      this.languageModels = new Map(language.map((m) => [m.id, m.ready === true]));
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
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { ...options.headers };
      if (this.auth) headers.authorization = this.auth;
      if (options.body) headers["content-length"] = String(options.body.length);
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

interface ListedModel {
  name: string;
  /** The version taking unversioned calls (a runner with a repository may list several). */
  version?: string;
  versions?: string[];
  status?: { ready?: boolean; reason?: string };
  inputs?: TensorSpec[];
  outputs?: TensorSpec[];
  batchable?: boolean;
}

/** An entry of GET /v1/models `data` (OpenAI's model list, with modelport's kind and readiness). */
interface OpenAiListed {
  id: string;
  kind?: string;
  ready?: boolean;
}

function report(m: ListedModel): RunnerModelReport {
  return {
    ready: m.status?.ready === true,
    version: m.version ?? m.versions?.[0] ?? "1",
    signature: { inputs: m.inputs ?? [], outputs: m.outputs ?? [], batchable: m.batchable === true },
    ...(m.status?.reason ? { reason: m.status.reason } : {}),
  };
}
