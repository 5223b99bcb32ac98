// Webhooks: the signed POST that tells a client its job finished. Signatures are Stripe-style
// (t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">) so receivers can check both origin and
// freshness. Callback URLs are checked against private, loopback and link-local addresses (SSRF)
// at submission and again at every attempt, and each attempt connects to exactly the addresses
// that check approved, so a DNS answer that changes in between (rebinding) cannot redirect it.
import { createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import type { LookupAddress } from "node:dns";
import { lookup as dnsLookup } from "node:dns/promises";
import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { ModelportError } from "../errors.js";
import type { WebhookState } from "../jobs/job.js";
import { VERSION } from "../version.js";

export const SIGNATURE_HEADER = "x-modelport-signature";
export const EVENT_HEADER = "x-modelport-event";
export const DELIVERY_HEADER = "x-modelport-delivery";

// ---------------------------------------------------------------------------------------------
// Signing

/** `t=<timestampSeconds>,v1=<hex HMAC-SHA256(secret, "<timestampSeconds>.<body>")>`. */
export function signWebhook(secret: string, timestampSeconds: number, body: string | Buffer): string {
  const t = Math.floor(timestampSeconds);
  return `t=${t},v1=${hmacHex(secret, t, body)}`;
}

/**
 * True when `header` (the X-Modelport-Signature value) carries a v1 signature of `body` made
 * with `secret`, and its timestamp is within `toleranceSeconds` of `nowSeconds` (default: the
 * clock). Pass the body exactly as received (raw bytes or the undecoded string), not re-serialized
 * JSON. Several v1 entries are allowed (any may match); the compare is constant-time.
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
// Callback URL checks (SSRF)

export type LookupFn = (hostname: string) => Promise<LookupAddress[]>;

const systemLookup: LookupFn = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

export interface CheckedCallback {
  url: URL;
  /** The host without IPv6 brackets, as connected to and sent in Host / SNI. */
  hostname: string;
  /** The addresses the check approved; delivery connects only to these. */
  addresses: LookupAddress[];
}

export interface CheckCallbackOptions {
  /** DNS resolution (all addresses); default: dns.lookup. Injectable for tests. */
  lookup?: LookupFn;
}

type RefusalReason = "scheme" | "url" | "unresolvable" | "private";

/**
 * Resolves the callback URL's host and refuses it (ModelportError MP_ERR_JOB_CALLBACK_REFUSED)
 * unless it is http(s) and every address is public, or allowed by `allowPrivate` (hostnames,
 * IPs or CIDRs, IPv4 and IPv6). Returns the approved addresses for delivery to connect to.
 */
export async function checkCallbackUrl(
  url: string,
  allowPrivate: readonly string[],
  options: CheckCallbackOptions = {},
): Promise<CheckedCallback> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw refused("url", `callback_url ${JSON.stringify(url)} is not a valid URL`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw refused("scheme", `callback_url must be http or https, not ${parsed.protocol.replace(/:$/, "")}`);
  const hostname = parsed.hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (!hostname) throw refused("url", "callback_url has no host");
  const allow = compileAllowList(allowPrivate);
  const hostAllowed = allow.hosts.has(hostname.replace(/\.$/, ""));

  let addresses: LookupAddress[];
  const family = isIP(hostname);
  if (family) addresses = [{ address: hostname, family }];
  else {
    try {
      addresses = await (options.lookup ?? systemLookup)(hostname);
    } catch (err) {
      throw refused(
        "unresolvable",
        `callback_url host ${hostname} could not be resolved (${(err as Error).message})`,
        { host: hostname },
      );
    }
    if (addresses.length === 0)
      throw refused("unresolvable", `callback_url host ${hostname} has no address`, { host: hostname });
  }

  if (!hostAllowed) {
    for (const { address } of addresses) {
      const kind = privateKind(address);
      if (kind && !allow.matches(address)) {
        const where = family ? address : `${hostname} resolves to ${address}, which`;
        const how = family
          ? `add "${address}" (or a CIDR holding it)`
          : `add "${hostname}" (or ${address}, or a CIDR holding it)`;
        throw refused(
          "private",
          `callback_url refused: ${where} is ${article(kind)} ${kind} address; to allow it, ${how} ` +
            "to jobs.webhooks.allowPrivate",
          { host: hostname, address, kind },
        );
      }
    }
  }
  return { url: parsed, hostname, addresses };
}

