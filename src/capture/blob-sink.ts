// The blob destination of payload capture (server.capture.s3): each batch the queue hands over
// becomes one JSONL object, PREFIX/YYYY/MM/DD/capture-<UTC time>-<pid>-<n>.jsonl, through the
// same BlobStore the jobs use for results (storage/). A failed put rejects the whole batch;
// the queue counts its records as dropped.
import type { BlobStore } from "../storage/blob-store.js";
import { type CaptureLine, type CaptureSink, timeStamp } from "./sink.js";

export const CAPTURE_CONTENT_TYPE = "application/x-ndjson";

export class BlobSink implements CaptureSink {
  readonly batching = "batched";
  private seq = 0;

  constructor(private readonly store: BlobStore) {}

  async write(lines: readonly CaptureLine[]): Promise<void> {
    if (lines.length === 0) return;
    const now = new Date();
    const day = now.toISOString().slice(0, 10).replaceAll("-", "/");
    const key = `${day}/capture-${timeStamp(now)}-${process.pid}-${String(++this.seq).padStart(6, "0")}.jsonl`;
    const body = Buffer.from(`${lines.map((l) => l.text).join("\n")}\n`, "utf8");
    await this.store.put(key, body, CAPTURE_CONTENT_TYPE);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
