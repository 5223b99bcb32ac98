// ModelportError: every failure the client reports, whether the server answered with an error
// (its MP_ERR_* code, status, retryable flag, details and request id) or no answer came (the
// client's own MP_ERR_CLIENT_* codes, status 0). Reads the three error shapes modelport answers
// with: native {error: {code, message, retryable, details}}, Open Inference Protocol
// {error: "message", code} and OpenAI's {error: {message, type, param, code}}.

/** Codes the client itself sets, when no modelport error body explains the failure. */
export type ClientErrorCode =
  /** The request failed without an HTTP answer (connection refused, reset, DNS failure). */
  | "MP_ERR_CLIENT_NETWORK"
  /** The call's timeoutMs (or jobs.wait's) passed before an answer. */
  | "MP_ERR_CLIENT_TIMEOUT"
  /** An HTTP error whose body is not a modelport error (a proxy's 502 page, a blob store's 403). */
  | "MP_ERR_CLIENT_HTTP"
  /** A 2xx answer the client could not read (not the JSON or binary it should be). */
  | "MP_ERR_CLIENT_RESPONSE";

export interface ModelportErrorInit {
  code: string;
  message: string;
  /** The HTTP status; 0 when no HTTP answer came. */
  status: number;
  retryable: boolean;
  requestId?: string | undefined;
  details?: unknown;
  /** Retry-After of the answer, in ms. */
  retryAfterMs?: number | undefined;
  cause?: unknown;
}

export class ModelportError extends Error {
  override readonly name = "ModelportError";
  /** An MP_ERR_* code: the server's (docs/Errors.md) or the client's own (MP_ERR_CLIENT_*). */
  readonly code: string;
  /** The HTTP status; 0 when no HTTP answer came. */
  readonly status: number;
  /** The server's word that the same request may succeed later. */
  readonly retryable: boolean;
  /** X-Request-Id of the answer (or the one sent, when no answer came). */
  readonly requestId: string | undefined;
  /** Machine-readable context from the server (input name, shapes, limits), when given. */
  readonly details: unknown;
  /** Retry-After of the answer, in ms, when given. */
  readonly retryAfterMs: number | undefined;

  constructor(init: ModelportErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.retryable = init.retryable;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryAfterMs = init.retryAfterMs;
  }
}

/** True for a ModelportError, also one made by another copy of this module. */
export function isModelportError(err: unknown): err is ModelportError {
  return (
    err instanceof ModelportError || (err instanceof Error && err.name === "ModelportError" && "code" in err)
  );
}

/** Retry-After as ms: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function asRecord(v: unknown): Record<string, unknown> | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

/**
 * The ModelportError for a non-2xx answer, read from its body. For the OIP and OpenAI shapes,
 * which carry no retryable flag, a Retry-After header counts as the server's word that it is.
 */
export async function errorFromResponse(res: Response, sentRequestId?: string): Promise<ModelportError> {
  const requestId = res.headers.get("x-request-id") ?? sentRequestId;
  const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"));
  let text = "";
  try {
    text = await res.text();
  } catch {}
  let body: Record<string, unknown> | undefined;
  try {
    body = asRecord(JSON.parse(text));
  } catch {}
  const base = { status: res.status, requestId, retryAfterMs };
  const err = body?.error;
  const nested = asRecord(err);
  if (nested && typeof nested.message === "string") {
    const code = typeof nested.code === "string" ? nested.code : "MP_ERR_CLIENT_HTTP";
    const details = nested.details ?? (nested.param != null ? { param: nested.param } : undefined);
    return new ModelportError({
      ...base,
      code,
      message: nested.message,
      retryable: typeof nested.retryable === "boolean" ? nested.retryable : retryAfterMs !== undefined,
      details,
    });
  }
  if (typeof err === "string") {
    return new ModelportError({
      ...base,
      code: typeof body?.code === "string" ? body.code : "MP_ERR_CLIENT_HTTP",
      message: err,
      retryable: retryAfterMs !== undefined,
    });
  }
  const snippet = text.replace(/\s+/g, " ").trim().slice(0, 200);
  return new ModelportError({
    ...base,
    code: "MP_ERR_CLIENT_HTTP",
    message: `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}${snippet ? `: ${snippet}` : ""}`,
    retryable: retryAfterMs !== undefined,
  });
}
