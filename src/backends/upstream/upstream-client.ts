// HTTP to an OpenAI-compatible upstream: one attempt with its own timeout (fetchAttempt), the
// retry loop around attempts (withRetries), and the Server-Sent Events reader that turns a
// streamed answer into chunks as they arrive. Failures of one attempt are AttemptFailures that
// say whether another attempt may help; the language model turns the last one into a
// ModelportError.
import { setTimeout as sleep } from "node:timers/promises";
import { type BackoffSettings, backoffDelay, parseRetryAfter, retryableStatus } from "./retry.js";

/** Why one attempt failed, and whether trying again may help. */
export class AttemptFailure extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly status?: number,
    readonly retryAfterMs?: number,
    /** The upstream's own error message, when its body had one. */
    readonly upstreamMessage?: string,
    /** The upstream's own error code (OpenAI's error.code; MP_ERR_* from another modelport). */
    readonly upstreamCode?: string,
  ) {
    super(message);
    this.name = "AttemptFailure";
  }
}

/** The client went away: stop at once, never retry. */
export class ClientAborted extends Error {
  constructor() {
    super("the client closed the connection");
    this.name = "ClientAborted";
  }
}

export interface AttemptOptions {
  method: "GET" | "POST";
  url: string;
  apiKey?: string | undefined;
  body?: unknown;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  stream?: boolean;
}

/** An answered attempt: the response, and the idle timer to re-arm per streamed chunk. */
export interface Attempt {
  response: Response;
  /** Restarts the per-attempt timeout (called on each chunk, so a live stream never times out). */
  touch(): void;
  /** Stops the timer and detaches from the client's signal. */
  done(): void;
  /** Why the attempt's own controller aborted, if it did. */
  aborted(): "timeout" | "client" | undefined;
}

const MAX_ERROR_BODY = 2000;

function upstreamCode(text: string): string | undefined {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
    return typeof code === "string" ? code : undefined;
  } catch {
    return undefined;
  }
}

function upstreamMessage(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof body.error === "string") return body.error;
    if (body.error && typeof body.error.message === "string") return body.error.message;
    if (typeof body.message === "string") return body.message;
  } catch {}
  return undefined;
}

/**
 * Sends one request. Resolves with a 2xx response; the body is not read yet.
 * @throws AttemptFailure (non-2xx, connection error, timeout) or ClientAborted.
 */
export async function fetchAttempt(o: AttemptOptions): Promise<Attempt> {
  const controller = new AbortController();
  let why: "timeout" | "client" | undefined;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      why ??= "timeout";
      controller.abort();
    }, o.timeoutMs);
  };
  const onClient = () => {
    why ??= "client";
    controller.abort();
  };
  o.signal?.addEventListener("abort", onClient, { once: true });
  const done = () => {
    if (timer) clearTimeout(timer);
    o.signal?.removeEventListener("abort", onClient);
  };
  if (o.signal?.aborted) {
    done();
    throw new ClientAborted();
  }
  arm();
  const headers: Record<string, string> = { accept: o.stream ? "text/event-stream" : "application/json" };
  if (o.apiKey) headers.authorization = `Bearer ${o.apiKey}`;
  if (o.body !== undefined) headers["content-type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(o.url, {
      method: o.method,
      headers,
      ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
      signal: controller.signal,
    });
  } catch (err) {
    done();
    if (why === "client") throw new ClientAborted();
    if (why === "timeout") {
      throw new AttemptFailure(`no answer from ${o.url} within ${o.timeoutMs} ms`, true);
    }
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new AttemptFailure(
      `cannot reach ${o.url}: ${cause?.code ?? cause?.message ?? (err as Error).message}`,
      true,
    );
  }
  if (!response.ok) {
    let text = "";
    try {
      text = (await response.text()).slice(0, MAX_ERROR_BODY);
    } catch {}
    done();
    const message = upstreamMessage(text);
    throw new AttemptFailure(
      `${o.method} ${o.url} answered HTTP ${response.status}${message ? `: ${message}` : text ? `: ${text.slice(0, 200)}` : ""}`,
      retryableStatus(response.status),
      response.status,
      parseRetryAfter(response.headers.get("retry-after")),
      message,
      upstreamCode(text),
    );
  }
  return { response, touch: arm, done, aborted: () => why };
}

export interface RetrySettings extends BackoffSettings {
  /** Attempts after the first. */
  retries: number;
}

/**
 * Runs `attempt` until it succeeds, fails for good, or the retries are spent. `attempt` reports
 * through `progressed()` once it has delivered anything to the client: after that a failure is
 * final, since a retry would repeat what the client already has.
 * @returns the result and how many attempts it took.
 * @throws the last AttemptFailure (with `attempts` on the error), or ClientAborted.
 */
export async function withRetries<T>(
  settings: RetrySettings,
  attempt: (progressed: () => void) => Promise<T>,
  signal?: AbortSignal,
  onRetry?: (failure: AttemptFailure, waitMs: number, attemptNo: number) => void,
): Promise<{ value: T; attempts: number }> {
  for (let n = 0; ; n++) {
    let progressed = false;
    try {
      const value = await attempt(() => {
        progressed = true;
      });
      return { value, attempts: n + 1 };
    } catch (err) {
      if (err instanceof ClientAborted || signal?.aborted) throw new ClientAborted();
      if (!(err instanceof AttemptFailure)) throw err;
      if (!err.retryable || progressed || n >= settings.retries) {
        throw Object.assign(err, { attempts: n + 1 });
      }
      const wait = backoffDelay(n, err.retryAfterMs, settings);
      onRetry?.(err, wait, n + 1);
      try {
        await sleep(wait, undefined, signal ? { signal } : {});
      } catch {
        throw new ClientAborted();
      }
    }
  }
}

/** One parsed SSE event's data, or "[DONE]". */
export type SseData = string;

/**
 * Reads `response`'s body as Server-Sent Events and yields each event's data as soon as its
 * blank line arrives. Calls `touch` per chunk read (the attempt's idle timeout).
 */
export async function* readSse(response: Response, touch: () => void): AsyncGenerator<SseData> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    touch();
    buffer += decoder.decode(chunk, { stream: true });
    let nl = buffer.indexOf("\n");
    while (nl >= 0) {
      const line = buffer.slice(0, nl).replace(/\r$/, "");
      buffer = buffer.slice(nl + 1);
      if (line === "") {
        if (data.length) yield data.join("\n");
        data = [];
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      }
      nl = buffer.indexOf("\n");
    }
  }
  if (data.length) yield data.join("\n");
}
