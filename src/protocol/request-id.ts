// Request ids: a client's id is kept when it is sane (so ids travel across proxies and between
// the HTTP and gRPC surfaces alike), otherwise one is made.
import { randomUUID } from "node:crypto";

const SAFE_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/** The client's X-Request-Id (header or gRPC metadata) when it is safe to log and echo, else a UUID. */
export function requestIdFrom(given: unknown): string {
  return typeof given === "string" && SAFE_ID.test(given) ? given : randomUUID();
}
