// The messages between the serving thread (worker-exporter.ts) and the export worker
// (export-worker.ts). A batch crosses as the ArrayBuffer its spans were encoded into
// (otlp-encode.ts), transferred rather than copied, with room in front of the spans for the
// request's head, so the worker sends it from that buffer; the buffer comes back the same way with
// the result, to be reused (a fresh one costs page faults). Both sides import this file; it has no code.
import type { Attributes } from "@opentelemetry/api";

/** What the worker is told once: the resource and scope every span of this process shares. */
export interface ExportInit {
  resource: Attributes;
  scope: { name: string; version?: string };
}

export type ToWorker =
  /** `count` ScopeSpans.spans entries in `buffer` from headRoom() to `end` (the room before them free). */
  { type: "export"; id: number; buffer: ArrayBuffer; end: number; count: number } | { type: "shutdown" };

export type FromWorker =
  /** The export's outcome, and the batch's buffer back, to be filled again. */
  { type: "result"; id: number; ok: boolean; error?: string; buffer: ArrayBuffer } | { type: "closed" };
