// Memory that holds one request's body and nothing else. Binary tensors are views of it instead
// of copies, and a worker thread is given it whole (postMessage's transfer list) instead of a
// copy: whoever marks a buffer gives up every other use of it once the request is decoded.
// Three readers mark buffers: the HTTP body reader, the shared-memory input reader (each input
// read into a buffer of its own) and the gRPC service's decoder, for a message that is all its
// memory holds (src/grpc/proto.ts). Everything else (a smaller gRPC message, a caller's own array)
// is copied, since its memory may be shared or reused.

const owned = new WeakSet<ArrayBufferLike>();

/** Marks `buffer` as one request body's own memory. */
export function ownBodyMemory(buffer: ArrayBuffer): void {
  owned.add(buffer);
}

/** True when `buffer` is a request body's own memory (ownBodyMemory). */
export function isBodyMemory(buffer: ArrayBufferLike): boolean {
  return owned.has(buffer);
}
