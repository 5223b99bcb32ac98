// server.connections on the gRPC port: the cap on open connections, calls open at once on one
// connection, and how long a connection with no call stays open. One HTTP/2 connection carries
// many calls, so without the stream cap a single client connection could hold any number of
// messages of up to limits.maxBodyBytes at once.
import type { ChannelOptions, Server } from "@grpc/grpc-js";
import type { ConnectionsConfig } from "../config/schema.js";
import { http2Servers } from "./grpc-internals.js";

/**
 * grpc-js options: SETTINGS_MAX_CONCURRENT_STREAMS of maxStreamsPerConnection on every connection
 * (a client's HTTP/2 stack holds further calls until one ends; a stream opened past it is reset
 * with REFUSED_STREAM), and a connection with no call for keepAliveTimeoutMs closed (GOAWAY).
 */
export function grpcConnectionOptions(c: ConnectionsConfig): ChannelOptions {
  return {
    "grpc.max_concurrent_streams": c.maxStreamsPerConnection,
    "grpc.max_connection_idle_ms": c.keepAliveTimeoutMs,
  };
}

/**
 * Caps the port's open connections at `max` (node's net.Server maxConnections: a connection over
 * it is closed as it is accepted, which a gRPC client sees as UNAVAILABLE and retries). Call after
 * bindAsync; false when this grpc-js keeps its servers elsewhere.
 */
export function capConnections(server: Server, max: number): boolean {
  const servers = http2Servers(server);
  if (!servers) return false;
  for (const http2Server of servers) http2Server.maxConnections = max;
  return true;
}
