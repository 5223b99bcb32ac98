// Webhooks: the signed POST that tells a client its job finished, in the Standard Webhooks format
// (https://www.standardwebhooks.com): `webhook-id`, `webhook-timestamp` and
// `webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, so any Standard
// Webhooks library verifies it and the delivery id is covered by the signature. The earlier
// Stripe-style headers (X-Modelport-Signature over "<t>.<body>", X-Modelport-Delivery,
// X-Modelport-Event) are still sent for one release, deprecated. Each attempt connects only to the
// addresses the callback check (callback-url.ts) approved at that attempt.
import { createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import type { LookupAddress } from "node:dns";
import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import { ModelportError } from "../errors.js";
import { injectTrace, type TraceParent } from "../telemetry/propagation.js";
import { KIND, parentOf, SPAN, startSpan, tracing } from "../telemetry/spans.js";
import { VERSION } from "../version.js";
import { type CheckedCallback, checkCallbackUrl, type LookupFn } from "./callback-url.js";

/** A job's webhook delivery, as the job record keeps it. */
export interface WebhookState {
  url: string;
  /** Delivery attempts made so far. */
  attempts: number;
  /** HTTP status of the last attempt, when one answered. */
  lastStatus?: number;
  lastError?: string;
  /** When a delivery was acknowledged with a 2xx (ms since epoch). */
  deliveredAt?: number;
}

export {
  allowPrivateProblems,
  type CheckCallbackOptions,
  type CheckedCallback,
  checkCallbackUrl,
  type LookupFn,
  privateKind,
} from "./callback-url.js";

export const ID_HEADER = "webhook-id";
export const TIMESTAMP_HEADER = "webhook-timestamp";
export const STANDARD_SIGNATURE_HEADER = "webhook-signature";
/** @deprecated sent for one more release; verify webhook-signature instead. */
export const SIGNATURE_HEADER = "x-modelport-signature";
/** @deprecated sent for one more release; the body's "event" field says the same. */
export const EVENT_HEADER = "x-modelport-event";
/** @deprecated sent for one more release; use webhook-id (which is signed). */
export const DELIVERY_HEADER = "x-modelport-delivery";

// ---------------------------------------------------------------------------------------------
// Standard Webhooks signing

const WHSEC = "whsec_";

/**
 * The HMAC key a configured secret stands for. `whsec_<base64>` (the Standard Webhooks form):
 * the decoded bytes, at least 16 of them. Any other string: its UTF-8 bytes as they are (a
 * receiver then verifies with `new Webhook(secret, { format: "raw" })`).
 * @throws ModelportError MP_ERR_CONFIG_INVALID for a `whsec_` secret that is not base64 or too short.
 */
export function webhookKey(secret: string): Buffer {
  if (!secret.startsWith(WHSEC)) return Buffer.from(secret, "utf8");
  const b64 = secret.slice(WHSEC.length);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0)
    throw new ModelportError(
      "MP_ERR_CONFIG_INVALID",
      "the webhook secret starts with whsec_ but the rest is not standard base64",
    );
  const key = Buffer.from(b64, "base64");
  if (key.length < 16)
    throw new ModelportError(
      "MP_ERR_CONFIG_INVALID",
      `the webhook secret's whsec_ key is ${key.length} bytes; use at least 16 (24 to 64 is usual)`,
    );
  return key;
}

/**
 * The webhook secret in effect: `jobs.webhooks.secret`, else MODELPORT_WEBHOOK_SECRET, else none.
 * @throws ModelportError MP_ERR_CONFIG_INVALID when the one chosen is malformed (see webhookKey).
 */
export function resolveWebhookSecret(configured: string | undefined, env: NodeJS.ProcessEnv = process.env) {
  const secret = configured ?? (env["MODELPORT_WEBHOOK_SECRET"] || undefined);
  if (secret !== undefined) webhookKey(secret);
  return secret;
}

/** `v1,<base64 HMAC-SHA256(key, "<id>.<timestampSeconds>.<body>")>`: the webhook-signature value. */
export function signStandardWebhook(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string | Buffer,
): string {
  const t = Math.floor(timestampSeconds);
  const mac = createHmac("sha256", webhookKey(secret)).update(`${id}.${t}.`).update(body).digest("base64");
  return `v1,${mac}`;
}

// ---------------------------------------------------------------------------------------------
// The deprecated X-Modelport-Signature (kept for one release)

/**
 * `t=<timestampSeconds>,v1=<hex HMAC-SHA256(secret, "<timestampSeconds>.<body>")>`, keyed with the
 * secret string as configured. @deprecated it does not cover the delivery id; use webhook-signature.
 */
export function signWebhook(secret: string, timestampSeconds: number, body: string | Buffer): string {
  const t = Math.floor(timestampSeconds);
  return `t=${t},v1=${hmacHex(secret, t, body)}`;
}

