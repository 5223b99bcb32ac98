// HTTP/2 flow-control windows for the gRPC server. grpc-js 1.14 reads `grpc-node.flow_control_window`
// on its client only (grpc/grpc-node PR #3058, open, makes the server read it too): a grpc-js
// server advertises Node's 64 KiB stream window and keeps the 64 KiB connection window, so a client
// sending a 4.9 MB tensor stops every 64 KiB until a WINDOW_UPDATE comes back. Measured on loopback
// (2 cores, two node processes, 4.9 MB in and 2.1 MB out per call, grpc-js both sides): p50 43–50 ms
// with the defaults, 8–11 ms with 8 MiB windows on both peers. Until the server reads the option,
// this sets the same two windows through grpc-js's own fields, before the server binds; the option
// is passed as well, so a grpc-js that reads it does the same by itself.
//
// The window does not bound memory here: grpc-js reads every frame as it arrives and refuses a
// message longer than grpc.max_receive_message_length by its length prefix, whatever the window.
import type { ServerHttp2Session } from "node:http2";
import type { Server } from "@grpc/grpc-js";
import { commonServerOptions, http2Servers } from "./grpc-internals.js";

/** HTTP/2's largest window (2^31 - 1). */
const MAX_WINDOW = 2 ** 31 - 1;

/** The channel option grpc-js's client reads (and a server of a later grpc-js may). */
export const FLOW_CONTROL_OPTION = "grpc-node.flow_control_window";

/** A window that lets a message of `maxMessageBytes` (and its 5-byte gRPC prefix) arrive in one go. */
export function windowFor(maxMessageBytes: number): number {
  return Math.min(MAX_WINDOW, Math.max(65_535, maxMessageBytes + 5));
}

/**
 * Advertises `window` as every stream's initial window. Call before bindAsync. False when this
 * grpc-js has no such field (then its defaults stay, and the test of the windows fails).
 */
export function setStreamWindow(server: Server, window: number): boolean {
  const common = commonServerOptions(server);
  if (!common) return false;
  common.settings = { ...common.settings, initialWindowSize: window };
  return true;
}

/**
 * Raises each new connection's window to `window` as the connection opens (a WINDOW_UPDATE before
 * any data). Call after bindAsync. False when this grpc-js keeps its http2 servers elsewhere.
 */
export function setConnectionWindow(server: Server, window: number): boolean {
  const servers = http2Servers(server);
  if (!servers) return false;
  for (const http2Server of servers) {
    http2Server.on("session", (session: ServerHttp2Session) => {
      try {
        session.setLocalWindowSize(window);
      } catch {
        // A session already closing: nothing to widen.
      }
    });
  }
  return true;
}
