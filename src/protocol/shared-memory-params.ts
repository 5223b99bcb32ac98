// The shared-memory extension's tensor parameters, as Triton reads them: an input or requested
// output with `shared_memory_region` and `shared_memory_byte_size` (and optionally
// `shared_memory_offset`) has its data in that registered region instead of the body.
import { ModelportError } from "../errors.js";

/** Where a tensor's bytes are: `byteSize` bytes at `offset` of the registered region `region`. */
export interface SharedMemoryRef {
  region: string;
  offset: number;
  byteSize: number;
}

/** The extension's parameter names, as the wire spells them. */
export const SHM = {
  region: "shared_memory_region",
  offset: "shared_memory_offset",
  byteSize: "shared_memory_byte_size",
} as const;

function invalid(message: string): ModelportError {
  return new ModelportError("MP_ERR_REQUEST_INVALID", message);
}

/**
 * The shared-memory reference in a tensor's `parameters`; undefined when it names no region and no
 * byte size. `where` names the tensor in errors.
 */
export function sharedMemoryRef(params: unknown, where: string): SharedMemoryRef | undefined {
  if (typeof params !== "object" || params === null || Array.isArray(params)) return undefined;
  const p = params as Record<string, unknown>;
  const region = p[SHM.region];
  const size = p[SHM.byteSize];
  const offset = p[SHM.offset];
  if (region === undefined && size === undefined) {
    if (offset !== undefined)
      throw invalid(`${where}: ${SHM.offset} needs ${SHM.region} and ${SHM.byteSize}`);
    return undefined;
  }
  if (region === undefined || size === undefined)
    throw invalid(`${where}: ${SHM.region} and ${SHM.byteSize} go together; send both`);
  if (typeof region !== "string" || region === "")
    throw invalid(`${where}: ${SHM.region} must be a region's name`);
  return {
    region,
    offset: byteCount(offset ?? 0, `${where}: ${SHM.offset}`),
    byteSize: byteCount(size, `${where}: ${SHM.byteSize}`),
  };
}

/** A non-negative safe integer, else 400 MP_ERR_REQUEST_INVALID naming `what`. */
export function byteCount(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0)
    throw invalid(`${what} must be a non-negative whole number of bytes, got ${JSON.stringify(value)}`);
  return value;
}

/** "inputs[2] ('x')" for errors; a name that is no string (any JSON value) is left out. */
function where(list: string, i: number, name: unknown): string {
  return typeof name === "string" ? `${list}[${i}] ('${name}')` : `${list}[${i}]`;
}

/** Each `{name, parameters}` entry of `list` whose parameters name a region, with its index. */
function eachRef(
  list: unknown,
  kind: "inputs" | "outputs",
  found: (i: number, name: unknown, ref: SharedMemoryRef) => void,
): void {
  if (!Array.isArray(list)) return;
  list.forEach((entry: unknown, i) => {
    if (typeof entry !== "object" || entry === null) return;
    const { name, parameters } = entry as { name?: unknown; parameters?: unknown };
    const ref = sharedMemoryRef(parameters, where(kind, i, name));
    if (ref) found(i, name, ref);
  });
}

/**
 * The tensors of a list (an infer request's `inputs`, each `{name, parameters}`) whose parameters
 * name a region, by index. gRPC's parameters come as grpcParameterValues gives them.
 */
export function sharedInputs(inputs: unknown): Map<number, SharedMemoryRef> {
  const refs = new Map<number, SharedMemoryRef>();
  eachRef(inputs, "inputs", (i, _name, ref) => refs.set(i, ref));
  return refs;
}

/** The requested outputs of a list (an infer request's `outputs`) to be written to a region, by name. */
export function sharedOutputs(outputs: unknown): Map<string, SharedMemoryRef> {
  const refs = new Map<string, SharedMemoryRef>();
  eachRef(outputs, "outputs", (_i, name, ref) => {
    if (typeof name === "string") refs.set(name, ref);
  });
  return refs;
}

/** A response output's parameters once its bytes are in the region: Triton's, with the bytes written. */
export function sharedOutputParameters(ref: SharedMemoryRef, written: number): Record<string, unknown> {
  return {
    [SHM.region]: ref.region,
    [SHM.byteSize]: written,
    ...(ref.offset ? { [SHM.offset]: ref.offset } : {}),
  };
}
