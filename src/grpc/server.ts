// startGrpcServer: the Open Inference Protocol's gRPC service (inference.proto) on its own port
// (server.grpcPort), a surface beside the HTTP one over the same catalogue, metrics and config.
// The app's close() drains it with the HTTP requests: new calls UNAVAILABLE at once (health calls
// still answer), in-flight calls finish up to the drain deadline, then the listener stops, all
// before the models close. Plaintext HTTP/2, as the HTTP port is plain HTTP.
import { Server, ServerCredentials } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { CallEnv, GrpcContext } from "./call.js";
import { capConnections, grpcConnectionOptions } from "./connections.js";
import { FLOW_CONTROL_OPTION, setConnectionWindow, setStreamWindow, windowFor } from "./flow-control.js";
import { inferenceService } from "./proto.js";
import { inferenceHandlers } from "./service.js";

/** What the gRPC surface needs of the app it serves: buildApp's ModelportApp has all of it. */
export interface GrpcHost {
  readonly context: GrpcContext;
  /** This process's name, sent back in every call's initial metadata (x-modelport-instance). */
  readonly instance: string;
  readonly logger: Logger;
  /** Puts the surface into the app's close sequence (drain before the models close). */
  addSurface(surface: { drain(deadline: number): Promise<void> }): void;
}

export interface GrpcServer {
  /** host:port as bound (the port chosen when 0 was asked for). */
  readonly address: string;
  readonly port: number;
}

/** host:port for grpc-js, an IPv6 address in brackets. */
function target(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/**
 * Listens on `where` and serves GRPCInferenceService from `app`'s catalogue. Rejects when the
 * port cannot be bound. The server stops with the app (app.close()).
 */
export async function startGrpcServer(
  app: GrpcHost,
  where: { host: string; port: number },
): Promise<GrpcServer> {
  const config = app.context.config;
  const env: CallEnv = {
    context: app.context,
    instance: app.instance,
    log: app.logger,
    inFlight: 0,
  };
  // The body limit of HTTP is the message limit here: grpc-js refuses a larger message by its
  // length prefix, before buffering it (RESOURCE_EXHAUSTED). The flow-control windows let a
  // message of that size arrive without waiting on WINDOW_UPDATEs (flow-control.ts).
  const window = windowFor(config.limits.maxBodyBytes);
  const server = new Server({
    "grpc.max_receive_message_length": config.limits.maxBodyBytes,
    [FLOW_CONTROL_OPTION]: window,
    ...grpcConnectionOptions(config.server.connections),
  });
  const widened = setStreamWindow(server, window);
  server.addService(inferenceService(), inferenceHandlers(env));
  const asked = target(where.host, where.port);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(asked, ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(new Error(`gRPC: cannot listen on ${asked}: ${err.message}`)) : resolve(bound),
    ),
  );
  if (!capConnections(server, config.server.connections.maxConnections)) {
    app.logger.warn(
      { maxConnections: config.server.connections.maxConnections },
      "gRPC: this @grpc/grpc-js keeps its HTTP/2 servers elsewhere; server.connections.maxConnections does not apply to the gRPC port",
    );
  }
  if (!(setConnectionWindow(server, window) && widened)) {
    app.logger.warn(
      { window },
      "gRPC: this @grpc/grpc-js has no fields for HTTP/2 windows; large messages wait on 64 KiB windows",
    );
  }

  app.addSurface({
    async drain(deadline) {
      // New calls are refused by the calls themselves from the moment the app drains.
      while (env.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      if (env.inFlight > 0) {
        app.logger.warn(
          { inFlight: env.inFlight },
          "gRPC: drain timeout reached; closing with calls in flight",
        );
        server.forceShutdown();
        return;
      }
      // Nothing in flight: stop listening and close each connection (GOAWAY). A connection that
      // stays open past the deadline (a second at least) is cut.
      await new Promise<void>((resolve) => {
        const cut = setTimeout(
          () => {
            server.forceShutdown();
            resolve();
          },
          Math.max(1000, deadline - Date.now()),
        );
        server.tryShutdown(() => {
          clearTimeout(cut);
          resolve();
        });
      });
    },
  });
  return { address: target(where.host, port), port };
}
