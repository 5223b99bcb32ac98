// Where glibc's malloc keeps freed blocks of megabytes, set once when a serving process (or a
// model's child process) starts. glibc gives a block at or above its mmap threshold (128 KiB at
// start) a mapping of its own and unmaps it when freed, so the next block of that size is fresh
// memory: a page fault for every 4 KiB written. Each time such a block is freed the threshold
// rises to its size, up to 32 MiB, and the free memory kept at the heap's top before any is
// returned to twice that (mallopt(3), "dynamic mmap threshold"). With tensors of a few
// megabytes the thresholds stay near their size and every request's body, input copy and answer
// still take fresh pages: the light detector's 4.9 MB request cost ~550–725 page faults and ~9 ms
// of the request thread (docs/PERFORMANCE.md). Freeing one block of just under 32 MiB at start
// sets both where a busy server's would end: blocks up to 32 MiB come from the heap and up to
// 64 MiB of free memory stays in each of glibc's heaps (the main thread's, a model thread's).
// glibc turns this adjustment off where the thresholds were set (GLIBC_TUNABLES, MALLOC_*_
// environment variables): those settings stand. Other C libraries are unaffected (one block
// allocated and freed).
import v8 from "node:v8";
import { runInNewContext } from "node:vm";

/** Just under glibc's ceiling for the dynamic threshold (32 MiB on 64-bit): the block's header fits. */
const THRESHOLD_BLOCK_BYTES = 32 * 1024 * 1024 - 64 * 1024;

const MALLOC_ENV = "MODELPORT_RAISE_MALLOC_THRESHOLDS";

/**
 * Whether to raise the thresholds: MODELPORT_RAISE_MALLOC_THRESHOLDS `1` (the default) or `0`.
 * @throws Error when the variable holds anything else.
 */
export function raiseMallocThresholds(env: NodeJS.ProcessEnv = process.env): boolean {
  const text = env[MALLOC_ENV];
  if (text === undefined || text === "") return true;
  const value = text.trim();
  if (value === "1") return true;
  if (value === "0") return false;
  throw new Error(`${MALLOC_ENV} must be 1 or 0, got ${JSON.stringify(text)}`);
}

/**
 * Frees one block of THRESHOLD_BLOCK_BYTES when raiseMallocThresholds() says so; returns whether
 * it did (false also where the block could not be had: a limit on address space, say). A block
 * never written takes no resident memory, and the full collection that frees it runs on a heap
 * that has barely started.
 */
export function applyMallocThresholds(): boolean {
  if (!raiseMallocThresholds()) return false;
  try {
    new ArrayBuffer(THRESHOLD_BLOCK_BYTES);
  } catch {
    return false;
  }
  // An ArrayBuffer's memory is freed when the collector finds it unreachable, and by default
  // on a helper thread some time after the collection (milliseconds, more on a busy machine):
  // one full collection now that frees it before returning, unless node's own flags say how
  // that memory is swept.
  const sweepingGiven = process.execArgv.some((a) =>
    /^--(no-)?concurrent[-_]array[-_]buffer[-_]sweeping(=|$)/.test(a),
  );
  if (!sweepingGiven) v8.setFlagsFromString("--no-concurrent-array-buffer-sweeping");
  collectGarbage();
  if (!sweepingGiven) v8.setFlagsFromString("--concurrent-array-buffer-sweeping");
  return true;
}

/** A full collection: node's own `gc` where it was started with --expose-gc, else one that only a throwaway context is given. */
function collectGarbage(): void {
  const own = (globalThis as { gc?: () => void }).gc;
  if (typeof own === "function") {
    own();
    return;
  }
  v8.setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  v8.setFlagsFromString("--no-expose-gc");
  gc();
}
