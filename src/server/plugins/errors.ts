// Maps every failure to one wire shape with an MP_ERR_* code: native routes answer
// {error: {code, message, retryable}}, Open Inference Protocol routes {error: "...", code},
// OpenAI-compatible routes {error: {message, type, param, code}}. The root answers natively;
// the OIP and OpenAI surfaces set their own error handler in their plugin's scope, so hooks
// (auth, drain) and body parsing answer in the style of the route they reached.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ModelportError } from "../../errors.js";
import { REQUEST_ID_HEADER } from "../../protocol/headers.js";
import { urlPath } from "../../protocol/url-path.js";

/** What a 413 advises by default: the limit of predict and infer bodies, and how to keep under it. */
const ROWS_ADVICE = "send fewer rows per request or raise limits.maxBodyBytes";

/**
 * Translates Fastify's own errors (body parsing, limits) into table codes; `maxBodyBytes` and
 * `advice` word the 413 of the scope's body limit.
 */
function fromFastify(err: FastifyError, maxBodyBytes: number, advice = ROWS_ADVICE): ModelportError {
  switch (err.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ModelportError(
        "MP_ERR_REQUEST_BODY_TOO_LARGE",
        `the body is larger than ${maxBodyBytes} bytes; ${advice}`,
      );
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new ModelportError(
        "MP_ERR_REQUEST_UNSUPPORTED_MEDIA_TYPE",
        "send the body as JSON with Content-Type: application/json",
      );
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new ModelportError("MP_ERR_REQUEST_MALFORMED_JSON", "the body is empty; send a JSON object");
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new ModelportError("MP_ERR_REQUEST_INVALID", "Content-Length does not match the body");
  }
  if (err instanceof SyntaxError || err.code === "FST_ERR_CTP_INVALID_JSON_BODY") {
    return new ModelportError("MP_ERR_REQUEST_MALFORMED_JSON", `the body is not valid JSON: ${err.message}`);
  }
  if (err.statusCode === 413) return new ModelportError("MP_ERR_REQUEST_BODY_TOO_LARGE", err.message);
  if (err.statusCode === 415) return new ModelportError("MP_ERR_REQUEST_UNSUPPORTED_MEDIA_TYPE", err.message);
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    return new ModelportError("MP_ERR_REQUEST_INVALID", err.message);
  }
  return new ModelportError(
    "MP_ERR_SERVER_INTERNAL",
    "internal error; the server log has details under this request id",
  );
}

export function toModelportError(err: unknown, maxBodyBytes: number, advice?: string): ModelportError {
  if (err instanceof ModelportError) return err;
  return fromFastify(err as FastifyError, maxBodyBytes, advice);
}

/**
 * OpenAI's error `type` for a status, as OpenAI itself answers (an unknown model is an
 * invalid_request_error there too); clients pick their exception class from the status.
 */
function openaiErrorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 429 || status === 503) return "rate_limit_error";
  return status < 500 ? "invalid_request_error" : "server_error";
}

/** The OpenAI wire form: `code` is the MP_ERR_* code, `param` the request field at fault when known. */
export function openaiError(err: ModelportError): {
  error: { message: string; type: string; param: string | null; code: string };
} {
  const param = err.details?.param;
  return {
    error: {
      message: err.message,
      type: openaiErrorType(err.status),
      param: typeof param === "string" ? param : null,
      code: err.code,
    },
  };
}

export type ErrorStyle = "native" | "oip" | "openai";

/** A character RFC 3986 calls unreserved: the router matches it the same escaped or not. */
const UNRESERVED = /^[A-Za-z0-9._~-]$/;

/**
 * The error style of the route a path is for, by the path alone: for errors the router raises
 * before any route is matched (a malformed percent-escape, an over-long path parameter), when no
 * route's config exists to ask; every other error is answered in its route's scope. The path is
 * read as the router reads it, its well-formed escapes of unreserved characters decoded
 * (`/v2/%6Dodels/...` is an OIP path), so the style cannot be steered by spelling the path.
 */
