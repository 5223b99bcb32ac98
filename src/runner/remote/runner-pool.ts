// The API tier's set of runners: polled for health every runnerPollMs, chosen least-loaded
// per request, and tried twice at most. A runner that does not answer leaves the rotation at
// once (and returns when a poll succeeds); an inference is idempotent, so a request that
// failed on one runner for a reason another runner would not share is retried once there.
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import type { Logger } from "pino";
import type { CancelHandle } from "../../cancel.js";
import type { ServerConfig } from "../../config/schema.js";
import { ModelportError, TRY_ELSEWHERE } from "../../errors.js";
import type { Metrics } from "../../metrics/metrics.js";
import { REQUEST_ID_HEADER } from "../../protocol/headers.js";
import type { TraceParent } from "../../telemetry/propagation.js";
import type { TensorMap } from "../../tensor.js";
import { decodeInferResponse, encodeInferRequest, errorFromRunner } from "./infer-codec.js";
import {
  type RunnerBatching,
  RunnerEndpoint,
  type RunnerModelReport,
  RunnerUnreachableError,
} from "./runner-endpoint.js";

export interface ForwardOptions {
  /** Absolute deadline on performance.now(). */
  deadline?: number;
  cancel?: CancelHandle;
  requestId?: string;
  /** Only runners holding this version ready (or loading it on this call) take the request. */
  version?: string;
  /** The caller's place in a trace: each forward is a client span under it, its traceparent sent. */
  trace?: TraceParent | undefined;
}

/** One runner's answer to a broadcast request. */
export interface BroadcastAnswer {
  runner: string;
  /** 0: no answer (error says why). */
  status: number;
  body: Buffer;
  error?: string;
}

/** What a runner answered: the outputs and the version that computed them. */
export interface Forwarded {
  outputs: TensorMap;
  version?: string;
}

export class RunnerPool {
  private readonly endpoints = new Map<string, RunnerEndpoint>();
  private readonly apiKey: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private rotation = 0;
  private closed = false;
  private readonly polledListeners: (() => void)[] = [];