function article(word: string): string {
  return /^[aeiou]/i.test(word) && !/^uni/i.test(word) ? "an" : "a";
}

function refused(
  reason: RefusalReason,
  message: string,
  details: Record<string, unknown> = {},
): ModelportError {
  return new ModelportError("MP_ERR_JOB_CALLBACK_REFUSED", message, { reason, ...details });
}

/** Parsed IP as a big-endian bit string holder: 32 bits for IPv4, 128 for IPv6. */
interface Ip {
  v: 4 | 6;
  n: bigint;
}

function parseIp(text: string): Ip | undefined {
  const s = text.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, ""); // brackets and zone id
  const fam = isIP(s);
  if (fam === 4) {
    let n = 0n;
    for (const p of s.split(".")) n = (n << 8n) | BigInt(Number(p));
    return { v: 4, n };
  }
  if (fam !== 6) return undefined;
  // isIP vouched for the syntax: expand "::" and a dotted IPv4 tail into eight 16-bit groups.
  let rest = s;
  const tail: bigint[] = [];
  const lastColon = rest.lastIndexOf(":");
  if (rest.slice(lastColon + 1).includes(".")) {
    const v4 = parseIp(rest.slice(lastColon + 1))!;
    tail.push(v4.n >> 16n, v4.n & 0xffffn);
    rest = rest.slice(0, lastColon + 1);
    if (!rest.endsWith("::")) rest = rest.slice(0, -1);
  }
  const split = (part: string) => (part ? part.split(":") : []);
  const dbl = rest.indexOf("::");
  let groups: string[];
  if (dbl < 0) groups = split(rest);
  else {
    const head = split(rest.slice(0, dbl));
    const after = split(rest.slice(dbl + 2));
    groups = [...head, ...Array<string>(8 - tail.length - head.length - after.length).fill("0"), ...after];
  }
  let n = 0n;
  for (const g of groups) n = (n << 16n) | BigInt(Number.parseInt(g, 16));
  for (const t of tail) n = (n << 16n) | t;
  return { v: 6, n };
}

interface Cidr {
  v: 4 | 6;
  base: bigint;
  bits: number;
}

function parseCidr(text: string): Cidr | undefined {
  const slash = text.lastIndexOf("/");
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!ip) return undefined;
  const width = ip.v === 4 ? 32 : 128;
  const bitsText = slash < 0 ? String(width) : text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(bitsText)) return undefined;
  const bits = Number(bitsText);
  if (bits > width) return undefined;
  return { v: ip.v, base: mask(ip.n, bits, width), bits };
}

function mask(n: bigint, bits: number, width: number): bigint {
  if (bits === 0) return 0n;
  const shift = BigInt(width - bits);
  return (n >> shift) << shift;
}

function inCidr(ip: Ip, c: Cidr): boolean {
  return ip.v === c.v && mask(ip.n, c.bits, ip.v === 4 ? 32 : 128) === c.base;
}

/** The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible or NAT64 IPv6 one. */
function embeddedIpv4(ip: Ip): Ip | undefined {
  if (ip.v !== 6) return undefined;
  const low = ip.n & 0xffffffffn;
  const high = ip.n >> 32n;
  if (high === 0xffffn) return { v: 4, n: low }; // ::ffff:0:0/96 mapped
  if (high === 0x64ff9b0000000000000000n) return { v: 4, n: low }; // 64:ff9b::/96 NAT64
  if (high === 0n && low > 1n) return { v: 4, n: low }; // ::a.b.c.d (deprecated compatible)
  return undefined;
}

