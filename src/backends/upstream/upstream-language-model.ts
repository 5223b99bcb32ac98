// The upstream backend: a LanguageModel that forwards chat, completions and embeddings to any
// OpenAI-compatible base URL (a hosted API, vLLM, Ollama, another modelport). It holds no
// weights: it is ready once GET {url}/models answered, retries 429, 5xx and connection failures
// with exponential backoff (a Retry-After header wins) as long as nothing was streamed yet, and
// passes streamed answers through chunk by chunk as deltas. Its cost is tokens × the configured
// per-million prices. What the upstream says in an error reaches clients and logs only redacted
// and bounded (redact.ts); its status (/readyz) gives a generic reason without the upstream's text.
import type { Logger } from "pino";
import type { LanguageModelConfig, UpstreamConfig } from "../../config/schema.js";
import { type ErrorCode, ModelportError } from "../../errors.js";
import type {
  EmbedInput,
  EmbedOptions,
  EmbedResult,
  FinishReason,
  GenerateOptions,
  GenerateRequest,
  GenerateResult,
  TokenLogprob,
} from "../../llm/language-model.js";

type UpstreamState = "loading" | "ready" | "failed" | "closed";

import { CostMeter, type CostSnapshot } from "../../metrics/cost.js";
import type { Metrics } from "../../metrics/metrics.js";
import {
  readLogprobs,
  ToolCallJoiner,
  type WireToolCall,
  wireMessage,
  wireRequestFields,
} from "./openai-wire.js";
import { safeUpstreamText, safeUrl } from "./redact.js";
import {
  type Attempt,
  AttemptFailure,
  ClientAborted,
  fetchAttempt,
  readBounded,
  readSse,
  withRetries,
} from "./upstream-client.js";

export interface UpstreamModelOptions {
  metrics?: Metrics;
  env?: NodeJS.ProcessEnv;
}

/** Upstream settings with the schema's defaults, for configs built in code. */
function settings(c: LanguageModelConfig): UpstreamConfig {
  const u = c.upstream;
  if (!u) {
    throw new ModelportError(
      "MP_ERR_MODEL_LOAD_FAILED",
      `model '${c.name}': backend upstream needs upstream.url (an OpenAI-compatible base URL)`,
    );
  }
  return u;
}

/** Re-probe a not-ready upstream this often (doubling to the cap), so it recovers by itself. */
const PROBE_RETRY_MS = 2000;
const PROBE_RETRY_MAX_MS = 60_000;

interface ChatChoice {
  message?: { content?: string | null; tool_calls?: WireToolCall[] };
  delta?: { content?: string | null; tool_calls?: WireToolCall[] };
  logprobs?: unknown;
  text?: string;
  finish_reason?: string | null;
}

interface OpenAiAnswer {
  choices?: ChatChoice[];
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  } | null;
  error?: { message?: unknown } | string;
}

/** An error object's message inside a streamed event, redacted and bounded. */
function streamedError(error: OpenAiAnswer["error"], secrets: readonly (string | undefined)[]): string {
  const raw = typeof error === "string" ? error : typeof error?.message === "string" ? error.message : "";
  return raw ? safeUpstreamText(raw, secrets) : "an error without a message";
}

/**
 * The upstream's embeddings in input order: one per input, each index 0…n-1 exactly once, each
 * vector an array of finite numbers.
 * @throws ModelportError MP_ERR_LLM_UPSTREAM_FAILED for anything else.
 */
function orderedEmbeddings(data: unknown, n: number): number[][] {
  const bad = (why: string) =>
    new ModelportError("MP_ERR_LLM_UPSTREAM_FAILED", `the upstream's embeddings answer is unusable: ${why}`);
  if (!Array.isArray(data)) throw bad("`data` is not an array");
  if (data.length !== n) throw bad(`${data.length} embeddings for ${n} inputs`);
  const out = new Array<number[] | undefined>(n);
  for (const d of data as { index?: unknown; embedding?: unknown }[]) {
    const i = d?.index;
    if (typeof i !== "number" || !Number.isInteger(i) || i < 0 || i >= n || out[i])
      throw bad("the indexes are not 0…n-1, each once");
    const v = d.embedding;
    if (!Array.isArray(v) || !v.every((x) => typeof x === "number" && Number.isFinite(x)))
      throw bad(`embedding ${i} is not an array of finite numbers`);
    out[i] = v as number[];
  }
  return out as number[][];
}