/**
 * True when `header` (the X-Modelport-Signature value) carries a v1 signature of `body` made
 * with `secret`, and its timestamp is within `toleranceSeconds` of `nowSeconds` (default: the
 * clock). Pass the body exactly as received (raw bytes or the undecoded string), not re-serialized
 * JSON. Several v1 entries are allowed (any may match); the compare is constant-time.
 * @deprecated the delivery id is not signed; verify webhook-signature with a Standard Webhooks library.
 */
export function verifyWebhook(
  secret: string,
  header: string | null | undefined,
  body: string | Buffer,
  toleranceSeconds = 300,
  nowSeconds: number = Date.now() / 1000,
): boolean {
  if (typeof header !== "string" || header.length > 4096) return false;
  let t: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === "t" && /^\d{1,12}$/.test(value)) t = Number(value);
    else if (name === "v1" && /^[0-9a-f]{64}$/i.test(value)) signatures.push(Buffer.from(value, "hex"));
  }
  if (t === undefined || signatures.length === 0) return false;
  if (!(Math.abs(nowSeconds - t) <= toleranceSeconds)) return false;
  const expected = Buffer.from(hmacHex(secret, t, body), "hex");
  let ok = false;
  for (const sig of signatures) if (timingSafeEqual(sig, expected)) ok = true;
  return ok;
}

function hmacHex(secret: string, t: number, body: string | Buffer): string {
  return createHmac("sha256", secret).update(`${t}.`).update(body).digest("hex");
}

// ---------------------------------------------------------------------------------------------
// Delivery

export interface DeliverWebhookOptions {
  url: string;
  /** The JSON body, as text (signed and sent byte for byte) or a value to JSON.stringify. */
  body: string | object;
  /** The secret (`whsec_<base64>` or a plain string, see webhookKey); when empty or absent the
   * request carries no webhook-signature (nor X-Modelport-Signature). */
  secret?: string;
  /** X-Modelport-Event; default "job.finished". */
  event?: string;
  /** webhook-id (and X-Modelport-Delivery), the same on every retry; default a random UUID. Pass
   * a stable one (e.g. derived from the job id) to keep it across process restarts. */
  deliveryId?: string;
  /** Per-attempt limit: connect, send and response headers. */
  timeoutMs: number;
  /** Total attempts, counting those already in `state`. */
  maxAttempts: number;
  allowPrivate: readonly string[];
  /** Longest wait for resolving the callback host at each attempt; past it the attempt fails
   * and is retried like a network error. */
  lookupTimeoutMs?: number;
  /** Called (and awaited) after every attempt with the state so far; a throw stops the delivery. */
  onAttempt?: (state: WebhookState) => void | Promise<void>;
  /** Resume from an earlier delivery's state (its attempts count toward maxAttempts). */
  state?: WebhookState;
  /** Backoff: base × 2^(n−1) after the n-th attempt failed, capped, with jitter (50–100 %). */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** Longest wait honoured from a Retry-After header; default backoffMaxMs. */
  retryAfterMaxMs?: number;
  /** Stops waiting and retrying (shutdown); the state so far is returned. */
  signal?: AbortSignal;
  /** Injectable for tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Milliseconds since epoch; signs with its seconds and stamps deliveredAt. */
  now?: () => number;
  random?: () => number;
  lookup?: LookupFn;
  /**
   * The trace the delivery belongs to (the job attempt's): each attempt sends its traceparent,
   * from a modelport.webhook client span when tracing is on, else as given.
   */
  trace?: TraceParent;
}

interface AttemptOutcome {
  status?: number;
  error?: string;
  retryAfterMs?: number;
  /** Try again (network error, timeout, 408, 429, 5xx). */
  retry: boolean;
}

/** POSTs the webhook until a 2xx, a permanent failure or maxAttempts; returns the final state. */
export async function deliverWebhook(options: DeliverWebhookOptions): Promise<WebhookState> {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? defaultSleep;
  const random = options.random ?? Math.random;
  const base = options.backoffBaseMs ?? 500;
  const cap = options.backoffMaxMs ?? 30_000;
  const retryAfterCap = options.retryAfterMaxMs ?? cap;
  const maxAttempts = Math.max(1, options.maxAttempts);
  const body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
  const deliveryId = options.deliveryId ?? randomUUID();
  if (options.secret) webhookKey(options.secret); // a malformed whsec_ secret fails before any attempt
  const event = options.event ?? "job.finished";

  const state: WebhookState = { ...(options.state ?? { attempts: 0 }), url: options.url };
  while (state.attempts < maxAttempts && state.deliveredAt === undefined && !options.signal?.aborted) {
    const outcome = await attempt(options, body, event, deliveryId, now);
    state.attempts += 1;
    if (outcome.status !== undefined) state.lastStatus = outcome.status;
    else delete state.lastStatus;
    if (outcome.error !== undefined) state.lastError = outcome.error;
    else delete state.lastError;
    if (outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300)
      state.deliveredAt = now();
    await options.onAttempt?.({ ...state });
    if (state.deliveredAt !== undefined || !outcome.retry || state.attempts >= maxAttempts) break;
    const backoff = Math.min(cap, base * 2 ** (state.attempts - 1)) * (0.5 + random() / 2);
    const delay =
      outcome.retryAfterMs !== undefined ? Math.min(retryAfterCap, outcome.retryAfterMs) : backoff;
    try {
      await sleep(Math.round(delay), options.signal);
    } catch {
      break; // aborted
    }
  }
  return { ...state };
}