export function errorStyleOfPath(url: string): ErrorStyle {
  const path = new URL(urlPath(url), "http://x").pathname.replace(/%([0-9A-Fa-f]{2})/g, (escaped, hex) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : escaped;
  });
  if (path === "/v1/chat/completions" || path === "/v1/completions" || path === "/v1/embeddings")
    return "openai";
  if (/^\/v1\/responses(\/[^/]+(\/input_items)?)?$/.test(path)) return "openai";
  if (/^\/v2(\/models\/[^/]+(\/versions\/[^/]+)?(\/ready|\/infer)?)?$/.test(path)) return "oip";
  if (/^\/v2\/repository\/(index|models\/[^/]*\/(load|unload))$/.test(path)) return "oip";
  if (
    /^\/v2\/systemsharedmemory(\/region\/[^/]+\/(status|register|unregister)|\/(status|unregister))$/.test(
      path,
    )
  )
    return "oip";
  return "native";
}

/** Sends `err` in `style`. */
function sendError(reply: FastifyReply, err: ModelportError, style: ErrorStyle): FastifyReply {
  if ((err.status === 503 || err.status === 429) && err.retryable)
    reply.header("retry-after", String(err.details?.retryAfterSeconds ?? 1));
  reply.code(err.status);
  if (style === "oip") return reply.send({ error: err.message, code: err.code });
  if (style === "openai") return reply.send(openaiError(err));
  return reply.send(err.toJSON());
}

/**
 * Fastify's `frameworkErrors`: the errors its router raises before any route or hook runs
 * (FST_ERR_BAD_URL for a broken percent-escape, FST_ERR_MAX_PARAM_LENGTH for a path parameter
 * over 100 characters), answered as 400 MP_ERR_REQUEST_INVALID in the style of the route the
 * path is for, instead of Fastify's own body without a code.
 */
export function frameworkError(
  err: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  reply.header(REQUEST_ID_HEADER, request.id);
  let mp: ModelportError;
  if (err.code === "FST_ERR_BAD_URL")
    mp = new ModelportError("MP_ERR_REQUEST_INVALID", "the path has a malformed percent-escape (%XX)");
  else if (err.code === "FST_ERR_MAX_PARAM_LENGTH")
    mp = new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      "a path segment (a model name, version or job id) is longer than 100 characters",
    );
  else {
    request.log.error({ err }, "unexpected routing error");
    mp = toModelportError(err, 0);
  }
  return sendError(reply, mp, errorStyleOfPath(request.raw.url ?? "/"));
}

/**
 * A scope's error handler: every error thrown in its routes and hooks, answered in `style`;
 * `maxBodyBytes` and `advice` are the scope's body limit and what its 413 advises.
 */
export function errorHandler(
  style: ErrorStyle,
  maxBodyBytes: number,
  advice?: string,
): (err: unknown, request: FastifyRequest, reply: FastifyReply) => FastifyReply {
  return (err, request, reply) => {
    const mp = toModelportError(err, maxBodyBytes, advice);
    request.errorCode = mp.code;
    if (mp.code === "MP_ERR_SERVER_INTERNAL") request.log.error({ err }, "unexpected error");
    else if (mp.status >= 500 && mp.code !== "MP_ERR_SERVER_SHUTTING_DOWN")
      request.log.warn({ code: mp.code }, mp.message);
    return sendError(reply, mp, style);
  };
}

/** The root's native error handler, and 404 for a path no route serves. */
export function registerErrorHandling(app: FastifyInstance, maxBodyBytes: number): void {
  app.setErrorHandler(errorHandler("native", maxBodyBytes));
  app.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      new ModelportError(
        "MP_ERR_ROUTE_NOT_FOUND",
        // The path as the client sent it: what the message repeats, not what decides anything.
        `no route for ${request.method} ${urlPath(request.url)}; see /docs`,
      ),
      "native",
    ),
  );
}