/** A token count the upstream reported, when it is a whole number that can be one. */
function count(v: unknown): number | undefined {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : undefined;
}

/** Rough token count for an upstream that reports no usage: about 4 characters per token (an estimate). */
function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/**
 * Reads an answer's JSON body, at most `maxBytes` of it. A body cut off by the attempt's timeout
 * or a broken connection is a retryable failure like a connection error; one that is too large or
 * not JSON is not.
 */
async function readJson<T>(
  attempt: Attempt,
  timeoutMs: number,
  maxBytes: number,
  secrets: readonly (string | undefined)[],
): Promise<T> {
  let text: string;
  try {
    const read = await readBounded(attempt.response, maxBytes);
    if (read.truncated) {
      throw new AttemptFailure(
        `the answer is larger than ${maxBytes} bytes (upstream.maxResponseBytes); it was not read further`,
        false,
      );
    }
    text = read.text;
  } catch (err) {
    if (err instanceof AttemptFailure) throw err;
    if (attempt.aborted() === "client") throw new ClientAborted();
    throw new AttemptFailure(
      attempt.aborted() === "timeout"
        ? `the answer did not arrive in full within ${timeoutMs} ms`
        : `the answer was cut off: ${safeUpstreamText((err as Error).message, secrets)}`,
      true,
    );
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new AttemptFailure(`the answer is not JSON: ${safeUpstreamText(text, secrets, 200)}`, false);
  }
}

function finishReason(r: string | null | undefined): FinishReason {
  return r === "length" ? "length" : r === "tool_calls" || r === "function_call" ? "tool_calls" : "stop";
}

/** A language model of the catalogue (src/catalogue/served-model.ts's ServedModel, kept structurally so this backend imports nothing above it). */
export class UpstreamLanguageModel {
  readonly name: string;
  readonly backend = "upstream" as const;
  readonly kind = "language" as const;
  readonly signature = undefined;
  readonly capabilities = {
    predict: false,
    chat: true,
    completion: true,
    embeddings: true,
    stream: true,
  } as const;
  readonly created = Math.floor(Date.now() / 1000);
  private readonly u: UpstreamConfig | undefined;
  private readonly base: string;
  private readonly log: Logger;
  private readonly env: NodeJS.ProcessEnv;
  private readonly meter: CostMeter;
  private apiKey: string | undefined;
  private state: UpstreamState = "loading";
  private reason: string | undefined = "probing the upstream";
  private code: ErrorCode | undefined = "MP_ERR_MODEL_NOT_READY";
  private loadMs: number | undefined;
  private active = 0;
  private readonly aborts = new Set<AbortController>();
  private probeTimer: NodeJS.Timeout | undefined;
  private probeDelay = PROBE_RETRY_MS;

  constructor(
    readonly config: LanguageModelConfig,
    log: Logger,
    options: UpstreamModelOptions = {},
  ) {
    this.name = config.name;
    this.u = config.upstream;
    this.base = (config.upstream?.url ?? "").replace(/\/+$/, "");
    this.log = log.child({ model: config.name });
    this.env = options.env ?? process.env;
    this.meter = new CostMeter(
      config.name,
      {
        pricePerMillionInputTokens: config.pricePerMillionInputTokens,
        pricePerMillionOutputTokens: config.pricePerMillionOutputTokens,
      },
      options.metrics?.cost,
    );
  }

  /** The name the upstream knows the model by. */
  get upstreamModel(): string {
    return this.u?.model ?? this.name;
  }

