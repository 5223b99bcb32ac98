// HTTP to an OpenAI-compatible upstream: one attempt with its own timeout (fetchAttempt), the
// retry loop around attempts (withRetries), bounded body reads, and the Server-Sent Events
// reader (eventsource-parser) that turns a streamed answer into events as they arrive. Failures
// of one attempt are AttemptFailures that say whether another attempt may help; the language
// model turns the last one into a ModelportError. Nothing an upstream sends is repeated
// verbatim: its messages pass through redact.ts (the key and token-shaped strings removed,
// length bounded), and every body is read with a size limit.

import { setTimeout as sleep } from "node:timers/promises";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { injectTrace, type TraceParent } from "../../telemetry/propagation.js";
import { KIND, parentOf, startSpan, tracing } from "../../telemetry/spans.js";
import { safeIdentifier, safeUpstreamText, safeUrl } from "./redact.js";
import { type BackoffSettings, backoffDelay, parseRetryAfter, retryableStatus } from "./retry.js";

/** Why one attempt failed, and whether trying again may help. */
export class AttemptFailure extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly status?: number,
    readonly retryAfterMs?: number,
    /** The upstream's own error message, when its body had one: redacted and bounded. */
    readonly upstreamMessage?: string,
    /** The upstream's own error code (OpenAI's error.code; MP_ERR_* from another modelport). */
    readonly upstreamCode?: string,
    /** The upstream's error type (OpenAI's error.type), when it is a short identifier. */
    readonly upstreamType?: string,
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
  /**
   * The caller's place in a trace: the attempt is an HTTP client span under it (tracing on),
   * ended when the attempt is done, and carries its traceparent (off: the caller's, as received).
   */
  trace?: TraceParent | undefined;
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

/** How much of an error answer's body is read: enough for any JSON error object. */
const MAX_ERROR_BODY = 8192;

/** What an error body says, each part safe to repeat (redacted, bounded), when it is JSON. */
function errorBody(
  text: string,
  secrets: readonly (string | undefined)[],
): { message?: string; code?: string; type?: string } {
  let body: { error?: { message?: unknown; code?: unknown; type?: unknown } | string; message?: unknown };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return {};
  }
  if (typeof body !== "object" || body === null) return {};
  const raw =
    typeof body.error === "string"
      ? body.error
      : typeof body.error?.message === "string"
        ? body.error.message
        : typeof body.message === "string"
          ? body.message
          : undefined;
  const err = typeof body.error === "object" && body.error !== null ? body.error : undefined;
  const code = safeIdentifier(err?.code);
  const type = safeIdentifier(err?.type);
  return {
    ...(raw !== undefined ? { message: safeUpstreamText(raw, secrets) } : {}),
    ...(code ? { code } : {}),
    ...(type ? { type } : {}),
  };
}

