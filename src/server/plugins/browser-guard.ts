// Keeps web pages from driving a modelport through the browser of someone who can reach it. Any
// page may send a cross-origin request that needs no CORS preflight (a POST without a body
// unloads a model) to a server on the visitor's machine or network, and through DNS rebinding (a
// name of the page's own that it re-points at 127.0.0.1) even read the answers. Two checks, on
// every request before auth and routing; the probes are exempt (Kubernetes sends them to the pod's
// address, and they change nothing):
// - Host: a server that needs no key answers only to IP literals (v4, [v6]), localhost,
//   *.localhost and server.allowedHosts. Rebinding always uses a DNS name, so IP addresses are
//   safe. A server with keys checks Host only when allowedHosts is set: a rebound page has no key.
//   A request without Host (HTTP/1.0) passes.
// - Origin: on every server, a state-changing request (any method but GET, HEAD and OPTIONS) or a
//   WebSocket upgrade whose Origin is not the request's own (the Host header's host and port) nor
//   in server.allowedOrigins is refused. modelport sends no CORS headers, so no page of another
//   origin is a legitimate client; `Origin: null` (sandboxed frames, file: pages) is another
//   origin. Requests without Origin (curl, SDKs, servers) come from no browser page and pass.
import { isIP } from "node:net";
import type { FastifyInstance } from "fastify";
import { ModelportError } from "../../errors.js";
import { isProbe } from "./auth.js";

export interface BrowserGuardOptions {
  /** server.allowedHosts; undefined when not set. */
  allowedHosts: readonly string[] | undefined;
  /** server.allowedOrigins. */
  allowedOrigins: readonly string[];
  /** Whether every request needs a key (then Host is checked only when allowedHosts is set). */
  keyed: boolean;
}

/** A Host header's parts: the host lowercased ([v6] keeps its brackets, as URL.hostname does) and the port, if any. */
export interface HostParts {
  name: string;
  port?: string;
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
/** Longest host name echoed back in a refusal. */
const MAX_ECHOED = 255;

/** The host and port of a Host header value; undefined when it is not `host[:port]` or `[v6][:port]`. */
export function splitHost(value: string): HostParts | undefined {
  let name: string;
  let rest: string;
  if (value.startsWith("[")) {
    const end = value.indexOf("]");
    if (end < 0 || isIP(value.slice(1, end)) !== 6) return undefined;
    name = value.slice(0, end + 1).toLowerCase();
    rest = value.slice(end + 1);
  } else {
    const colon = value.indexOf(":");
    if (colon !== value.lastIndexOf(":")) return undefined; // an IPv6 address must be bracketed
    name = (colon < 0 ? value : value.slice(0, colon)).toLowerCase();
    rest = colon < 0 ? "" : value.slice(colon);
    if (name === "") return undefined;
  }
  if (rest === "" || rest === ":") return { name };
  if (!/^:\d{1,5}$/.test(rest)) return undefined;
  return { name, port: rest.slice(1) };
}

/** Whether a server that checks Host answers to `name`: an IP literal, localhost, *.localhost, or allowed. */
export function hostAllowed(name: string, allowed: readonly string[]): boolean {
  if (isIP(name) === 4 || (name.startsWith("[") && isIP(name.slice(1, -1)) === 6)) return true;
  if (name === "localhost" || name.endsWith(".localhost")) return true;
  return allowed.some((entry) => {
    const e = entry.toLowerCase();
    return e.startsWith(".") ? name === e.slice(1) || name.endsWith(e) : name === e;
  });
}

/** The origin (scheme://host[:port]) an Origin header names; undefined for `null`, another scheme or garbage. */
function parseOrigin(origin: string): URL | undefined {
  try {
    const u = new URL(origin);
    return u.protocol === "http:" || u.protocol === "https:" ? u : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether `origin` is the request's own: the same host and port as its Host header, whatever the
 * scheme (a proxy in front may end TLS). A Host without a port has the origin's default one.
 */
export function sameOrigin(origin: URL, host: HostParts | undefined): boolean {
  if (host === undefined) return false;
  const defaultPort = origin.protocol === "https:" ? "443" : "80";
  return origin.hostname === host.name && (origin.port || defaultPort) === (host.port ?? defaultPort);
}

export function registerBrowserGuard(app: FastifyInstance, options: BrowserGuardOptions): void {
  const hosts = options.allowedHosts;
  const checkHost = hosts === undefined ? !options.keyed : !hosts.includes("*");
  const anyOrigin = options.allowedOrigins.includes("*");
  const origins = new Set(options.allowedOrigins.map((o) => parseOrigin(o)?.origin ?? o));
  // A callback hook, not an async one: no promise and no microtask turn on every request.
  app.addHook("onRequest", (request, _reply, done) => {
    const { headers } = request;
    const origin = headers.origin;
    const changes = !SAFE_METHODS.has(request.method) || headers.upgrade !== undefined;
    if ((!checkHost && (origin === undefined || !changes || anyOrigin)) || isProbe(request)) {
      done();
      return;
    }
    const host = headers.host === undefined ? undefined : splitHost(headers.host);
    if (
      checkHost &&
      headers.host !== undefined &&
      (host === undefined || !hostAllowed(host.name, hosts ?? []))
    ) {
      const shown =
        host === undefined ? "the Host header is malformed" : `'${host.name.slice(0, MAX_ECHOED)}'`;
      done(
        new ModelportError(
          "MP_ERR_HOST_NOT_ALLOWED",
          host === undefined
            ? `${shown}; send host[:port]`
            : `host ${shown} is not one this server answers to: without keys it answers IP addresses, localhost and server.allowedHosts; if it is this server's own name, add it there (or --allowed-host)`,
          host === undefined ? undefined : { host: host.name.slice(0, MAX_ECHOED) },
        ),
      );
      return;
    }
    if (origin !== undefined && changes && !anyOrigin) {
      const parsed = parseOrigin(origin);
      if (parsed === undefined || (!sameOrigin(parsed, host) && !origins.has(parsed.origin))) {
        const shown = parsed?.origin.slice(0, MAX_ECHOED);
        done(
          new ModelportError(
            "MP_ERR_ORIGIN_NOT_ALLOWED",
            `a ${request.method} from a web page of another origin (${shown ?? "an opaque or malformed origin"}) is refused; list origins whose pages may call this server in server.allowedOrigins (or --allowed-origin)`,
            shown === undefined ? undefined : { origin: shown },
          ),
        );
        return;
      }
    }
    done();
  });
}
