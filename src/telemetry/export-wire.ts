// The messages between the serving thread (worker-exporter.ts) and the export worker
// (export-worker.ts). A batch crosses as the ArrayBuffer its spans were encoded into
// (otlp-encode.ts), transferred rather than copied, and the buffer comes back the same way to be
// reused (a fresh one costs page faults). Both sides import this file; it has no code.
import type { Attributes } from "@opentelemetry/api";

/** What the worker is told once: the resource and scope every span of this process shares. */
export interface ExportInit {
  resource: Attributes;
  scope: { name: string; version?: string };
}

export type ToWorker =
  /** `length` bytes of `buffer`: `count` ScopeSpans.spans entries. */
  { type: "export"; id: number; buffer: ArrayBuffer; length: number; count: number } | { type: "shutdown" };

export type FromWorker =
  | { type: "result"; id: number; ok: boolean; error?: string }
  /** A batch's buffer, back once the request has been made from it, to be filled again. */
  | { type: "free"; buffer: ArrayBuffer }
  | { type: "closed" };