  async start(): Promise<void> {
    const started = performance.now();
    try {
      const u = settings(this.config);
      if (u.apiKeyEnv) {
        this.apiKey = this.env[u.apiKeyEnv];
        if (!this.apiKey) {
          throw new ModelportError(
            "MP_ERR_MODEL_LOAD_FAILED",
            `environment variable ${u.apiKeyEnv} (upstream.apiKeyEnv) is unset or empty: set it to the upstream's API key`,
          );
        }
      }
      await this.probe();
      this.loadMs = performance.now() - started;
    } catch (err) {
      const e =
        err instanceof ModelportError ? err : new ModelportError("MP_ERR_MODEL_LOAD_FAILED", String(err));
      this.setNotReady("failed", e.message, e.code);
      // A missing key needs a restart with the variable set; an unreachable upstream may come back.
      if (e.code !== "MP_ERR_MODEL_LOAD_FAILED") this.scheduleProbe();
    }
  }

  /**
   * GET {url}/models, once. Ready on a 2xx; otherwise the reason says what answered.
   * @throws ModelportError MP_ERR_LLM_UPSTREAM_FAILED.
   */
  private async probe(): Promise<void> {
    const u = settings(this.config);
    const url = `${this.base}/models`;
    try {
      const attempt = await fetchAttempt({ method: "GET", url, apiKey: this.apiKey, timeoutMs: u.timeoutMs });
      let listed: string[] | undefined;
      try {
        const body = await readJson<{ data?: unknown }>(attempt, u.timeoutMs, u.maxResponseBytes, [
          this.apiKey,
        ]);
        if (Array.isArray(body?.data))
          listed = body.data.map((m) => String((m as { id?: unknown } | null)?.id));
      } catch (err) {
        if (err instanceof AttemptFailure && err.status === undefined && !err.retryable) {
          this.log.warn(`${this.name}: readiness probe: ${err.message}`);
          throw new ModelportError(
            "MP_ERR_LLM_UPSTREAM_FAILED",
            `readiness probe failed: GET ${safeUrl(url)} answered 2xx with a body that is not a JSON model list (the log has details)`,
          );
        }
        throw err;
      } finally {
        attempt.done();
      }
      if (listed && !listed.includes(this.upstreamModel)) {
        const names = safeUpstreamText(listed.slice(0, 10).join(", "), [this.apiKey]);
        this.log.warn(
          `upstream ${safeUrl(this.base)} does not list model '${this.upstreamModel}' (it lists ${names}); requests may fail`,
        );
      }
      this.state = "ready";
      this.reason = undefined;
      this.code = undefined;
      this.probeDelay = PROBE_RETRY_MS;
      this.log.info(`${this.name}: upstream ${safeUrl(this.base)} answered GET /models; ready`);
    } catch (err) {
      if (err instanceof AttemptFailure) {
        // The full (redacted) failure goes to the log; the status, which unauthenticated /readyz
        // shows, says only what kind of failure it was: never the upstream's own words.
        this.log.warn({ status: err.status }, `${this.name}: readiness probe failed: ${err.message}`);
        const what =
          err.status !== undefined
            ? `GET ${safeUrl(url)} answered HTTP ${err.status}`
            : `GET ${safeUrl(url)} failed (unreachable or no answer in time; the log has details)`;
        const hint =
          err.status === 404
            ? ": the upstream has no GET /models route, which modelport uses as its readiness probe; point upstream.url at the API's base (for example https://host/v1)"
            : err.status === 401 || err.status === 403
              ? `: the upstream refused the key${this.u?.apiKeyEnv ? ` in ${this.u.apiKeyEnv}` : " (set upstream.apiKeyEnv)"}`
              : "";
        throw new ModelportError("MP_ERR_LLM_UPSTREAM_FAILED", `readiness probe failed: ${what}${hint}`);
      }
      throw err;
    }
  }

