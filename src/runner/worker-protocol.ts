// Messages between a WorkerRunner and its worker thread. Plain data only: errors cross as
// {code, message, details} and are revived on the other side.
import type { TensorMap } from "../tensor.js";
import type { RunnerLoadInfo, RunnerSpec } from "./runner.js";

export interface WireError {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

export type ToWorker = { type: "predict"; id: number; inputs: TensorMap } | { type: "close" };

export type FromWorker =
  | { type: "loaded"; info: RunnerLoadInfo }
  | { type: "load-failed"; error: WireError }
  | { type: "result"; id: number; outputs: TensorMap }
  | { type: "error"; id: number; error: WireError }
  | { type: "closed" };

export interface WorkerData {
  spec: RunnerSpec;
}

/** Buffers worth moving instead of copying when a message crosses threads. */
export function transferables(tensors: TensorMap): ArrayBuffer[] {
  const list: ArrayBuffer[] = [];
  for (const t of Object.values(tensors)) {
    const d = t.data;
    if (Array.isArray(d)) continue;
    const buf = d.buffer;
    // Only whole, plain buffers over 16 KiB: small copies are cheaper than detaching.
    if (
      buf instanceof ArrayBuffer &&
      d.byteOffset === 0 &&
      d.byteLength === buf.byteLength &&
      buf.byteLength > 16384
    ) {
      list.push(buf);
    }
  }
  return list;
}
