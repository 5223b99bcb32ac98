// Messages between a runner and the thread or process that owns its model (worker-main.ts,
// process-main.ts). Plain data only: errors cross as {code, message, details} and are revived
// on the other side.
import { isBodyMemory } from "../protocol/body-memory.js";
import type { TensorMap } from "../tensor.js";
import type { RunnerLoadInfo, RunnerSpec } from "./runner.js";

export interface WireError {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

export type ToWorker = { type: "predict"; id: number; inputs: TensorMap } | { type: "close" };

/**
 * A child process gets its spec as its first message over the IPC channel (a worker thread gets it
 * as workerData); the messages after it travel as frames (tensor-frames.ts).
 */
export type ToProcess = { type: "init"; data: WorkerData };

export type FromWorker =
  | { type: "loaded"; info: RunnerLoadInfo }
  | { type: "load-failed"; error: WireError }
  /**
   * `rss`: the process's resident bytes after the batch, when the runner asked for it (reportRss).
   * `computeMs`: the backend's own time for the batch, without the messages around it.
   */
  | { type: "result"; id: number; outputs: TensorMap; rss?: number; computeMs?: number }
  | { type: "error"; id: number; error: WireError; rss?: number }
  | { type: "closed" };

export interface WorkerData {
  spec: RunnerSpec;
  /**
   * What RunnerLoadInfo.memoryBytes measures: the RSS the load added ("added": a worker thread
   * shares the server's process) or the whole RSS after the load ("total": a child process is
   * the model's own). Default "added".
   */
  memory?: "added" | "total";
  /** Attach the process's RSS to every answer (a child process with a memory ceiling). */
  reportRss?: boolean;
}

/**
 * Buffers worth moving instead of copying when a message crosses threads: a tensor's whole,
 * plain buffer over 16 KiB, and a request body's own memory that tensors are views of
 * (protocol/body-memory.ts), once however many tensors share it.
 */
export function transferables(tensors: TensorMap): ArrayBuffer[] {
  const list = new Set<ArrayBuffer>();
  for (const t of Object.values(tensors)) {
    const d = t.data;
    if (Array.isArray(d)) continue;
    const buf = d.buffer;
    // Small copies are cheaper than detaching.
    if (!(buf instanceof ArrayBuffer) || buf.byteLength <= 16384) continue;
    if ((d.byteOffset === 0 && d.byteLength === buf.byteLength) || isBodyMemory(buf)) list.add(buf);
  }
  return [...list];
}