  constructor(
    private readonly server: ServerConfig,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {
    // Runners share the config file, so they expect one of the same API keys.
    this.apiKey = server.apiKeys[0];
  }

  /** Polls at once, then every runnerPollMs; resolves after the first poll. */
  async start(): Promise<void> {
    await this.pollAll();
    this.timer = setInterval(() => void this.pollAll(), this.server.runnerPollMs);
    this.timer.unref();
  }

  all(): RunnerEndpoint[] {
    return [...this.endpoints.values()];
  }

  /** Calls `listener` after each round of polls (the runners' reports are fresh). */
  onPolled(listener: () => void): void {
    this.polledListeners.push(listener);
  }

  /** Polls every runner once (a poll already running is shared). */
  pollAll(): Promise<void> {
    this.polling ??= this.refresh().finally(() => {
      this.polling = undefined;
    });
    return this.polling;
  }

  private async refresh(): Promise<void> {
    const urls = await this.resolveRunners();
    if (this.closed) return;
    for (const url of urls) {
      if (!this.endpoints.has(url)) this.endpoints.set(url, new RunnerEndpoint(url, this.apiKey));
    }
    for (const [url, ep] of this.endpoints) {
      if (urls.includes(url)) continue;
      this.endpoints.delete(url);
      ep.close();
      this.log.info({ runner: url }, `runner ${url} is gone from DNS; removed`);
    }
    const timeout = Math.min(2000, this.server.runnerPollMs);
    await Promise.all(
      this.all().map(async (ep) => {
        const was = ep.healthy;
        await ep.poll(timeout);
        this.metrics?.runnerUp.set({ runner: ep.url }, ep.healthy ? 1 : 0);
        if (was && !ep.healthy)
          this.log.warn(
            { runner: ep.url, reason: ep.reason },
            `runner ${ep.url} left the rotation: ${ep.reason}`,
          );
        if (!was && ep.healthy)
          this.log.info({ runner: ep.url, instance: ep.instance }, `runner ${ep.url} is in the rotation`);
      }),
    );
    this.countQueuedRows();
    for (const listener of this.polledListeners) listener();
  }

  /**
   * modelport_runner_queue_depth_rows: per tensor model, the rows queued on the runners that
   * answer; a model no runner reports any more loses its series.
   */
  private countQueuedRows(): void {
    const gauge = this.metrics?.runnerQueueDepth;
    if (!gauge) return;
    const rows = new Map<string, number>();
    for (const ep of this.all()) {
      if (!ep.healthy) continue;
      for (const [name, report] of ep.models)
        if (report.kind === "tensor")
          rows.set(name, (rows.get(name) ?? 0) + (report.batching?.queuedRows ?? 0));
    }
    gauge.reset();
    for (const [model, n] of rows) gauge.set({ model }, n);
  }

  /** The configured URLs, with each dns+http:// URL expanded to one URL per address its name resolves to. */
  private async resolveRunners(): Promise<string[]> {
    const out: string[] = [];
    for (const raw of this.server.runners) {
      if (!raw.startsWith("dns+")) {
        out.push(raw.replace(/\/+$/, ""));
        continue;
      }
      const u = new URL(raw.slice(4));
      if (isIP(u.hostname)) {
        out.push(`${u.protocol}//${u.host}`);
        continue;
      }
      try {
        const addresses = await lookup(u.hostname, { all: true });
        for (const a of addresses) {
          const host = a.family === 6 ? `[${a.address}]` : a.address;
          out.push(`${u.protocol}//${host}${u.port ? `:${u.port}` : ""}`);
        }
      } catch (err) {
        // Keep what we had: a DNS hiccup must not empty the rotation.
        for (const url of this.endpoints.keys()) out.push(url);
        this.log.warn({ runners: raw, err: (err as Error).message }, `cannot resolve ${u.hostname}`);
      }
    }
    return [...new Set(out)];
  }

  /** Least in-flight among the runners serving `model` (at `version`), ties taken in turn; undefined when none. */
  pick(model: string, exclude?: RunnerEndpoint, version?: string): RunnerEndpoint | undefined {
    const candidates = this.all().filter((ep) => ep !== exclude && ep.serves(model, version));
    if (candidates.length === 0) return undefined;
    const start = this.rotation++ % candidates.length;
    let best = candidates[start]!;
    for (let i = 1; i < candidates.length; i++) {
      const ep = candidates[(start + i) % candidates.length]!;
      if (ep.inFlight < best.inFlight) best = ep;
    }
    return best;
  }

  /**
   * `model`'s batching as the runners that answer reported it at their last poll: the first one's
   * settings, and the rows waiting in all their queues. Undefined when none reports it.
   */
  batching(model: string): RunnerBatching | undefined {
    let out: RunnerBatching | undefined;
    for (const ep of this.all()) {
      const b = ep.healthy ? ep.models.get(model)?.batching : undefined;
      if (b === undefined) continue;
      out ??= { ...b, queuedRows: 0 };
      out.queuedRows! += b.queuedRows ?? 0;
    }
    return out;
  }

  /** How the first runner that answers and reports `model` loaded it (load time, memory, threads). */
  loaded(model: string): RunnerModelReport["loaded"] {
    for (const ep of this.all()) {
      const loaded = ep.healthy ? ep.models.get(model)?.loaded : undefined;
      if (loaded !== undefined) return loaded;
    }
    return undefined;
  }

  /** Runners answer, and none holds `version` of `model` ready (or loads it on its next call). */
  lacksVersion(model: string, version: string): boolean {
    const up = this.all().filter((ep) => ep.healthy);
    return up.length > 0 && !up.some((ep) => ep.serves(model, version));
  }

  /**
   * Scores `inputs` on a runner that serves `model`; once more on another when the first does
   * not answer or answers with a code another runner may not share (draining, not ready, crashed,
   * overloaded).
   * @throws ModelportError MP_ERR_RUNNER_UNAVAILABLE (503, retryable) when no runner could answer;
   *   the runner's own code for anything else it refused (bad input, deadline, inference failure).
   */
  async predict(model: string, inputs: TensorMap, options: ForwardOptions = {}): Promise<Forwarded> {
    const request = encodeInferRequest(inputs);
    const version = options.version;
    const first = this.pick(model, undefined, version);
    if (!first) {
      throw this.unavailable(
        model,
        version === undefined ? "no runner serving it is ready" : `no runner has version ${version} ready`,
      );
    }
    try {
      return await this.forward(first, model, request, options);
    } catch (err) {
      if (!this.shouldRetry(err, options)) throw this.settle(model, err);
      const second = this.pick(model, first, version);
      this.metrics?.runnerForwards.inc({ runner: first.url, outcome: "retried" });
      // The only runner refused (overloaded, draining): its own answer, with its Retry-After, is the best one.
      if (!second) {
        throw err instanceof ModelportError
          ? err
          : this.unavailable(model, `${(err as Error).message}; no other runner serves it`);
      }
      this.log.warn(
        { runner: first.url, retryOn: second.url, reqId: options.requestId, err: (err as Error).message },
        "retrying on another runner",
      );
      try {
        return await this.forward(second, model, request, options);
      } catch (err2) {
        if (
          !this.shouldRetry(err2, options) ||
          (err2 as ModelportError).code === "MP_ERR_MODEL_VERSION_NOT_FOUND"
        )
          throw this.settle(model, err2);
        throw this.unavailable(model, `${(err as Error).message}; then ${(err2 as Error).message}`);
      }
    }
  }

  private shouldRetry(err: unknown, options: ForwardOptions): boolean {
    if (options.cancel?.canceled) return false;
    if (options.deadline !== undefined && performance.now() >= options.deadline) return false;
    if (err instanceof RunnerUnreachableError) return !err.timedOut;
    if (!(err instanceof ModelportError)) return false;
    // A pinned version that runner just unloaded (a swap) may still be on another.
    return (
      TRY_ELSEWHERE.has(err.code) ||
      (err.code === "MP_ERR_MODEL_VERSION_NOT_FOUND" && options.version !== undefined)
    );
  }

  private async forward(
    ep: RunnerEndpoint,
    model: string,
    request: { body: Buffer; headers: Record<string, string> },
    options: ForwardOptions,
  ): Promise<Forwarded> {
    const left = options.deadline === undefined ? 30_000 : Math.ceil(options.deadline - performance.now());
    if (left <= 0) {
      throw new ModelportError(
        "MP_ERR_DEADLINE_EXCEEDED",
        `the request's deadline passed before it reached a runner`,
      );
    }
    const headers: Record<string, string> = { ...request.headers, "x-request-timeout-ms": String(left) };
    if (options.requestId) headers[REQUEST_ID_HEADER] = options.requestId;
    const started = performance.now();
    ep.inFlight++;
    this.metrics?.runnerInFlight.set({ runner: ep.url }, ep.inFlight);
    let unregister: (() => void) | undefined;
    try {
      // A little over the runner's own deadline: its 504 is a better answer than our timeout.
      const path = `/v2/models/${encodeURIComponent(model)}${
        options.version === undefined ? "" : `/versions/${encodeURIComponent(options.version)}`
      }/infer`;
      const res = await ep.request("POST", path, {
        headers,
        body: request.body,
        timeoutMs: left + 250,
        trace: options.trace,
        onAbort: (abort) => {
          unregister = options.cancel?.onCancel(abort);
        },
      });
      this.metrics?.runnerForwardDuration.observe({ model }, (performance.now() - started) / 1000);
      if (res.status === 200) {
        this.metrics?.runnerForwards.inc({ runner: ep.url, outcome: "ok" });
        return decodeInferResponse(res.body, res.headers["inference-header-content-length"]);
      }
      const err = errorFromRunner(res.status, res.body, res.headers["retry-after"]);
      this.metrics?.runnerForwards.inc({ runner: ep.url, outcome: "error" });
      // Draining or not ready there: leave it out for this model until its next poll says otherwise.
      if (err.code === "MP_ERR_SERVER_SHUTTING_DOWN" || err.code === "MP_ERR_MODEL_NOT_READY")
        ep.refused.add(model);
      // That version is gone there (a swap unloaded it): not there again until the next poll.
      if (err.code === "MP_ERR_MODEL_VERSION_NOT_FOUND" && options.version !== undefined)
        ep.refused.add(`${model}@${options.version}`);
      throw err;
    } catch (err) {
      if (err instanceof RunnerUnreachableError) {
        this.metrics?.runnerForwards.inc({ runner: ep.url, outcome: "unreachable" });
        if (options.cancel?.canceled) {
          throw new ModelportError("MP_ERR_REQUEST_CANCELED", "the client closed the connection");
        }
        if (err.timedOut) {
          throw new ModelportError(
            "MP_ERR_DEADLINE_EXCEEDED",
            `runner ${ep.url} did not answer before the deadline`,
          );
        }
        // Out of the rotation now, not at the next poll: the next request must not try it again.
        ep.markDown(err.message);
        this.metrics?.runnerUp.set({ runner: ep.url }, 0);
        this.log.warn(
          { runner: ep.url, reason: err.message },
          `runner ${ep.url} left the rotation: ${err.message}`,
        );
      }
      throw err;
    } finally {
      unregister?.();
      ep.inFlight--;
      this.metrics?.runnerInFlight.set({ runner: ep.url }, ep.inFlight);
    }
  }

  /**
   * Sends one request to every runner known (the management routes: a change reaches them all),
   * at once, then polls them so routing sees the change. Never throws: a runner that could not be
   * reached has status 0 and the reason.
   */
  async broadcast(
    method: string,
    path: string,
    body: Buffer | undefined,
    headers: Record<string, string>,
    timeoutMs: number,
  ): Promise<BroadcastAnswer[]> {
    const answers = await Promise.all(
      this.all().map(async (ep): Promise<BroadcastAnswer> => {
        try {
          const res = await ep.request(method, path, { headers, ...(body ? { body } : {}), timeoutMs });
          return { runner: ep.url, status: res.status, body: res.body };
        } catch (err) {
          return { runner: ep.url, status: 0, body: Buffer.alloc(0), error: (err as Error).message };
        }
      }),
    );
    // A fresh poll, not one that started before the change.
    await this.polling;
    await this.pollAll();
    return answers;
  }

  /** A ModelportError as is; a failure to reach a runner as MP_ERR_RUNNER_UNAVAILABLE. */
  private settle(model: string, err: unknown): unknown {
    return err instanceof RunnerUnreachableError ? this.unavailable(model, err.message) : err;
  }

  private unavailable(model: string, why: string): ModelportError {
    return new ModelportError("MP_ERR_RUNNER_UNAVAILABLE", `model '${model}': ${why}; retry shortly`, {
      model,
      retryAfterSeconds: Math.max(1, Math.ceil(this.server.runnerPollMs / 1000)),
    });
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    for (const ep of this.endpoints.values()) ep.close();
    this.endpoints.clear();
  }
}
