// System shared memory for clients on the same host (the Open Inference Protocol's shared-memory
// extension, as Triton speaks it): a client puts tensors in a POSIX shared memory object
// (shm_open's name, /dev/shm/<key> on Linux), registers a byte range of it as a named region, and
// names the region in an infer request instead of sending the bytes; outputs can be written to a
// region the same way. This is the registry: each region's open file, its owner (the key that
// registered it; names are per owner), and reads and writes bounded by the region.
//
// What a key may register: a regular file of the server's own user under the name prefix, and
// never an object another key is bound to. An object (its device, inode and birth time) is bound
// to the first key that registers it for as long as it exists, regions or not, so no key reads
// what another left in it; bindings of deleted objects are forgotten lazily (see #sweep).
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
  /** Regions registered at once by one owner (at most maxRegions). */
  readonly maxRegionsPerKey: number;
  /** The user objects must belong to; default the server's own (process.getuid()). */
  readonly uid?: number;
}

/** The owner of the objects a revoked key was bound to: no key is ever named so. */
const REVOKED = "\0revoked";

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
  /** The object's identity: device and inode (bindings are kept by it). */
  readonly objectId: string;
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

/** Which owner an object is bound to, and how to tell whether the object is still the same one. */
interface Binding {
  owner: string;
  /** The file name it was last registered by: how a sweep finds out whether it still exists. */
  object: string;
  /** Its birth time in ns (0 where the file system keeps none): tells a new object on a reused inode. */
  readonly born: bigint;
}

/** What identifies an object, from a stat of it. */
interface Identity {
  readonly id: string;
  readonly born: bigint;
}

function identity(stat: { dev: bigint; ino: bigint; birthtimeNs: bigint }): Identity {
  return { id: `${stat.dev}:${stat.ino}`, born: stat.birthtimeNs };
}

export class SharedMemoryRegions {
  readonly #regions = new Map<string, Region>();
  /** Object id → the owner it is bound to: one entry per object registered once that may still exist. */
  readonly #bindings = new Map<string, Binding>();
  /** The bindings' count at which the next registration sweeps them (#sweep). */
  #sweepAt: number;
  #sweeping = false;
  #pending = 0;
  readonly #pendingBy = new Map<string, number>();
  /** Revocations per owner name, so a registration under way when its key is revoked fails. */
  readonly #revocations = new Map<string, number>();
  readonly #uid: number;

  constructor(readonly options: SharedMemoryOptions) {
    this.#uid = options.uid ?? process.getuid?.() ?? -1;
    this.#sweepAt = 2 * options.maxRegions;
  }