const DENY: { cidr: Cidr; kind: string }[] = (
  [
    ["0.0.0.0/8", "unspecified ('this network')"],
    ["10.0.0.0/8", "private"],
    ["100.64.0.0/10", "carrier-grade NAT (shared)"],
    ["127.0.0.0/8", "loopback"],
    ["169.254.0.0/16", "link-local"],
    ["172.16.0.0/12", "private"],
    ["192.0.0.0/24", "IETF protocol assignment"],
    ["192.168.0.0/16", "private"],
    ["198.18.0.0/15", "benchmarking"],
    ["224.0.0.0/4", "multicast"],
    ["240.0.0.0/4", "reserved or broadcast"],
    ["::/128", "unspecified"],
    ["::1/128", "loopback"],
    ["fc00::/7", "unique-local"],
    ["fe80::/10", "link-local"],
    ["fec0::/10", "site-local"],
    ["ff00::/8", "multicast"],
  ] as const
).map(([c, kind]) => ({ cidr: parseCidr(c)!, kind }));

/** What kind of non-public address `address` is, or undefined when it is public. */
export function privateKind(address: string): string | undefined {
  const ip = parseIp(address);
  if (!ip) return "unparseable";
  const v4 = embeddedIpv4(ip);
  const hit = DENY.find((d) => inCidr(ip, d.cidr));
  if (hit) return hit.kind;
  if (v4) {
    const inner = DENY.find((d) => inCidr(v4, d.cidr));
    if (inner) return `${inner.kind} (IPv4 inside IPv6)`;
  }
  return undefined;
}

interface AllowList {
  hosts: Set<string>;
  matches(address: string): boolean;
}

/** What is wrong with allowPrivate entries (malformed CIDRs), for validating the configuration at start-up. */
export function allowPrivateProblems(entries: readonly string[]): string[] {
  return entries
    .filter((raw) => raw.includes("/") && !parseCidr(raw.trim().toLowerCase()))
    .map((raw) => `${JSON.stringify(raw)} is neither a hostname, an IP nor a CIDR`);
}

const allowCache = new WeakMap<readonly string[], AllowList>();

/** allowPrivate entries: IPs and CIDRs match addresses (also IPv4 inside IPv6); the rest are hostnames. */
function compileAllowList(entries: readonly string[]): AllowList {
  const cached = allowCache.get(entries);
  if (cached) return cached;
  const hosts = new Set<string>();
  const cidrs: Cidr[] = [];
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase();
    const cidr = parseCidr(entry);
    if (cidr) cidrs.push(cidr);
    else if (entry.includes("/"))
      throw new ModelportError(
        "MP_ERR_CONFIG_INVALID",
        `jobs.webhooks.allowPrivate: ${JSON.stringify(raw)} is neither a hostname, an IP nor a CIDR`,
      );
    else hosts.add(entry.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, ""));
  }
  const list: AllowList = {
    hosts,
    matches(address) {
      const ip = parseIp(address);
      if (!ip) return false;
      const v4 = embeddedIpv4(ip);
      return cidrs.some((c) => inCidr(ip, c) || (v4 !== undefined && inCidr(v4, c)));
    },
  };
  allowCache.set(entries, list);
  return list;
}

// ---------------------------------------------------------------------------------------------
// Delivery

export interface DeliverWebhookOptions {
  url: string;
  /** The JSON body, as text (signed and sent byte for byte) or a value to JSON.stringify. */
  body: string | object;
  /** HMAC key; when empty or absent the request carries no X-Modelport-Signature. */
  secret?: string;
  /** X-Modelport-Event; default "job.finished". */
  event?: string;
  /** X-Modelport-Delivery, the same on every retry; default a random UUID. Pass a stable one
   * (e.g. derived from the job id) to keep it across process restarts. */
  deliveryId?: string;
  /** Per-attempt limit: connect, send and response headers. */
  timeoutMs: number;
  /** Total attempts, counting those already in `state`. */
  maxAttempts: number;
  allowPrivate: readonly string[];
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
    });
  } catch (err) {
    const e = err as ModelportError;
    // DNS may come back; a refused address or scheme will not.
    return { error: `refused: ${e.message}`, retry: e.details?.["reason"] === "unresolvable" };
  }

  const headers: Record<string, string> = {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(body)),
    "user-agent": `modelport/${VERSION}`,
    [EVENT_HEADER]: event,
    [DELIVERY_HEADER]: deliveryId,
  };
  if (options.secret) headers[SIGNATURE_HEADER] = signWebhook(options.secret, now() / 1000, body);

  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
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
