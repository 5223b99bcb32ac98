// The GRPCInferenceService definition, loaded from inference.proto beside this module (the build
// copies it into dist/), with the decoding options protocol/grpc-infer.ts's message types assume.
import { fileURLToPath } from "node:url";
import type { ServiceDefinition } from "@grpc/grpc-js";
import { loadSync, type Options } from "@grpc/proto-loader";
import { ownBodyMemory } from "../protocol/body-memory.js";

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

/** Messages at least this large may be the request's own memory (smaller ones may share a pool). */
const OWN_MIN_BYTES = 16384;

/**
 * Whether `bytes`, a message as grpc-js hands it to a deserializer, is all its memory holds
 * beside the 5 bytes of gRPC's frame header: grpc-js 1.14 joins each message's frames into memory
 * of its own (or inflates it into memory of its own) and keeps no reference to it once decoded.
 * Such memory is marked as the request's own (protocol/body-memory.ts), so that its tensors are
 * views of it and the model's thread is given it instead of a copy. Anything else (a view into
 * memory holding more) is copied from, as before.
 */
export function ownsItsMemory(bytes: Uint8Array): boolean {
  return (
    bytes.byteLength >= OWN_MIN_BYTES &&
    bytes.byteOffset <= 5 &&
    bytes.byteOffset + bytes.byteLength === bytes.buffer.byteLength &&
    bytes.buffer instanceof ArrayBuffer
  );
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
          if (name === "ModelInfer" && ownsItsMemory(bytes)) ownBodyMemory(bytes.buffer as ArrayBuffer);
          return message;
        },
      },
    ]),
  ) as ServiceDefinition;
}
