// Client connection limits (server.connections): Node's header, request and keep-alive
// timeouts, a cap on open connections answered with 503, and MP_ERR_* answers for the errors
// Node raises before a request reaches a route (timeouts, oversized headers, bad HTTP).
import type { Server, ServerOptions } from "node:http";
import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyServerOptions } from "fastify";
import type { ConnectionsConfig } from "../config/schema.js";
import { type ErrorCode, ModelportError } from "../errors.js";

/** Refused sockets kept open at once to deliver their 503; beyond it they are closed unanswered. */
const MAX_REFUSING = 256;
/** How long a refused socket may take to read its answer before it is destroyed. */
const LINGER_MS = 2000;

/** A complete HTTP/1.1 answer with a native error body, for sockets no route will see. */
function rawAnswer(code: ErrorCode, message: string): string {
  const err = new ModelportError(code, message);
  const body = JSON.stringify(err.toJSON());
  const retry = err.status === 503 && err.retryable ? "Retry-After: 1\r\n" : "";
  return (
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status]}\r\n` +
    `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `${retry}Connection: close\r\n\r\n${body}`
  );
}

/**
 * For a socket no parser reads: writes `answer`, discards what the client still sends, and
 * destroys the socket when the client closes or after LINGER_MS.
 */
function answerAndClose(socket: Socket, answer: string): void {
  socket.on("error", () => {});
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
  // Reading on (and dropping what comes) lets the client finish sending, so the close is a
  // FIN after the answer rather than a reset that could discard it.
  socket.resume();
  socket.end(answer);
}

/**
 * Fastify options for the timeouts. Node checks header and request deadlines on a timer
 * (connectionsCheckingInterval, 30 s by default): it runs at most a second apart here so a
 * timeout fires close to its configured time. requestTimeout covers receiving the request only;
 * once it has arrived, the response (a stream, a long-poll) is not bounded by it.
 */
export function connectionOptions(
  c: ConnectionsConfig,
): Partial<FastifyServerOptions> & { http: ServerOptions } {
  return {
    requestTimeout: c.requestTimeoutMs,
    keepAliveTimeout: c.keepAliveTimeoutMs,
    connectionTimeout: c.idleTimeoutMs,
    maxRequestsPerSocket: c.maxRequestsPerSocket,
    http: {
      headersTimeout: c.headersTimeoutMs,
      requestTimeout: c.requestTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(c.headersTimeoutMs / 4))),
    },
    clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket) {
      if (err.code === "ECONNRESET" || socket.destroyed) return;
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      let answer: string;
      if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
        answer = rawAnswer(
          "MP_ERR_REQUEST_TIMEOUT",
          "the request's headers and body did not arrive in time; the connection is closed",
        );
      } else if (err.code === "HPE_HEADER_OVERFLOW") {
        answer = rawAnswer("MP_ERR_REQUEST_HEADERS_TOO_LARGE", "the request headers are too large");
      } else {
        answer = rawAnswer("MP_ERR_REQUEST_INVALID", "the request is not valid HTTP/1.1");
      }
      // The HTTP parser still owns this socket: send the answer, then destroy it, so nothing
      // more it reads can become a request.
      socket.on("error", () => {});
      socket.end(answer, () => socket.destroy());
    },
  };
}

/**
 * Caps open client connections at `max`. Node's http server hands each accepted socket to its
 * one 'connection' listener (the HTTP parser); that listener is wrapped so that a socket over
 * the cap never reaches the parser: it gets 503 MP_ERR_SERVER_TOO_MANY_CONNECTIONS and is
 * closed, while the connections already open keep working. Returns the open count, for tests
 * and logs.
 */
export function limitConnections(server: Server, max: number): () => number {
  const inner = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  const refusal = rawAnswer(
    "MP_ERR_SERVER_TOO_MANY_CONNECTIONS",
    `the server has ${max} open connections (server.connections.maxConnections); retry shortly`,
  );
  let open = 0;
  let refusing = 0;
  server.on("connection", (socket: Socket) => {
    if (open >= max) {
      if (refusing >= MAX_REFUSING) {
        socket.destroy();
        return;
      }
      refusing++;
      socket.once("close", () => refusing--);
      answerAndClose(socket, refusal);
      return;
    }
    open++;
    socket.once("close", () => open--);
    for (const listener of inner) listener.call(server, socket);
  });
  return () => open;
}