  private scheduleProbe(): void {
    if (this.state === "closed" || this.probeTimer) return;
    const delay = this.probeDelay;
    this.probeDelay = Math.min(PROBE_RETRY_MAX_MS, this.probeDelay * 2);
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      if (this.state === "closed") return;
      this.probe().catch((err: ModelportError) => {
        if (this.state === "closed") return;
        this.setNotReady("failed", `${err.message} (probing again in ${this.probeDelay} ms)`, err.code);
        this.scheduleProbe();
      });
    }, delay);
    this.probeTimer.unref();
  }

  private closed(): boolean {
    return this.state === "closed";
  }

  private setNotReady(state: UpstreamState, reason: string, code: ErrorCode): void {
    if (this.state === "closed") return;
    this.state = state;
    this.reason = reason;
    this.code = code;
    this.log.error({ code }, `${this.name} is not ready: ${reason}`);
  }

  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    this.reason = "closed";
    this.code = "MP_ERR_SERVER_SHUTTING_DOWN";
    if (this.probeTimer) clearTimeout(this.probeTimer);
    for (const a of this.aborts) a.abort();
  }

  cost(): CostSnapshot {
    return this.meter.snapshot();
  }

  get version(): string {
    return this.config.version;
  }

  get ready(): boolean {
    return this.state === "ready";
  }

  status() {
    return {
      name: this.name,
      version: this.config.version,
      backend: this.backend,
      path: safeUrl(this.base),
      state: this.state,
      ready: this.state === "ready",
      ...(this.reason ? { reason: this.reason } : {}),
      ...(this.code && this.state !== "ready" ? { code: this.code } : {}),
      golden: "none" as const,
      restarts: 0,
      recycles: 0,
      ...(this.loadMs !== undefined ? { loadMs: this.loadMs } : {}),
      concurrency: { active: this.active, waiting: 0, limit: this.config.llm.sequences },
      url: safeUrl(this.base),
      upstreamModel: this.upstreamModel,
      cost: this.meter.snapshot(),
    };
  }

  notReadyError(): ModelportError {
    if (this.state === "closed") {
      return new ModelportError(
        "MP_ERR_SERVER_SHUTTING_DOWN",
        "the server is shutting down; retry on another instance",
      );
    }
    return new ModelportError("MP_ERR_MODEL_NOT_READY", `model '${this.name}' is not ready: ${this.reason}`, {
      model: this.name,
      state: this.state,
      ...(this.code ? { cause: this.code } : {}),
    });
  }

  /**
   * Runs one upstream call with retries: admission, the client's abort, the last failure as a
   * ModelportError, and the call's wall time for cost.
   */
  private async call<T>(
    what: string,
    signal: AbortSignal | undefined,
    attempt: (signal: AbortSignal, progressed: () => void) => Promise<T>,
  ): Promise<{ value: T; ms: number }> {
    if (this.state !== "ready") throw this.notReadyError();
    const limit = this.config.llm.sequences + this.config.llm.maxWaiting;
    if (this.active >= limit) {
      throw new ModelportError(
        "MP_ERR_MODEL_OVERLOADED",
        `model '${this.name}' has ${this.active} upstream calls in flight (limit llm.sequences + llm.maxWaiting = ${limit}); retry shortly`,
        { retryAfterSeconds: 1 },
      );
    }
    const u = settings(this.config);
    const abort = new AbortController();
    const onClient = () => abort.abort();
    signal?.addEventListener("abort", onClient, { once: true });
    if (signal?.aborted) abort.abort();
    this.aborts.add(abort);
    this.active++;
    const started = performance.now();
    try {
      const { value } = await withRetries(
        { retries: u.retries, backoffMs: u.backoffMs, maxBackoffMs: u.maxBackoffMs },
        (progressed) => attempt(abort.signal, progressed),
        abort.signal,
        (failure, waitMs, n) =>
          this.log.warn(
            { status: failure.status, waitMs, attempt: n },
            `${this.name}: upstream ${what} failed (${failure.message}); retrying in ${Math.round(waitMs)} ms`,
          ),
      );
      return { value, ms: performance.now() - started };
    } catch (err) {
      if (err instanceof ClientAborted) {
        // close() aborts calls in flight too: say so rather than blame the client.
        if (this.closed()) throw this.notReadyError();
        throw new ModelportError(
          "MP_ERR_REQUEST_CANCELED",
          "the client closed the connection; the upstream call was stopped",
        );
      }
      if (err instanceof AttemptFailure) {
        const attempts = (err as AttemptFailure & { attempts?: number }).attempts ?? 1;
        const details = {
          model: this.name,
          attempts,
          ...(err.status !== undefined ? { upstreamStatus: err.status } : {}),
          ...(err.upstreamCode !== undefined ? { upstreamCode: err.upstreamCode } : {}),
          ...(err.upstreamType !== undefined ? { upstreamType: err.upstreamType } : {}),
          ...(err.upstreamMessage !== undefined ? { upstreamMessage: err.upstreamMessage } : {}),
          // The upstream's Retry-After, passed on to this server's client.
          ...(err.retryAfterMs !== undefined
            ? { retryAfterSeconds: Math.max(1, Math.ceil(err.retryAfterMs / 1000)) }
            : {}),
        };
        // A 4xx is the request's or the key's fault: say so; anything else is the upstream failing.
        if (!err.retryable && err.status !== undefined && err.status < 500) {
          const key =
            err.status === 401 || err.status === 403
              ? ` Check the key${u.apiKeyEnv ? ` in ${u.apiKeyEnv}` : " (upstream.apiKeyEnv)"}.`
              : "";
          throw new ModelportError(
            "MP_ERR_LLM_UPSTREAM_REJECTED",
            `the upstream refused the ${what} request: ${err.message}.${key}`,
            details,
          );
        }
        throw new ModelportError(
          "MP_ERR_LLM_UPSTREAM_FAILED",
          `the upstream ${what} call failed after ${attempts} attempt(s): ${err.message}`,
          details,
        );
      }
      throw new ModelportError(
        "MP_ERR_LLM_UPSTREAM_FAILED",
        `the upstream ${what} call failed: ${safeUpstreamText(String(err), [this.apiKey])}`,
      );
    } finally {
      this.active--;
      this.aborts.delete(abort);
      signal?.removeEventListener("abort", onClient);
    }
  }

  async generate(request: GenerateRequest, options: GenerateOptions = {}): Promise<GenerateResult> {
    const chat = request.messages !== undefined;
    const u = settings(this.config);
    const stream = options.onDelta !== undefined;
    const body: Record<string, unknown> = {
      model: this.upstreamModel,
      ...(chat
        ? { messages: request.messages!.map(wireMessage) }
        : { prompt: request.promptTokens ? [...request.promptTokens] : (request.prompt ?? "") }),
      ...wireRequestFields(request),
      ...(request.maxTokens !== undefined ? { max_tokens: request.maxTokens } : {}),
      // Greedy unless asked otherwise, as the contract says (an upstream's default is often 1).
      temperature: request.temperature ?? 0,
      ...(request.topP !== undefined ? { top_p: request.topP } : {}),
      ...(request.seed !== undefined ? { seed: request.seed } : {}),
      ...(request.stop?.length ? { stop: [...request.stop] } : {}),
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    };
    const url = `${this.base}/${chat ? "chat/completions" : "completions"}`;
    const what = chat ? "chat" : "completion";
    const promptText = chat ? request.messages!.map((m) => m.content).join("\n") : (request.prompt ?? "");
    const secrets = [this.apiKey];
    const { value, ms } = await this.call(what, options.cancel?.signal, async (signal, progressed) => {
      const attempt = await fetchAttempt({
        method: "POST",
        url,
        apiKey: this.apiKey,
        body,
        timeoutMs: u.timeoutMs,
        signal,
        stream,
        trace: options.trace,
      });
      try {
        if (!stream) {
          const answer = await readJson<OpenAiAnswer>(attempt, u.timeoutMs, u.maxResponseBytes, secrets);
          const choice = answer.choices?.[0];
          const raw = chat ? choice?.message?.content : choice?.text;
          const text = typeof raw === "string" ? raw : "";
          const calls = new ToolCallJoiner(u.maxResponseBytes);
          calls.add(choice?.message?.tool_calls);
          const toolCalls = calls.result();
          const logprobs: TokenLogprob[] = [];
          if (request.logprobs) readLogprobs(choice?.logprobs, logprobs);
          return {
            text,
            finishReason: finishReason(choice?.finish_reason),
            usage: answer.usage,
            ...(toolCalls ? { toolCalls } : {}),
            ...(request.logprobs ? { logprobs } : {}),
          };
        }
        const calls = new ToolCallJoiner(u.maxResponseBytes);
        const logprobs: TokenLogprob[] = [];
        let text = "";
        let reason: string | null | undefined;
        let usage: OpenAiAnswer["usage"];
        try {
          for await (const event of readSse(attempt.response, attempt.touch, u.maxEventChars)) {
            // Unnamed and "message" events carry the answer; "error" ends it; other named events
            // (keep-alives such as "ping") are not part of it.
            if (event.event !== undefined && event.event !== "message" && event.event !== "error") continue;
            if (event.data === "[DONE]") break;
            let chunk: OpenAiAnswer;
            try {
              chunk = JSON.parse(event.data) as OpenAiAnswer;
            } catch {
              if (event.event === "error")
                throw new AttemptFailure(
                  `the stream reported: ${safeUpstreamText(event.data, secrets)}`,
                  !text,
                );
              throw new AttemptFailure("the stream sent an event whose data is not JSON", false);
            }
            if (chunk === null || typeof chunk !== "object")
              throw new AttemptFailure("the stream sent an event whose data is not a JSON object", false);
            if (chunk.error || event.event === "error")
              throw new AttemptFailure(`the stream reported: ${streamedError(chunk.error, secrets)}`, !text);
            if (chunk.usage) usage = chunk.usage;
            const choice = chunk.choices?.[0];
            if (!choice) continue;
            const raw = chat ? choice.delta?.content : choice.text;
            const delta = typeof raw === "string" ? raw : "";
            if (choice.finish_reason) reason = choice.finish_reason;
            if (request.logprobs) readLogprobs(choice.logprobs, logprobs);
            if (!calls.add(choice.delta?.tool_calls))
              throw new AttemptFailure("the stream's tool calls passed the answer's size bound", false);
            if (delta) {
              progressed();
              text += delta;
              options.onDelta!(delta);
            }
          }
        } catch (err) {
          if (err instanceof AttemptFailure) throw err;
          const why = attempt.aborted();
          if (why === "client") throw new ClientAborted();
          throw new AttemptFailure(
            why === "timeout"
              ? `the stream stalled for ${u.timeoutMs} ms`
              : `the stream broke: ${safeUpstreamText((err as Error).message, secrets)}`,
            true,
          );
        }
        const toolCalls = calls.result();
        return {
          text,
          finishReason: finishReason(reason),
          usage,
          ...(toolCalls ? { toolCalls } : {}),
          ...(request.logprobs ? { logprobs } : {}),
        };
      } finally {
        attempt.done();
      }
    });
    const promptTokens =
      count(value.usage?.prompt_tokens) ?? request.promptTokens?.length ?? estimateTokens(promptText);
    const completionTokens = count(value.usage?.completion_tokens) ?? estimateTokens(value.text);
    this.meter.tokens(promptTokens, completionTokens, ms);
    const cachedTokens = count(value.usage?.prompt_tokens_details?.cached_tokens);
    return {
      text: value.text,
      finishReason: value.finishReason,
      usage: { promptTokens, completionTokens, ...(cachedTokens !== undefined ? { cachedTokens } : {}) },
      ...(value.toolCalls ? { toolCalls: value.toolCalls } : {}),
      ...(value.logprobs ? { logprobs: value.logprobs } : {}),
    };
  }

  async embed(inputs: readonly EmbedInput[], options: EmbedOptions = {}): Promise<EmbedResult> {
    const u = settings(this.config);
    const { value, ms } = await this.call("embeddings", options.cancel?.signal, async (signal) => {
      const attempt = await fetchAttempt({
        method: "POST",
        url: `${this.base}/embeddings`,
        apiKey: this.apiKey,
        body: {
          model: this.upstreamModel,
          input: [...inputs],
          encoding_format: "float",
          ...(options.dimensions !== undefined ? { dimensions: options.dimensions } : {}),
        },
        timeoutMs: u.timeoutMs,
        signal,
        trace: options.trace,
      });
      try {
        return await readJson<{
          data?: { index: number; embedding: number[] }[];
          usage?: { prompt_tokens?: number };
        }>(attempt, u.timeoutMs, u.maxResponseBytes, [this.apiKey]);
      } finally {
        attempt.done();
      }
    });
    const vectors = orderedEmbeddings(value?.data, inputs.length);
    const promptTokens =
      count(value.usage?.prompt_tokens) ??
      inputs.reduce((n, t) => n + (typeof t === "string" ? estimateTokens(t) : t.length), 0);
    this.meter.tokens(promptTokens, 0, ms);
    return { vectors, promptTokens };
  }
}
