// Files and folders that hold what tenants sent or got (the SQLite job and usage stores with their
// -wal and -shm, result blobs, captured payloads, the audit log) are their owner's alone: files
// 0600, folders 0700, whatever the umask, set when modelport creates them. A file or folder that
// already exists keeps its mode: a folder the user made and pointed modelport at is theirs to set,
// and a file there may be read by something of theirs (a log shipper).
import { chmodSync, closeSync, fchmodSync, mkdirSync, openSync } from "node:fs";
import { chmod, type FileHandle, mkdir, open } from "node:fs/promises";
import { dirname, relative, resolve, sep } from "node:path";

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** `dir` and the folders between `first` (the top one mkdir created) and it, top first. */
function created(first: string | undefined, dir: string): string[] {
  if (first === undefined) return [];
  const out = [first];
  for (const part of relative(first, dir)
    .split(sep)
    .filter((p) => p !== ""))
    out.push(`${out[out.length - 1]!}${sep}${part}`);
  return out;
}

/** Creates `dir` and its missing parents with mode 0700; folders that exist are left as they are. */
export function makePrivateDir(dir: string): void {
  const path = resolve(dir);
  // The mode given to mkdir passes through the umask: the created folders are set exactly after.
  for (const d of created(mkdirSync(path, { recursive: true, mode: PRIVATE_DIR_MODE }), path))
    chmodSync(d, PRIVATE_DIR_MODE);
}

/** As makePrivateDir, without blocking. */
export async function makePrivateDirAsync(dir: string): Promise<void> {
  const path = resolve(dir);
  for (const d of created(await mkdir(path, { recursive: true, mode: PRIVATE_DIR_MODE }), path))
    await chmod(d, PRIVATE_DIR_MODE);
}

/**
 * Creates `file` empty with mode 0600 (and its folder, as makePrivateDir) when it does not exist;
 * an existing file is left as it is. For files another library then opens (SQLite, pino).
 */
export function ensurePrivateFile(file: string): void {
  makePrivateDir(dirname(file));
  let fd: number;
  try {
    fd = openSync(file, "wx", PRIVATE_FILE_MODE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return;
    throw err;
  }
  try {
    fchmodSync(fd, PRIVATE_FILE_MODE);
  } finally {
    closeSync(fd);
  }
}

/**
 * Opens `file` (flags as fs.open's: "wx" for a new file, "a" to append) with mode 0600 set
 * exactly; the caller names only files modelport itself creates (temporary and capture files).
 */
export async function openPrivate(file: string, flags: string): Promise<FileHandle> {
  const handle = await open(file, flags, PRIVATE_FILE_MODE);
  try {
    await handle.chmod(PRIVATE_FILE_MODE);
  } catch (err) {
    await handle.close();
    throw err;
  }
  return handle;
}
