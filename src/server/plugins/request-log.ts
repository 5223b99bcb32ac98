// Request ids and the one log line per request. An incoming X-Request-Id is kept when it is
// sane (so ids travel across proxies), otherwise one is made (protocol/request-id.ts); every
// reply carries it back.
import type { IncomingMessage } from "node:http";
import { type FastifyReply, type FastifyRequest, LogController } from "fastify";
import { POLL_HEADER, REQUEST_ID_HEADER } from "../../protocol/headers.js";
import { requestIdFrom } from "../../protocol/request-id.js";
import { isProbe } from "./auth.js";

/** Fastify genReqId: the client's X-Request-Id when it is safe to log, else a UUID. */
export function requestId(req: IncomingMessage): string {
  return requestIdFrom(req.headers[REQUEST_ID_HEADER]);
}

/** One "request completed" line per request instead of Fastify's two. */
export class RequestLogController extends LogController {
  constructor(enabled: boolean) {
    super({ requestIdLogLabel: "reqId", disableRequestLogging: !enabled });
  }

  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (this.isLogDisabled(request)) return;
    const fields = {
      method: request.method,
      // The target as the client sent it (percent-escapes and all), kept on purpose: the log
      // says what came; what it reached is the route (decisions read the route, never this).
      url: request.url,
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
    };
    if (error) reply.log.error({ ...fields, err: error }, "request failed");
    // Probes and the API tier's runner polls come every second or so: log them only at debug.
    else if (reply.statusCode < 400 && (request.headers[POLL_HEADER] || isProbe(request))) {
      reply.log.debug(fields, "request completed");
    } else reply.log.info(fields, "request completed");
  }
}
