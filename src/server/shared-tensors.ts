// The shared-memory extension on the OIP infer route: the inputs a request reads from its key's
// registered regions, and the outputs it writes to them (src/shared-memory/regions.ts).
import type { FastifyReply, FastifyRequest } from "fastify";
import { ModelportError } from "../errors.js";
import { ownBodyMemory } from "../protocol/body-memory.js";
import type { OipAnswerOutput } from "../protocol/oip-body.js";
import {
  type SharedMemoryRef,
  sharedInputs,
  sharedOutputParameters,
  sharedOutputs,
} from "../protocol/shared-memory-params.js";
import { tensorToBytes } from "../protocol/tensor-bytes.js";
import type { SharedMemoryRegions } from "../shared-memory/regions.js";
import { ANONYMOUS } from "../tenants/principal.js";
import type { AppContext } from "./context.js";

/** Regions are kept per key: the caller's key name (anonymous on a server without keys). */
export function regionOwner(req: FastifyRequest): string {
  return (req.principal ?? ANONYMOUS).name;
}

/** The registry, or 400 MP_ERR_SHARED_MEMORY_DISABLED where the server runs without the extension. */
export function sharedMemoryOn(ctx: AppContext): SharedMemoryRegions {
  if (ctx.sharedMemory) return ctx.sharedMemory;
  throw new ModelportError(
    "MP_ERR_SHARED_MEMORY_DISABLED",
    "this server does not accept shared memory: start it with --shared-memory (server.sharedMemory.enabled)",
  );
}

/**
 * The bytes of the body's inputs that name a region, by input index; undefined when none do. They
 * count against limits.maxBodyBytes together and are held against limits.maxBodyBytesInFlight until
 * the response ends, like a body of that size.
 */
export async function readSharedInputs(
  ctx: AppContext,
  req: FastifyRequest,
  reply: FastifyReply,
  body: Record<string, unknown> | undefined,
): Promise<Map<number, Uint8Array> | undefined> {
  const refs = sharedInputs(body);
  if (refs.size === 0) return undefined;
  const regions = sharedMemoryOn(ctx);
  let total = 0;
  for (const ref of refs.values()) total += ref.byteSize;
  const max = ctx.config.limits.maxBodyBytes;
  if (total > max) {
    throw new ModelportError(
      "MP_ERR_REQUEST_BODY_TOO_LARGE",
      `the inputs in shared memory add up to ${total} bytes; limits.maxBodyBytes is ${max}`,
    );
  }
  reply.raw.once("close", ctx.bodyBudget.reserve(total));
  const owner = regionOwner(req);
  const read = await Promise.all(
    [...refs].map(async ([i, ref]) => {
      const bytes = await regions.read(owner, ref.region, ref.offset, ref.byteSize, `inputs[${i}]`);
      // Each input's bytes are this request's alone: its tensor views them and the runner takes them.
      ownBodyMemory(bytes.buffer as ArrayBuffer);
      return [i, bytes] as const;
    }),
  );
  return new Map(read);
}

/**
 * The requested outputs to be written to regions, each checked before inference runs: the region
 * is the caller's and holds the room given.
 */
export function sharedOutputRefs(
  ctx: AppContext,
  req: FastifyRequest,
  body: Record<string, unknown> | undefined,
): Map<string, SharedMemoryRef> {
  const refs = sharedOutputs(body);
  if (refs.size === 0) return refs;
  const regions = sharedMemoryOn(ctx);
  const owner = regionOwner(req);
  for (const [name, ref] of refs)
    regions.check(owner, ref.region, ref.offset, ref.byteSize, `output '${name}'`);
  return refs;
}

/** Writes the outputs in `refs` to their regions; they answer with the extension's parameters instead of data. */
export async function writeSharedOutputs(
  ctx: AppContext,
  req: FastifyRequest,
  outputs: OipAnswerOutput[],
  refs: ReadonlyMap<string, SharedMemoryRef>,
): Promise<OipAnswerOutput[]> {
  const regions = sharedMemoryOn(ctx);
  const owner = regionOwner(req);
  return Promise.all(
    outputs.map(async (o) => {
      const ref = refs.get(o.name);
      if (!ref) return o;
      const bytes = tensorToBytes(o.tensor);
      await regions.write(owner, ref.region, ref.offset, ref.byteSize, bytes, `output '${o.name}'`);
      return { ...o, parameters: sharedOutputParameters(ref, bytes.length) };
    }),
  );
}
