// A same-host client of modelport's shared-memory extension for the overhead suite, as Triton's
// perf_analyzer runs one: the inputs are written to /dev/shm objects once, regions are registered
// for them and for the first output, and every timed request is a small JSON body naming the regions.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface ShmInput {
  name: string;
  datatype: string;
  shape: number[];
  /** The tensor's values, written to its object as they lie in memory. */
  data: ArrayBufferView;
}

/** An OIP input or output by region: its parameters name the region and the bytes there. */
export interface ShmTensorRef {
  name: string;
  datatype?: string;
  shape?: number[];
  parameters: Record<string, string | number>;
}

export interface ShmSession {
  /** The infer request: inputs and the output by region; the answer carries no tensor data. */
  request: { inputs: ShmTensorRef[]; outputs: ShmTensorRef[] };
  /** `request` as an HTTP infer request of the model's. */
  http: { path: string; headers: Record<string, string>; body: Buffer };
  /** The first output's bytes as the last request left them in its region. */
  output(): Float32Array;
  /** Zeroes the output's region, so that the next check reads what the next request wrote. */
  clearOutput(): void;
  /** Unregisters the regions and removes the objects. */
  remove(): Promise<void>;
}

async function post(url: string, body?: unknown): Promise<void> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${await res.text()}`);
}

/**
 * Objects `${prefix}-in-<i>` and `${prefix}-out` in /dev/shm, registered on `base` as regions of the
 * same names, for requests to `model`. `prefix` must start with the server's
 * server.sharedMemory.keyPrefix ("modelport_" by default).
 */
export async function openShmSession(
  base: string,
  model: string,
  prefix: string,
  inputs: readonly ShmInput[],
  output: { name: string; byteSize: number },
): Promise<ShmSession> {
  const objects: string[] = [];
  const region = async (name: string, bytes: Uint8Array) => {
    writeFileSync(join("/dev/shm", name), bytes);
    objects.push(name);
    await post(`${base}/v2/systemsharedmemory/region/${name}/register`, {
      key: `/${name}`,
      offset: 0,
      byte_size: bytes.length,
    });
  };
  const ref = (name: string, byteSize: number) => ({
    shared_memory_region: name,
    shared_memory_byte_size: byteSize,
  });
  const body = {
    inputs: [] as ShmTensorRef[],
    outputs: [{ name: output.name, parameters: ref(`${prefix}-out`, output.byteSize) }],
  };
  try {
    for (const [i, inp] of inputs.entries()) {
      const bytes = new Uint8Array(inp.data.buffer, inp.data.byteOffset, inp.data.byteLength);
      await region(`${prefix}-in-${i}`, bytes);
      body.inputs.push({
        name: inp.name,
        datatype: inp.datatype,
        shape: inp.shape,
        parameters: ref(`${prefix}-in-${i}`, bytes.length),
      });
    }
    await region(`${prefix}-out`, new Uint8Array(output.byteSize));
  } catch (err) {
    for (const o of objects) rmSync(join("/dev/shm", o), { force: true });
    throw err;
  }
  const outFile = join("/dev/shm", `${prefix}-out`);
  return {
    request: body,
    http: {
      path: `/v2/models/${model}/infer`,
      headers: { "content-type": "application/json" },
      body: Buffer.from(JSON.stringify(body)),
    },
    output: () => {
      const b = readFileSync(outFile);
      return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
    },
    clearOutput: () => writeFileSync(outFile, new Uint8Array(output.byteSize)),
    remove: async () => {
      await post(`${base}/v2/systemsharedmemory/unregister`).catch(() => {});
      for (const o of objects) rmSync(join("/dev/shm", o), { force: true });
    },
  };
}
