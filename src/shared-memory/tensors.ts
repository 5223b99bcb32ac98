// A request's tensors in its caller's shared memory regions, for both surfaces that take them (the
// OIP infer route and gRPC's ModelInfer): inputs read, outputs checked before inference and
// written after it.
import type { BodyBudget } from "../body-budget.js";
import { ModelportError } from "../errors.js";
import { ownBodyMemory } from "../protocol/body-memory.js";
import { type SharedMemoryRef, sharedOutputParameters } from "../protocol/shared-memory-params.js";
import { tensorToBytes } from "../protocol/tensor-bytes.js";
import type { TensorMap } from "../tensor.js";
import type { SharedMemoryRegions } from "./regions.js";

/** The registry, or 400 MP_ERR_SHARED_MEMORY_DISABLED on a server without the extension. */
export function sharedMemoryOn(regions: SharedMemoryRegions | undefined): SharedMemoryRegions {
  if (regions) return regions;
  throw new ModelportError(
    "MP_ERR_SHARED_MEMORY_DISABLED",
    "this server does not accept shared memory: start it with --shared-memory (server.sharedMemory.enabled)",
  );
}

/** Who asks, and the server's regions (undefined where the extension is off). */
export interface SharedMemoryCaller {
  readonly regions: SharedMemoryRegions | undefined;
  /** The caller's key name: regions are kept per key. */
  readonly owner: string;
  /**
   * Throws where this caller may not use shared memory at all (a caller without a key from
   * another host: tenants' checkSharedMemory); run only once a request names a region.
   */
  readonly admit: () => void;
}

/** The registry for `caller`: 400 where the extension is off, the caller's refusal where it may not use it. */
export function callerRegions(caller: SharedMemoryCaller): SharedMemoryRegions {
  const regions = sharedMemoryOn(caller.regions);
  caller.admit();
  return regions;
}

/**
 * The bytes of the inputs `refs` names, by input index, and the release of what they hold against
 * `budget`; undefined when `refs` names none. Together they count against `maxBytes`
 * (limits.maxBodyBytes), and they are held against limits.maxBodyBytesInFlight until `release`, as
 * a body of that size is. Each input's buffer is the request's own: its tensor views it and the
 * runner is handed it whole (protocol/body-memory.ts).
 */
export async function readSharedInputs(
  caller: SharedMemoryCaller,
  refs: ReadonlyMap<number, SharedMemoryRef>,
  maxBytes: number,
  budget: BodyBudget,
): Promise<{ bytes: Map<number, Uint8Array>; release: () => void } | undefined> {
  if (refs.size === 0) return undefined;
  const regions = callerRegions(caller);
  let total = 0;
  for (const ref of refs.values()) total += ref.byteSize;
  if (total > maxBytes) {
    throw new ModelportError(
      "MP_ERR_REQUEST_BODY_TOO_LARGE",
      `the inputs in shared memory add up to ${total} bytes; limits.maxBodyBytes is ${maxBytes}`,
    );
  }
  const release = budget.reserve(total);
  try {
    const read = await Promise.all(
      [...refs].map(async ([i, ref]) => {
        const bytes = await regions.read(caller.owner, ref.region, ref.offset, ref.byteSize, `inputs[${i}]`);
        ownBodyMemory(bytes.buffer as ArrayBuffer);
        return [i, bytes] as const;
      }),
    );
    return { bytes: new Map(read), release };
  } catch (err) {
    release();
    throw err;
  }
}

/** Checks, before inference runs, that each output in `refs` has the caller's region and the room given there. */
export function checkSharedOutputs(
  caller: SharedMemoryCaller,
  refs: ReadonlyMap<string, SharedMemoryRef>,
): void {
  if (refs.size === 0) return;
  const regions = callerRegions(caller);
  for (const [name, ref] of refs)
    regions.check(caller.owner, ref.region, ref.offset, ref.byteSize, `output '${name}'`);
}

/**
 * Writes each output `refs` names to its region; returns the parameters each written output
 * answers with instead of its data (the region, its offset and the bytes written).
 */
export async function writeSharedOutputs(
  caller: SharedMemoryCaller,
  outputs: TensorMap,
  refs: ReadonlyMap<string, SharedMemoryRef>,
): Promise<Map<string, Record<string, unknown>>> {
  const written = new Map<string, Record<string, unknown>>();
  if (refs.size === 0) return written;
  const regions = callerRegions(caller);
  await Promise.all(
    [...refs].map(async ([name, ref]) => {
      const tensor = outputs[name];
      if (!tensor) return;
      const bytes = tensorToBytes(tensor);
      await regions.write(caller.owner, ref.region, ref.offset, ref.byteSize, bytes, `output '${name}'`);
      written.set(name, sharedOutputParameters(ref, bytes.length));
    }),
  );
  return written;
}
