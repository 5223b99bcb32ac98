// System shared memory for clients on the same host (the Open Inference Protocol's shared-memory
// extension, as Triton speaks it): a client puts tensors in a POSIX shared memory object
// (shm_open's name, /dev/shm/<key> on Linux), registers a byte range of it as a named region, and
// names the region in an infer request instead of sending the bytes; outputs can be written to a
// region the same way. This is the registry: each region's open file, its owner (the key that
// registered it; names are per owner), and reads and writes bounded by the region.
//
// What it leaves out: CUDA shared memory; mapping the object into the server's memory (Node has no
// mmap: a tensor is read into memory of its own with one pread, and outputs are written with
// pwrite); regions that survive a restart; several HTTP front processes (each would have its own
// registry, so server.processes > 1 refuses the setting).
import { constants, promises as fs, type promises as fsp } from "node:fs";
import { join } from "node:path";
import { ModelportError } from "../errors.js";
import { byteCount } from "../protocol/shared-memory-params.js";

/** Where POSIX shared memory objects appear as files on Linux. */
export const SHARED_MEMORY_DIR = "/dev/shm";

export interface SharedMemoryOptions {
  /** Where shared memory objects live: /dev/shm on Linux. */
  readonly dir: string;
  /** Only keys whose name (without its leading '/') starts with this may be registered. */
  readonly keyPrefix: string;
  /** Regions registered at once, all owners together. */
  readonly maxRegions: number;
}

/** A region as the status endpoints show it (Triton's field names). */
export interface RegionStatus {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}

export interface Region {
  readonly owner: string;
  readonly name: string;
  readonly key: string;
  /** The object's file name in options.dir: the key without its leading '/'. */
  readonly object: string;
  readonly offset: number;
  readonly byteSize: number;
  readonly file: fsp.FileHandle;
  /** Reads and writes in progress: the file closes when the last one ends after an unregister. */
  uses: number;
  removed: boolean;
}

// At most 100 characters: the HTTP router's limit on a path segment.
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const KEY = /^\/?([A-Za-z0-9_][A-Za-z0-9._-]{0,254})$/;

function invalid(message: string): ModelportError {
  return new ModelportError("MP_ERR_REQUEST_INVALID", message);
}

export class SharedMemoryRegions {
  readonly #regions = new Map<string, Region>();
  #pending = 0;

  constructor(readonly options: SharedMemoryOptions) {}

