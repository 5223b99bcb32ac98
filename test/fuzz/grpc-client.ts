// The fuzz files' gRPC client: @grpc/grpc-js with src/grpc/inference.proto loaded as it ships, one
// channel to the fuzz server's gRPC port, unary calls with metadata (or raw bytes as the message),
// and the check that a failed call is the client's fault in modelport's terms.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { ERRORS, type ErrorCode } from "../../src/errors.js";
import { REPO_ROOT } from "../helpers/server.js";

const definition = loadSync(join(REPO_ROOT, "src", "grpc", "inference.proto"), {
  keepCase: true,
  longs: String,
  defaults: true,
});
const Service = (grpc.loadPackageDefinition(definition) as any).inference
  .GRPCInferenceService as grpc.ServiceClientConstructor;
const INFER = "/inference.GRPCInferenceService/ModelInfer";

export interface GrpcResult {
  err: grpc.ServiceError | null;
  res: any;
}

const callOptions = () => ({ deadline: Date.now() + 20_000 });

/** `metadata` as grpc-js Metadata: each value a string, or a list of them (the key repeated). */
function toMetadata(metadata: Record<string, string | string[]>): grpc.Metadata {
  const m = new grpc.Metadata();
  for (const [key, value] of Object.entries(metadata))
    for (const v of Array.isArray(value) ? value : [value]) m.add(key, v);
  return m;
}

/**
 * A client of the server at `address()` (read once the server has started), closed after the
 * file's tests.
 */
export function grpcClient(address: () => string) {
  let channel: (grpc.Client & Record<string, any>) | undefined;
  const client = () => {
    channel ??= new Service(address(), grpc.credentials.createInsecure(), {
      "grpc.max_receive_message_length": -1,
      "grpc.max_send_message_length": -1,
    }) as any;
    return channel!;
  };
  after(() => channel?.close());
  return {
    client,
    /** Any unary method of the service, with its message as an object. */
    unary(
      method: string,
      message: object,
      metadata: Record<string, string | string[]> = {},
    ): Promise<GrpcResult> {
      return new Promise((resolve) =>
        client()[method](message, toMetadata(metadata), callOptions(), (err: any, res: any) =>
          resolve({ err, res }),
        ),
      );
    },
    /** ModelInfer with bytes sent as the message as they are. */
    inferBytes(message: Buffer): Promise<GrpcResult> {
      const identity = (b: Buffer) => b;
      return new Promise((resolve) =>
        client().makeUnaryRequest(
          INFER,
          identity,
          identity,
          message,
          new grpc.Metadata(),
          callOptions(),
          (err, res) => resolve({ err, res }),
        ),
      );
    },
  };
}

/**
 * A failed call is the client's fault, said in modelport's terms: an MP_ERR code of the table
 * first in its details and in `mp-error-code`, a 4xx one (or 503 overloaded), and the gRPC code
 * that code maps to (src/grpc/status.ts). Returns the code, or undefined for a call that succeeded.
 */
export function checkGrpcResult(r: GrpcResult, what: () => string): string | undefined {
  if (r.err === null) return undefined;
  const { code, details, metadata } = r.err;
  const where = () => ` (${grpc.status[code]}: ${details})\n${what()}`;
  assert.ok(code !== grpc.status.INTERNAL && code !== grpc.status.UNKNOWN, `a server fault${where()}`);
  const mp = /^(MP_ERR_[A-Z_]+): /.exec(details)?.[1];
  assert.ok(mp && mp in ERRORS, `no MP_ERR code of the table first in the details${where()}`);
  assert.deepEqual(metadata.get("mp-error-code"), [mp], `mp-error-code${where()}`);
  const status = ERRORS[mp as ErrorCode].status;
  assert.ok(status < 500 || mp === "MP_ERR_MODEL_OVERLOADED", `a 5xx code for client input${where()}`);
  return mp;
}
