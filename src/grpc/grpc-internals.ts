// The two fields of a @grpc/grpc-js 1.14 Server that modelport reaches into, in one place: the
// options every http2 server is created with, and the http2 servers bound. Each accessor returns
// undefined where a grpc-js keeps them elsewhere, and its caller says what is then missing.
import type { Http2Server } from "node:http2";
import type { Server } from "@grpc/grpc-js";

interface ServerInternals {
  commonServerOptions?: { settings?: Record<string, unknown> };
  http2Servers?: Map<Http2Server, unknown>;
}

/** The options grpc-js creates each http2 server with (read at bind: change them before bindAsync). */
export function commonServerOptions(server: Server): { settings?: Record<string, unknown> } | undefined {
  const common = (server as unknown as ServerInternals).commonServerOptions;
  return common && typeof common === "object" ? common : undefined;
}

/** The http2 servers bound (after bindAsync); undefined when there are none to be found. */
export function http2Servers(server: Server): Http2Server[] | undefined {
  const servers = (server as unknown as ServerInternals).http2Servers;
  return servers instanceof Map && servers.size > 0 ? [...servers.keys()] : undefined;
}
