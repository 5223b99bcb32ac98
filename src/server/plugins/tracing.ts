// The HTTP server span of each request (tracing on), named and attributed per the OpenTelemetry
// HTTP semantic conventions ("POST /v1/models/{model}/predict"), a child of the caller's
// traceparent when one came; the request's log lines then carry trace_id and span_id. With
// tracing off only the caller's traceparent is read, to be passed on as received.
import type { FastifyReply, FastifyRequest } from "fastify";
import { urlPath } from "../../protocol/url-path.js";
import { withTrace } from "../../telemetry/log-fields.js";
import { parseTraceParent } from "../../telemetry/propagation.js";
import { ATTR, type Attributes, KIND, parentOf, startSpan, tracing } from "../../telemetry/spans.js";

interface RouteNames {
  /** Fastify's ":model" route parameters as the semantic conventions' "{model}" template. */
  template: string;
  /** The span name by method ("POST /v1/models/{model}/predict"). */
  spans: Map<string, string>;
}

/** By route, memoized: one string per route and method, rather than one per request. */
const routes = new Map<string, RouteNames>();
function namesOf(route: string): RouteNames {
  let r = routes.get(route);
  if (r === undefined) {
    r = { template: route.replace(/:([A-Za-z0-9_]+)/g, "{$1}"), spans: new Map() };
    routes.set(route, r);
  }
  return r;
}
function spanName(r: RouteNames, method: string): string {
  let name = r.spans.get(method);
  if (name === undefined) {
    name = `${method} ${r.template}`;
    r.spans.set(method, name);
  }
  return name;
}

/** onRequest: the request's trace, and with tracing on its server span and log fields. */
export function traceRequest(request: FastifyRequest, reply: FastifyReply): void {
  const headers = request.raw.headers;
  if (!tracing.on) {
    if (headers.traceparent !== undefined)
      request.trace = parseTraceParent(headers.traceparent, headers.tracestate);
    return;
  }
  const route = request.routeOptions.url;
  // Built up, not spread: this runs for every request.
  const attributes: Attributes = {
    "http.request.method": request.method,
    // The path as the client sent it (the semantic conventions' url.path); what it reached is
    // http.route below.
    "url.path": urlPath(request.url),
    "url.scheme": "http",
    "network.protocol.version": request.raw.httpVersion,
    "client.address": request.ip,
  };
  const names = route ? namesOf(route) : undefined;
  if (names !== undefined) attributes["http.route"] = names.template;
  const agent = headers["user-agent"];
  if (agent) attributes["user_agent.original"] = agent;
  attributes[ATTR.requestId] = request.id;
  const span = startSpan(
    names !== undefined ? spanName(names, request.method) : request.method,
    parseTraceParent(headers.traceparent, headers.tracestate),
    attributes,
    KIND.server,
  );
  request.span = span;
  const parent = parentOf(span);
  request.trace = parent;
  // The ids on the request's log lines (telemetry/log-fields.ts).
  const log = withTrace(request.log, parent);
  if (log !== request.log) {
    request.log = log;
    reply.log = log;
  }
}

/** onResponse (or the client left first): the status and model, then the span ends. */
export function endRequestSpan(request: FastifyRequest, status: number, model: string): void {
  const span = request.span;
  if (span === undefined) return;
  request.span = undefined;
  span.setAttribute("http.response.status_code", status);
  if (model !== "") span.setAttribute(ATTR.model, model);
  // Server spans are errors for 5xx only (a 4xx is the client's).
  if (status >= 500) {
    span.setAttribute("error.type", String(status));
    span.setStatus({ code: 2 });
  }
  span.end();
}