  static #id(owner: string, name: string): string {
    return `${owner}\0${name}`;
  }

  /**
   * Registers `byteSize` bytes at `offset` of the shared memory object `key` as region `name` of
   * `owner`. The object must exist, be a regular file (not a link) under options.dir whose name
   * starts with options.keyPrefix, hold the whole range, and not be registered by another owner.
   */
  async register(
    owner: string,
    name: string,
    key: unknown,
    offset: unknown,
    byteSize: unknown,
  ): Promise<void> {
    if (!NAME.test(name))
      throw invalid(
        `region name '${name}': use letters, digits, '.', '_' or '-' (max 100), starting with a letter or digit`,
      );
    if (typeof key !== "string") throw invalid('"key" must be a string: the shared memory object\'s name');
    const start = byteCount(offset ?? 0, '"offset"');
    const size = byteCount(byteSize, '"byte_size"');
    if (size === 0) throw invalid('"byte_size" must be at least 1');
    // The name's first character is never '.', so it is never "." or "..".
    const file = KEY.exec(key)?.[1];
    if (file === undefined) {
      throw new ModelportError(
        "MP_ERR_SHARED_MEMORY_KEY",
        `key ${JSON.stringify(key)} is not a shared memory object's name: '/' then letters, digits, '.', '_' or '-' (max 255)`,
      );
    }
    if (!file.startsWith(this.options.keyPrefix)) {
      throw new ModelportError(
        "MP_ERR_SHARED_MEMORY_KEY",
        `key '${key}' is not allowed: this server registers only shared memory objects whose names start with '/${this.options.keyPrefix}' (server.sharedMemory.keyPrefix)`,
      );
    }
    const id = SharedMemoryRegions.#id(owner, name);
    this.#checkFree(id, owner, name, file);
    this.#pending++;
    let handle: fsp.FileHandle | undefined;
    try {
      handle = await this.#open(key, file);
      const stat = await handle.stat();
      if (!stat.isFile())
        throw new ModelportError("MP_ERR_SHARED_MEMORY_KEY", `key '${key}' is not a shared memory object`);
      if (start + size > stat.size) {
        throw new ModelportError(
          "MP_ERR_SHARED_MEMORY_RANGE",
          `region '${name}' would end at byte ${start + size} of '${key}', which holds ${stat.size} bytes`,
        );
      }
      // Checked again: another registration may have finished while this one opened its file.
      this.#checkFree(id, owner, name, file, 1);
    } catch (err) {
      await handle?.close();
      throw err;
    } finally {
      this.#pending--;
    }
    this.#regions.set(id, {
      owner,
      name,
      key,
      object: file,
      offset: start,
      byteSize: size,
      file: handle,
      uses: 0,
      removed: false,
    });
  }

  /** Region `name` of `owner`, or all of that owner's regions; an unknown name is not an error (as in Triton). */
  async unregister(owner: string, name?: string): Promise<void> {
    const gone = [...this.#regions.values()].filter(
      (r) => r.owner === owner && (name === undefined || r.name === name),
    );
    await Promise.all(gone.map((r) => this.#remove(r)));
  }

  /** `owner`'s regions (`name` alone: 400 MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND if it has none by that name). */
  status(owner: string, name?: string): RegionStatus[] {
    const list =
      name === undefined
        ? [...this.#regions.values()].filter((r) => r.owner === owner)
        : [this.#get(owner, name)];
    return list.map((r) => ({ name: r.name, key: r.key, offset: r.offset, byte_size: r.byteSize }));
  }

  /**
   * `size` bytes at `offset` of `owner`'s region `name`, in memory of their own (an ArrayBuffer of
   * exactly those bytes, not zeroed first since every byte is read into it).
   */
  async read(owner: string, name: string, offset: number, size: number, what: string): Promise<Uint8Array> {
    const region = this.#use(owner, name, offset, size, what);
    try {
      const bytes = Buffer.allocUnsafeSlow(size);
      let done = 0;
      while (done < size) {
        const { bytesRead } = await region.file.read(bytes, done, size - done, region.offset + offset + done);
        if (bytesRead === 0) throw this.#shrunk(region, what);
        done += bytesRead;
      }
      return bytes;
    } finally {
      await this.#release(region);
    }
  }

  /** Writes `bytes` at `offset` of `owner`'s region `name`, into at most `capacity` bytes there. */
  async write(
    owner: string,
    name: string,
    offset: number,
    capacity: number,
    bytes: Uint8Array,
    what: string,
  ): Promise<void> {
    if (bytes.length > capacity) {
      throw new ModelportError(
        "MP_ERR_SHARED_MEMORY_RANGE",
        `${what} is ${bytes.length} bytes but shared_memory_byte_size gives it ${capacity}`,
      );
    }
    const region = this.#use(owner, name, offset, capacity, what);
    try {
      let done = 0;
      while (done < bytes.length) {
        const { bytesWritten } = await region.file.write(
          bytes,
          done,
          bytes.length - done,
          region.offset + offset + done,
        );
        done += bytesWritten;
      }
    } finally {
      await this.#release(region);
    }
  }

  /**
   * `owner`'s region `name`, checked to hold `size` bytes at `offset` (a request's outputs are
   * checked before inference runs).
   */
  check(owner: string, name: string, offset: number, size: number, what: string): Region {
    const region = this.#get(owner, name);
    if (offset + size > region.byteSize) {
      throw new ModelportError(
        "MP_ERR_SHARED_MEMORY_RANGE",
        `${what}: shared_memory_offset ${offset} + shared_memory_byte_size ${size} runs past region '${name}' (${region.byteSize} bytes)`,
      );
    }
    return region;
  }

  /** Closes every region's file (the server is closing). */
  async close(): Promise<void> {
    await Promise.all([...this.#regions.values()].map((r) => this.#remove(r)));
  }

  #checkFree(id: string, owner: string, name: string, object: string, adding = 0): void {
    if (this.#regions.has(id)) {
      throw new ModelportError(
        "MP_ERR_SHARED_MEMORY_REGION_EXISTS",
        `region '${name}' is already registered; unregister it first`,
      );
    }
    if (this.#regions.size + this.#pending - adding >= this.options.maxRegions) {
      throw new ModelportError(
        "MP_ERR_SHARED_MEMORY_LIMIT",
        `${this.options.maxRegions} shared memory regions are registered or being registered (server.sharedMemory.maxRegions); unregister one first`,
      );
    }
    for (const r of this.#regions.values()) {
      if (r.object === object && r.owner !== owner) {
        throw new ModelportError(
          "MP_ERR_SHARED_MEMORY_KEY",
          `key '/${object}' is registered by another API key; each shared memory object serves one key at a time`,
        );
      }
    }
  }

  async #open(key: string, file: string): Promise<fsp.FileHandle> {
    try {
      return await fs.open(join(this.options.dir, file), constants.O_RDWR | constants.O_NOFOLLOW);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const why =
        code === "ENOENT"
          ? "no such shared memory object (create it with shm_open first)"
          : code === "ELOOP"
            ? "it is a symbolic link"
            : code === "EACCES" || code === "EPERM"
              ? "the server may not read and write it"
              : `it cannot be opened (${code ?? (err as Error).message})`;
      throw new ModelportError("MP_ERR_SHARED_MEMORY_KEY", `key '${key}': ${why}`);
    }
  }

  #get(owner: string, name: string): Region {
    const region = this.#regions.get(SharedMemoryRegions.#id(owner, name));
    if (!region) {
      throw new ModelportError(
        "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND",
        `no shared memory region '${name}' is registered for this key`,
      );
    }
    return region;
  }

  #use(owner: string, name: string, offset: number, size: number, what: string): Region {
    const region = this.check(owner, name, offset, size, what);
    region.uses++;
    return region;
  }

  #shrunk(region: Region, what: string): ModelportError {
    return new ModelportError(
      "MP_ERR_SHARED_MEMORY_RANGE",
      `${what}: '${region.key}' is now shorter than region '${region.name}' (it was truncated after the region was registered)`,
    );
  }

  async #release(region: Region): Promise<void> {
    region.uses--;
    if (region.removed && region.uses === 0) await region.file.close();
  }

  async #remove(region: Region): Promise<void> {
    const id = SharedMemoryRegions.#id(region.owner, region.name);
    if (this.#regions.get(id) !== region) return;
    this.#regions.delete(id);
    region.removed = true;
    if (region.uses === 0) await region.file.close();
  }
}
