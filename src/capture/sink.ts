// The destination of captured records: what the queue (queue.ts) writes batches of JSON lines to.
// A write either stores every line of its batch or rejects, so the queue knows what to count
// as written and what as dropped. Two implementations: rotated files (file-sink.ts) and JSONL
// objects in a blob store (blob-sink.ts); createCaptureSink picks one from server.capture.

/** One serialized record and the model it belongs to (for the per-model counters). */
export interface CaptureLine {
  readonly model: string;
  /** One JSON object, no newline. */
  readonly text: string;
}

export interface CaptureSink {
  /** Stores every line, in order, or rejects (and then none of them counts as written). */
  write(lines: readonly CaptureLine[]): Promise<void>;
  /**
   * How the queue should batch for this sink: `immediate` writes whatever waits as soon as the
   * previous write is done (files); `batched` waits for batchBytes or flushMs (one object per batch).
   */
  readonly batching: "immediate" | "batched";
  /** Releases files and clients; idempotent. */
  close(): Promise<void>;
}

/** Sortable, unique-enough names: UTC time to the millisecond, the process id and a counter. */
export function timeStamp(now: Date): string {
  return now.toISOString().replace(/[-:.]/g, "");
}
