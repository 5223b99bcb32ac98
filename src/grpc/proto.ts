// The GRPCInferenceService definition, loaded from inference.proto beside this module (the build
// copies it into dist/), with the decoding options protocol/grpc-infer.ts's message types assume.
import { fileURLToPath } from "node:url";
import type { ServiceDefinition } from "@grpc/grpc-js";
import { loadSync, type Options } from "@grpc/proto-loader";

export const PROTO_FILE = fileURLToPath(new URL("./inference.proto", import.meta.url));

/** The service's full name, as in every call's path (/inference.GRPCInferenceService/ModelInfer). */
export const SERVICE_NAME = "inference.GRPCInferenceService";

// Field names as written in the .proto; every field present (unset ones with their default, an
// unset message as null); int64 as decimal strings, so a shape of 2^63 - 1 is seen as what it is
// rather than rounded to a number that looks valid.
const OPTIONS: Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

/** A request whose bytes are not its message: the call answers INVALID_ARGUMENT with the reason. */
export class MalformedMessage {
  constructor(readonly reason: string) {}
}

/** Each decoded request's size on the wire. */
const sizes = new WeakMap<object, number>();

/** The bytes a request arrived as (0 for one that did not come through inferenceService's decoding). */
export function messageBytes(request: unknown): number {
  return typeof request === "object" && request !== null ? (sizes.get(request) ?? 0) : 0;
}

/**
 * The service with lenient request decoding: bytes that are not a valid message become a
 * MalformedMessage for the handler to refuse in modelport's terms, where grpc-js would answer
 * INTERNAL "Error deserializing request" without saying why.
 */
export function inferenceService(): ServiceDefinition {
  const service = loadSync(PROTO_FILE, OPTIONS)[SERVICE_NAME] as unknown as ServiceDefinition;
  return Object.fromEntries(
    Object.entries(service).map(([name, method]) => [
      name,
      {
        ...method,
        requestDeserialize: (bytes: Buffer) => {
          let message: object;
          try {
            message = method.requestDeserialize(bytes) as object;
          } catch (err) {
            message = new MalformedMessage((err as Error).message);
          }
          sizes.set(message, bytes.length);
          return message;
        },
      },
    ]),
  ) as ServiceDefinition;
}
