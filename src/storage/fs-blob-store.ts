// The filesystem BlobStore: one folder, created on first use. Each key maps to a data file and a
// small JSON sidecar holding its content type; both are written to temp files and renamed into
// place, so a reader never sees a half-written blob. url() has none: modelport serves the bytes.
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { access, readFile, rename, rm } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { ModelportError } from "../errors.js";
import { makePrivateDirAsync, openPrivate } from "../private-files.js";
import type { BlobStore } from "./blob-store.js";

const KEY_CHARS = /^[A-Za-z0-9/_.-]+$/;

/** Writes a new file with mode 0600; renamed into place, it keeps that mode. */
async function writePrivate(path: string, data: string | Buffer): Promise<void> {
  const handle = await openPrivate(path, "wx");
  try {
    await handle.writeFile(data);
  } finally {
    await handle.close();
  }
}
const MAX_KEY_LENGTH = 1024;

/**
 * Refuses a key outside the BlobStore contract: empty or over 1024 characters, a character other
 * than letters, digits, '/', '-', '_', '.', an absolute path, an empty segment ("a//b", "a/")
 * or a "." / ".." segment. Shared by every store so keys behave the same everywhere.
 */
export function assertValidBlobKey(key: string): void {
  const problem =
    typeof key !== "string" || key.length === 0
      ? "is empty"
      : key.length > MAX_KEY_LENGTH
        ? `is longer than ${MAX_KEY_LENGTH} characters`
        : !KEY_CHARS.test(key)
          ? "holds a character other than letters, digits, '/', '-', '_' and '.'"
          : key.startsWith("/")
            ? "is an absolute path"
            : key.split("/").some((s) => s === "" || s === "." || s === "..")
              ? "has an empty, '.' or '..' segment"
              : undefined;
  if (problem)
    throw new ModelportError(
      "MP_ERR_SERVER_INTERNAL",
      `invalid blob key ${JSON.stringify(key)}: it ${problem}`,
    );
}

// '~' cannot occur in a key, so "<segment>~blob" never collides with a folder made from another
// key's segment: "a" (file a~blob) and "a/b" (folder a, file b~blob) live side by side.
const DATA_SUFFIX = "~blob";
const META_SUFFIX = "~meta";

interface Meta {
  contentType: string;
  bytes: number;
}

export interface FsBlobStoreOptions {
  /** The folder; relative paths resolve against the working directory. */
  dir: string;
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

export class FsBlobStore implements BlobStore {
  readonly root: string;

  constructor(options: FsBlobStoreOptions | string) {
    this.root = resolve(typeof options === "string" ? options : options.dir);
  }

  async put(key: string, data: Buffer, contentType: string): Promise<void> {
    const { dataPath, metaPath } = this.paths(key);
    // Creates the root too, on first use; folders and files owner-only (private-files.ts): a
    // blob is a job's result.
    await makePrivateDirAsync(dirname(dataPath));
    const tag = `~tmp-${process.pid}-${randomBytes(6).toString("hex")}`;
    const dataTmp = dataPath + tag;
    const metaTmp = metaPath + tag;
    const meta: Meta = { contentType, bytes: data.length };
    try {
      await writePrivate(dataTmp, data);
      await writePrivate(metaTmp, JSON.stringify(meta));
      // Data first, then the sidecar: a new key becomes visible only once both are in place.
      await rename(dataTmp, dataPath);
      await rename(metaTmp, metaPath);
    } catch (err) {
      await Promise.all([rm(dataTmp, { force: true }), rm(metaTmp, { force: true })]);
      throw err;
    }
  }

  async check(): Promise<void> {
    try {
      // The folder is created on first use: until then the nearest folder that exists must let
      // it be created. Nothing is written by the check.
      let dir = this.root;
      while (!(await exists(dir)) && dirname(dir) !== dir) dir = dirname(dir);
      await access(dir, constants.W_OK | constants.X_OK);
    } catch (err) {
      throw new ModelportError(
        "MP_ERR_BLOB_STORE_UNAVAILABLE",
        `the blob folder ${this.root} (jobs.blobs.dir) cannot be written: ${(err as Error).message}; fix its permissions or choose another folder`,
        { backend: "fs", dir: this.root },
      );
    }
  }

  async get(key: string): Promise<{ data: Buffer; contentType: string } | undefined> {
    const { dataPath, metaPath } = this.paths(key);
    let meta: Meta;
    let data: Buffer;
    try {
      meta = JSON.parse(await readFile(metaPath, "utf8")) as Meta;
      data = await readFile(dataPath);
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    return { data, contentType: meta.contentType };
  }

  async url(key: string, _ttlSeconds: number): Promise<string | undefined> {
    assertValidBlobKey(key);
    return undefined;
  }

  async delete(key: string): Promise<void> {
    const { dataPath, metaPath } = this.paths(key);
    // Sidecar first: get() answers undefined as soon as it is gone.
    await rm(metaPath, { force: true });
    await rm(dataPath, { force: true });
  }

  async close(): Promise<void> {}

  private paths(key: string): { dataPath: string; metaPath: string } {
    assertValidBlobKey(key);
    const base = join(this.root, ...key.split("/"));
    // Belt and braces: the key rules already keep every path inside the root.
    if (!base.startsWith(this.root + sep))
      throw new ModelportError("MP_ERR_SERVER_INTERNAL", `blob key ${JSON.stringify(key)} escapes the store`);
    return { dataPath: base + DATA_SUFFIX, metaPath: base + META_SUFFIX };
  }
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
}