async function attempt(
  options: DeliverWebhookOptions,
  body: string,
  event: string,
  deliveryId: string,
  now: () => number,
): Promise<AttemptOutcome> {
  let target: CheckedCallback;
  try {
    target = await checkCallbackUrl(options.url, options.allowPrivate, {
      ...(options.lookup ? { lookup: options.lookup } : {}),
      ...(options.lookupTimeoutMs !== undefined ? { lookupTimeoutMs: options.lookupTimeoutMs } : {}),
    });
  } catch (err) {
    const e = err as ModelportError;
    // DNS may come back; a refused address or scheme will not.
    return { error: `refused: ${e.message}`, retry: e.details?.["reason"] === "unresolvable" };
  }

  const seconds = Math.floor(now() / 1000);
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(body)),
    "user-agent": `modelport/${VERSION}`,
    [ID_HEADER]: deliveryId,
    [TIMESTAMP_HEADER]: String(seconds),
    [EVENT_HEADER]: event,
    [DELIVERY_HEADER]: deliveryId,
  };
  if (options.secret) {
    headers[STANDARD_SIGNATURE_HEADER] = signStandardWebhook(options.secret, deliveryId, seconds, body);
    headers[SIGNATURE_HEADER] = signWebhook(options.secret, seconds, body);
  }

  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  const span =
    tracing.on && options.trace
      ? startSpan(
          SPAN.webhook,
          options.trace,
          // No query string: a callback URL may carry a token there.
          {
            "http.request.method": "POST",
            "url.full": `${target.url.origin}${target.url.pathname}`,
            "server.address": target.hostname,
          },
          KIND.client,
        )
      : undefined;
  injectTrace(headers, span ? parentOf(span) : options.trace);
  const outcome = await send(options, target, headers, body, signal, timeout, now);
  if (span) {
    if (outcome.status !== undefined) span.setAttribute("http.response.status_code", outcome.status);
    if (outcome.error !== undefined) span.setStatus({ code: 2, message: outcome.error });
    span.end();
  }
  return outcome;
}

/** One POST of the delivery, its answer as an outcome. */
async function send(
  options: DeliverWebhookOptions,
  target: CheckedCallback,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
  timeout: AbortSignal,
  now: () => number,
): Promise<AttemptOutcome> {
  try {
    const res = await post(target, headers, body, signal);
    const status = res.statusCode ?? 0;
    res.on("error", () => {});
    res.resume(); // the body is not read; drain it so the socket can close
    if (status >= 200 && status < 300) return { status, retry: false };
    const retry = status === 408 || status === 429 || status >= 500;
    const retryAfterMs = retry ? parseRetryAfter(res.headers["retry-after"], now()) : undefined;
    return {
      status,
      error: status >= 300 && status < 400 ? `HTTP ${status} (redirects are not followed)` : `HTTP ${status}`,
      retry,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    };
  } catch (err) {
    if (timeout.aborted) return { error: `timed out after ${options.timeoutMs} ms`, retry: true };
    if (options.signal?.aborted) return { error: "delivery aborted", retry: false };
    const e = err as NodeJS.ErrnoException;
    return { error: e.code ? `${e.code}: ${e.message}` : e.message, retry: true };
  }
}

/** One POST to the checked addresses only: Host and SNI stay the URL's hostname. */
function post(
  target: CheckedCallback,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
): Promise<IncomingMessage> {
  const { url, hostname, addresses } = target;
  const pinnedLookup: RequestOptions["lookup"] = (_host, opts, cb) => {
    const fam = typeof opts === "object" && opts ? opts.family : undefined;
    const pick = fam === 4 || fam === 6 ? addresses.filter((a) => a.family === fam) : addresses;
    const list = pick.length ? pick : addresses;
    if (typeof opts === "object" && opts?.all) (cb as (e: null, a: LookupAddress[]) => void)(null, list);
    else (cb as (e: null, a: string, f: number) => void)(null, list[0]!.address, list[0]!.family);
  };
  const options: RequestOptions = {
    method: "POST",
    host: hostname,
    port: url.port || (url.protocol === "https:" ? 443 : 80),
    path: `${url.pathname}${url.search}`,
    headers,
    lookup: pinnedLookup,
    signal,
    agent: false,
    ...(url.username || url.password
      ? { auth: `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` }
      : {}),
  };
  return new Promise((resolve, reject) => {
    const req = (url.protocol === "https:" ? httpsRequest : httpRequest)(options, resolve);
    req.on("error", reject);
    req.end(body);
  });
}

function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
