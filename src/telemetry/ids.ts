// Trace and span ids (W3C Trace Context: 16 and 8 random bytes as lowercase hex), cut from a pool
// of crypto-random bytes that is refilled and turned to hex 4 KiB at a time: one native call per
// 256 spans instead of a buffer, a fill and a hex conversion per id (the SDK's RandomIdGenerator).
import { randomFillSync } from "node:crypto";

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let hex = "";
/** Hex characters of `hex` already handed out. */
let used = 2 * POOL_BYTES;

function take(chars: number): string {
  if (used + chars > hex.length) {
    randomFillSync(pool);
    hex = pool.toString("hex");
    used = 0;
  }
  const id = hex.slice(used, used + chars);
  used += chars;
  return id;
}

const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);

/** A new trace id: 32 hex digits, never all zero (an invalid id). */
export function newTraceId(): string {
  const id = take(32);
  return id === ZERO_TRACE ? newTraceId() : id;
}

/** A new span id: 16 hex digits, never all zero. */
export function newSpanId(): string {
  const id = take(16);
  return id === ZERO_SPAN ? newSpanId() : id;
}