  static #id(owner: string, name: string): string {
    return `${owner}\0${name}`;
  }

  /**
   * Registers `byteSize` bytes at `offset` of the shared memory object `key` as region `name` of
   * `owner`. The object must exist, be a regular file (not a link) under options.dir whose name
   * starts with options.keyPrefix, belong to the server's user, hold the whole range, and not be
   * bound to another owner (registered by it, now or before, while it existed).
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
    this.#checkFree(id, owner, name);
    const revocations = this.#revocations.get(owner) ?? 0;
    this.#pending++;
    this.#pendingBy.set(owner, (this.#pendingBy.get(owner) ?? 0) + 1);
    let handle: fsp.FileHandle | undefined;
    let object: Identity;
    try {
      handle = await this.#open(key, file);
      // The open file's own stat: what was opened is what is checked, whatever the name points to now.
      const stat = await handle.stat({ bigint: true });
      if (!stat.isFile())
        throw new ModelportError("MP_ERR_SHARED_MEMORY_KEY", `key '${key}' is not a shared memory object`);
      if (stat.uid !== BigInt(this.#uid)) {
        throw new ModelportError(
          "MP_ERR_SHARED_MEMORY_KEY",
          `key '${key}' belongs to another user (uid ${stat.uid}); this server registers only objects of its own user (uid ${this.#uid})`,
        );
      }
      if (start + size > stat.size) {
        throw new ModelportError(
          "MP_ERR_SHARED_MEMORY_RANGE",
          `region '${name}' would end at byte ${start + size} of '${key}', which holds ${stat.size} bytes`,
        );
      }
      object = identity(stat);
      await this.#forgetIfGone(object);
      if ((this.#revocations.get(owner) ?? 0) !== revocations) {
        throw new ModelportError(
          "MP_ERR_AUTH_KEY_REVOKED",
          "the API key was removed from the key file (or changed) while this region was being registered",
        );
      }
      // Checked again: another registration may have finished while this one opened its file.
      this.#checkFree(id, owner, name, 1);
      this.#checkBinding(owner, key, object);
    } catch (err) {
      await handle?.close();
      throw err;
    } finally {
      this.#pending--;
      const left = (this.#pendingBy.get(owner) ?? 1) - 1;
      if (left > 0) this.#pendingBy.set(owner, left);
      else this.#pendingBy.delete(owner);
    }
    this.#regions.set(id, {
      owner,
      name,
      key,
      object: file,
      objectId: object.id,
      offset: start,
      byteSize: size,
      file: handle,
      uses: 0,
      removed: false,
    });
    const bound = this.#bindings.get(object.id);
    if (bound) bound.object = file;
    else this.#bindings.set(object.id, { owner, object: file, born: object.born });
    if (this.#bindings.size >= this.#sweepAt) await this.#sweep();
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

  /**
   * Unregisters every region of `owner` (its key was revoked) and keeps the objects it was bound to
   * from every key, a new key of the same name included, for as long as they exist.
   */
  async revoke(owner: string): Promise<void> {
    this.#revocations.set(owner, (this.#revocations.get(owner) ?? 0) + 1);
    for (const b of this.#bindings.values()) if (b.owner === owner) b.owner = REVOKED;
    await this.unregister(owner);
  }

  /** Objects bound to an owner now (each takes one small entry until the object is gone). */
  get bindings(): number {
    return this.#bindings.size;
  }

  /** Closes every region's file (the server is closing). */
  async close(): Promise<void> {
    await Promise.all([...this.#regions.values()].map((r) => this.#remove(r)));
  }

  #checkFree(id: string, owner: string, name: string, adding = 0): void {
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
    let held = (this.#pendingBy.get(owner) ?? 0) - adding;
    for (const r of this.#regions.values()) if (r.owner === owner) held++;
    if (held >= this.options.maxRegionsPerKey) {
      throw new ModelportError(
        "MP_ERR_SHARED_MEMORY_LIMIT",
        `this API key has ${this.options.maxRegionsPerKey} shared memory regions registered or being registered (server.sharedMemory.maxRegionsPerKey); unregister one first`,
      );
    }
  }

  /** Throws unless the object is free or bound to `owner`. */
  #checkBinding(owner: string, key: string, object: Identity): void {
    const bound = this.#bindings.get(object.id);
    if (bound === undefined || bound.owner === owner) return;
    throw new ModelportError(
      "MP_ERR_SHARED_MEMORY_KEY",
      `key '${key}' is bound to another API key: an object registered by one key serves no other while it exists; use an object of your own`,
    );
  }

  /**
   * Forgets the binding on `object`'s inode when it was another object's, one deleted since: where
   * the file system keeps birth times, told by them; where it does not, by the name it was
   * registered by no longer naming that inode.
   */
  async #forgetIfGone(object: Identity): Promise<void> {
    const bound = this.#bindings.get(object.id);
    if (bound === undefined || this.#live(object.id)) return;
    const gone =
      bound.born !== 0n && object.born !== 0n
        ? bound.born !== object.born
        : !(await this.#exists(object.id, bound));
    if (gone && this.#bindings.get(object.id) === bound && !this.#live(object.id))
      this.#bindings.delete(object.id);
  }

  /**
   * True while the object `binding` is on still exists under the name it was registered by. An
   * object renamed since looks gone to a sweep; only the server's own user (or root) can rename its
   * objects in the sticky /dev/shm, and that user can read them without the server.
   */
  async #exists(id: string, binding: Binding): Promise<boolean> {
    try {
      const now = identity(await fs.lstat(join(this.options.dir, binding.object), { bigint: true }));
      return now.id === id && (binding.born === 0n || now.born === binding.born);
    } catch (err) {
      // Only "no such file" says it is gone; anything else keeps the binding.
      return (err as NodeJS.ErrnoException).code !== "ENOENT";
    }
  }

  #live(id: string): boolean {
    for (const r of this.#regions.values()) if (r.objectId === id) return true;
    return false;
  }

  /**
   * Forgets the bindings of objects that are gone (deleted, or their name now another object), so
   * that the table holds only objects that exist: run when it has doubled since the last sweep,
   * which makes its cost a constant per registration.
   */
  async #sweep(): Promise<void> {
    if (this.#sweeping) return;
    this.#sweeping = true;
    try {
      const idle = [...this.#bindings].filter(([id]) => !this.#live(id));
      for (const [id, binding] of idle) {
        if (await this.#exists(id, binding)) continue;
        if (this.#bindings.get(id) === binding && !this.#live(id)) this.#bindings.delete(id);
      }
    } finally {
      this.#sweeping = false;
      this.#sweepAt = Math.max(2 * this.options.maxRegions, 2 * this.#bindings.size);
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
    if (region.removed && region.uses === 0) await this.#closeFile(region);
  }

  async #remove(region: Region): Promise<void> {
    const id = SharedMemoryRegions.#id(region.owner, region.name);
    if (this.#regions.get(id) !== region) return;
    this.#regions.delete(id);
    region.removed = true;
    if (region.uses === 0) await this.#closeFile(region);
  }

  /** Closes a removed region's file; an object already deleted (no links left) loses its binding now. */
  async #closeFile(region: Region): Promise<void> {
    const stat = await region.file.stat().catch(() => undefined);
    await region.file.close();
    if (stat?.nlink === 0 && !this.#live(region.objectId)) this.#bindings.delete(region.objectId);
  }
}