/** A body read with a size limit: the text (at most maxBytes bytes) and whether more was cut. */
export async function readBounded(
  response: Response,
  maxBytes: number,
): Promise<{ text: string; truncated: boolean }> {
  if (!response.body) return { text: "", truncated: false };
  const decoder = new TextDecoder();
  let text = "";
  let bytes = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    const room = maxBytes - bytes;
    if (chunk.byteLength > room) {
      text += decoder.decode(chunk.subarray(0, room));
      // Leaving the loop cancels the body: the rest is never downloaded.
      return { text, truncated: true };
    }
    bytes += chunk.byteLength;
    text += decoder.decode(chunk, { stream: true });
  }
  return { text: text + decoder.decode(), truncated: false };
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
  let span =
    tracing.on && o.trace
      ? startSpan(
          o.method,
          o.trace,
          {
            "http.request.method": o.method,
            "url.full": safeUrl(o.url),
            "server.address": new URL(o.url).hostname,
          },
          KIND.client,
        )
      : undefined;
  const done = () => {
    if (timer) clearTimeout(timer);
    o.signal?.removeEventListener("abort", onClient);
    span?.end();
    span = undefined;
  };
  if (o.signal?.aborted) {
    done();
    throw new ClientAborted();
  }
  arm();
  const headers: Record<string, string> = { accept: o.stream ? "text/event-stream" : "application/json" };
  if (o.apiKey) headers.authorization = `Bearer ${o.apiKey}`;
  if (o.body !== undefined) headers["content-type"] = "application/json";
  injectTrace(headers, span ? parentOf(span) : o.trace);
  let response: Response;
  try {
    response = await fetch(o.url, {
      method: o.method,
      headers,
      ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
      signal: controller.signal,
    });
  } catch (err) {
    span?.setStatus({ code: 2, message: why ?? "no answer" });
    done();
    if (why === "client") throw new ClientAborted();
    if (why === "timeout") {
      throw new AttemptFailure(`no answer from ${safeUrl(o.url)} within ${o.timeoutMs} ms`, true);
    }
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new AttemptFailure(
      `cannot reach ${safeUrl(o.url)}: ${safeUpstreamText(cause?.code ?? cause?.message ?? (err as Error).message, [o.apiKey])}`,
      true,
    );
  }
  span?.setAttribute("http.response.status_code", response.status);
  if (!response.ok) {
    span?.setStatus({ code: 2 });
    let text = "";
    try {
      text = (await readBounded(response, MAX_ERROR_BODY)).text;
    } catch {}
    done();
    const secrets = [o.apiKey];
    const said = errorBody(text, secrets);
    // Not JSON: a short, redacted excerpt (an HTML error page, a proxy's text).
    const shown = said.message ?? (text ? safeUpstreamText(text, secrets, 200) : "");
    const kind = [said.type ? `type ${said.type}` : "", said.code ? `code ${said.code}` : ""].filter(Boolean);
    throw new AttemptFailure(
      `${o.method} ${safeUrl(o.url)} answered HTTP ${response.status}${shown ? `: ${shown}` : ""}${kind.length ? ` (${kind.join(", ")})` : ""}`,
      retryableStatus(response.status),
      response.status,
      parseRetryAfter(response.headers.get("retry-after")),
      said.message,
      said.code,
      said.type,
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

/** One Server-Sent Event: its type (undefined when the upstream named none) and its data. */
export type SseEvent = Pick<EventSourceMessage, "event" | "data">;

/**
 * Reads `response`'s body as Server-Sent Events (eventsource-parser: LF, CRLF and bare-CR line
 * endings, `event:`, `id:` and comment lines) and yields each event as soon as its blank line
 * arrives. Calls `touch` per chunk read (the attempt's idle timeout). A line or an event longer
 * than `maxEventChars` characters ends the stream with a non-retryable AttemptFailure and cancels
 * the body, so an upstream that never sends a newline cannot grow memory without bound.
 */
export async function* readSse(
  response: Response,
  touch: () => void,
  maxEventChars: number,
): AsyncGenerator<SseEvent> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  const events: SseEvent[] = [];
  let overflow = false;
  const parser = createParser({
    maxBufferSize: maxEventChars,
    onEvent: (e) => events.push({ event: e.event, data: e.data }),
    onError: (e) => {
      if (e.type === "max-buffer-size-exceeded") overflow = true;
    },
  });
  const tooLong = () =>
    new AttemptFailure(
      `the upstream sent a Server-Sent Events line or event longer than ${maxEventChars} characters (upstream.maxEventChars); the stream was cut`,
      false,
    );
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    touch();
    parser.feed(decoder.decode(chunk, { stream: true }));
    while (events.length > 0) yield events.shift()!;
    // Throwing here leaves the for-await loop, which cancels the body.
    if (overflow) throw tooLong();
  }
  // An upstream that ends without the last blank line still gets its last event read.
  parser.feed(`${decoder.decode()}\n\n`);
  if (overflow) throw tooLong();
  yield* events;
}
