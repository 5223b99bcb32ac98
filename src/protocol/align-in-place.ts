// Tensor bytes moved to aligned places within the memory they arrived in. A gRPC message's
// raw_input_contents lie wherever the client's protobuf encoder put them: an FP32 tensor starts on
// a multiple of 4 bytes of the message's memory only by chance (1 in 4), and a typed array cannot
// view it elsewhere, so each would be copied into memory of its own (tensor-bytes.ts). Where the
// message's memory is the request's own (body-memory.ts), each such tensor is instead moved back
// by at most 7 bytes within that memory, over bytes already decoded: the protobuf tag and length
// before it, or what an earlier tensor's own move left free. One memmove that allocates nothing,
// and the tensor can then be a view, and the whole message given to the model's thread.
import { VIEW_MIN_BYTES } from "./tensor-bytes.js";

/**
 * `entries` with each one that lies in a request's own memory (`owned`), at least 16 KiB long
 * (smaller ones are copied anyway: tensor-bytes.ts VIEW_MIN_BYTES) and misaligned for its element
 * size (`elementBytes`, same order; 1 or less: no alignment) moved back to the nearest aligned
 * offset of its buffer, where that offset does not reach into the entry before it in the buffer
 * (as moved). Entries it cannot move, and all others, come back as they are. The bytes between
 * entries (the message's other fields) are overwritten: call it only once everything else of the
 * message has been read out of them. Entries must not overlap.
 */
export function alignInPlace(
  entries: readonly Uint8Array[],
  elementBytes: readonly number[],
  owned: (buffer: ArrayBufferLike) => boolean,
): Uint8Array[] {
  const out = entries.slice();
  const misaligned = (e: Uint8Array, size: number) =>
    size > 1 && e.byteLength >= VIEW_MIN_BYTES && e.byteOffset % size !== 0;
  if (!entries.some((e, i) => misaligned(e, elementBytes[i] ?? 1))) return out;
  // Per buffer, in the order the entries lie in it.
  const order = entries.map((_, i) => i).sort((a, b) => entries[a]!.byteOffset - entries[b]!.byteOffset);
  // Where the free bytes of each buffer begin: after the last entry placed in it.
  const free = new Map<ArrayBufferLike, number>();
  for (const i of order) {
    const entry = entries[i]!;
    const buffer = entry.buffer;
    if (!owned(buffer)) continue;
    const size = elementBytes[i] ?? 1;
    const from = entry.byteOffset;
    const to = misaligned(entry, size) ? from - (from % size) : from;
    if (to === from || to < (free.get(buffer) ?? 0)) {
      free.set(buffer, from + entry.byteLength);
      continue;
    }
    new Uint8Array(buffer).copyWithin(to, from, from + entry.byteLength);
    out[i] = new Uint8Array(buffer, to, entry.byteLength);
    free.set(buffer, to + entry.byteLength);
  }
  return out;
}
