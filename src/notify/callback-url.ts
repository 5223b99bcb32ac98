// Callback URL checks (SSRF): a webhook may only go to an http(s) URL whose every address is
// ordinary public unicast, unless the operator allowed it. The check fails closed: an address is
// accepted only when ipaddr.js classifies it as "unicast" (IPv4-mapped forms are unwrapped first),
// so ranges that carry or translate to another IPv4 address (6to4, Teredo, NAT64, IPv4-translated,
// IPv4-compatible) and every reserved range are refused, including ones added to the registries
// later. Operator exceptions (jobs.webhooks.allowPrivate) are hostnames, or IPs and CIDRs held in
// a net.BlockList. Name resolution has a time limit, so a stuck resolver cannot hold a submission
// or a delivery attempt.
import type { LookupAddress } from "node:dns";
import { lookup as dnsLookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import ipaddr from "ipaddr.js";
import { ModelportError } from "../errors.js";

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
  /** Longest wait for the resolution (jobs.webhooks.dnsTimeoutMs); default 3000 ms. */
  lookupTimeoutMs?: number;
}

/** Used only when a caller passes no limit; the configured default is jobs.webhooks.dnsTimeoutMs. */
const FALLBACK_LOOKUP_TIMEOUT_MS = 3000;

type RefusalReason = "scheme" | "url" | "unresolvable" | "private";

/**
 * Resolves the callback URL's host and refuses it (ModelportError MP_ERR_JOB_CALLBACK_REFUSED)
 * unless it is http(s) and every address is public unicast, or allowed by `allowPrivate`
 * (hostnames, IPs or CIDRs, IPv4 and IPv6). Returns the approved addresses for delivery to
 * connect to. A resolution that fails or takes longer than the limit is reason "unresolvable".
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
    const timeoutMs = options.lookupTimeoutMs ?? FALLBACK_LOOKUP_TIMEOUT_MS;
    try {
      addresses = await withTimeout((options.lookup ?? systemLookup)(hostname), timeoutMs);
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

/**
 * Rejects with "timed out after N ms" when `work` has not settled by then. The system resolver
 * cannot be cancelled: an abandoned getaddrinfo keeps its libuv thread until it returns.
 */
function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  work.catch(() => {}); // a late failure of the abandoned lookup is not unhandled
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
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

/** Words for ipaddr.js range names in refusal messages; a name missing here is shown as it is. */
const KIND_WORDS: Record<string, string> = {
  unspecified: "unspecified",
  broadcast: "broadcast",
  multicast: "multicast",
  linkLocal: "link-local",
  loopback: "loopback",
  carrierGradeNat: "carrier-grade NAT (shared)",
  private: "private",
  reserved: "reserved",
  uniqueLocal: "unique-local",
  ipv4Mapped: "IPv4-mapped",
  deprecatedSiteLocal: "site-local",
  discard: "discard-only",
  rfc6145: "IPv4-translated (::ffff:0:0:0/96)",
  rfc6052: "NAT64 (IPv4 inside IPv6)",
  "6to4": "6to4 (IPv4 inside IPv6)",
  teredo: "Teredo (IPv4 inside IPv6)",
  benchmarking: "benchmarking",
};

/** ::/96 (IPv4-compatible, deprecated): ipaddr.js calls the hex forms of it "unicast". */
const IPV4_COMPATIBLE = ipaddr.parseCIDR("::/96");

/**
 * What kind of non-public address `address` is, or undefined when it may be called: only what
 * ipaddr.js classifies as "unicast" passes, after unwrapping an IPv4-mapped form.
 */
export function privateKind(address: string): string | undefined {
  const text = address.replace(/^\[(.*)\]$/, "$1");
  if (/%/.test(text)) return "scoped (zone id)";
  if (!ipaddr.isValid(text) || !isIP(text)) return "unparseable";
  const ip = ipaddr.process(text);
  const range = ip.range();
  if (range !== "unicast") return KIND_WORDS[range] ?? range;
  if (ip.kind() === "ipv6" && (ip as ipaddr.IPv6).match(IPV4_COMPATIBLE))
    return "IPv4-compatible (deprecated, ::/96)";
  return undefined;
}

interface AllowList {
  hosts: Set<string>;
  matches(address: string): boolean;
}

type AllowEntry =
  | { kind: "host"; host: string }
  | { kind: "net"; ip: ipaddr.IPv4 | ipaddr.IPv6; bits: number };

/** One allowPrivate entry: an IP, a CIDR, or else a hostname; undefined when it has a "/" but is no CIDR. */
function parseAllowEntry(raw: string): AllowEntry | undefined {
  const entry = raw
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1");
  if (entry.includes("/")) {
    const slash = entry.lastIndexOf("/");
    const addr = entry.slice(0, slash).replace(/^\[(.*)\]$/, "$1");
    const bitsText = entry.slice(slash + 1);
    if (!isIP(addr) || !/^\d{1,3}$/.test(bitsText)) return undefined;
    const bits = Number(bitsText);
    const ip = ipaddr.parse(addr);
    if (bits > (ip.kind() === "ipv4" ? 32 : 128)) return undefined;
    return { kind: "net", ip, bits };
  }
  if (isIP(entry)) {
    const ip = ipaddr.parse(entry);
    return { kind: "net", ip, bits: ip.kind() === "ipv4" ? 32 : 128 };
  }
  return { kind: "host", host: entry.replace(/\.$/, "") };
}

/** What is wrong with allowPrivate entries (malformed CIDRs), for validating the configuration at start-up. */
export function allowPrivateProblems(entries: readonly string[]): string[] {
  return entries
    .filter((raw) => parseAllowEntry(raw) === undefined)
    .map((raw) => `${JSON.stringify(raw)} is neither a hostname, an IP nor a CIDR`);
}

const allowCache = new WeakMap<readonly string[], AllowList>();

/**
 * allowPrivate entries: IPs and CIDRs go into a net.BlockList (which also matches an IPv4 entry
 * against the IPv4-mapped IPv6 form); the rest are hostnames, matched exactly.
 */
function compileAllowList(entries: readonly string[]): AllowList {
  const cached = allowCache.get(entries);
  if (cached) return cached;
  const hosts = new Set<string>();
  const nets = new BlockList();
  for (const raw of entries) {
    const entry = parseAllowEntry(raw);
    if (!entry)
      throw new ModelportError(
        "MP_ERR_CONFIG_INVALID",
        `jobs.webhooks.allowPrivate: ${JSON.stringify(raw)} is neither a hostname, an IP nor a CIDR`,
      );
    if (entry.kind === "host") hosts.add(entry.host);
    else {
      // An IPv4-mapped entry (::ffff:a.b.c.d/n with n ≥ 96) allows the IPv4 range it maps.
      let { ip, bits } = entry;
      if (ip.kind() === "ipv6" && (ip as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
        ip = (ip as ipaddr.IPv6).toIPv4Address();
        bits -= 96;
      }
      nets.addSubnet(ip.toString(), bits, ip.kind() === "ipv4" ? "ipv4" : "ipv6");
    }
  }
  const list: AllowList = {
    hosts,
    matches(address) {
      const text = address.replace(/^\[(.*)\]$/, "$1");
      if (!ipaddr.isValid(text) || !isIP(text)) return false;
      const ip = ipaddr.process(text);
      return nets.check(ip.toString(), ip.kind() === "ipv4" ? "ipv4" : "ipv6");
    },
  };
  allowCache.set(entries, list);
  return list;
}
