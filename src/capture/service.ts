// Builds payload capture from server.capture: the destination (a folder of rotated JSONL files,
// or JSONL objects in an S3 bucket through the blob store) behind the bounded queue. Tests and
// embedders may pass their own sink or blob store.
import { resolve } from "node:path";
import type { Logger } from "pino";
import type { CaptureDestinationConfig } from "../config/schema.js";
import type { Metrics } from "../metrics/metrics.js";
import type { BlobStore } from "../storage/blob-store.js";
import { S3BlobStore } from "../storage/s3-blob-store.js";
import { BlobSink } from "./blob-sink.js";
import { FileSink } from "./file-sink.js";
import { CaptureQueue } from "./queue.js";
import type { CaptureSink } from "./sink.js";

export interface CaptureDeps {
  /** Where a relative server.capture.dir starts. */
  cwd: string;
  metrics: Metrics;
  log: Logger;
  /** Replaces the destination server.capture names. */
  sink?: CaptureSink;
  /** Replaces the S3 store server.capture.s3 names (a test server, explicit credentials). */
  blobStore?: BlobStore;
}

/** The sink server.capture names. */
export function createCaptureSink(dest: Readonly<CaptureDestinationConfig>, deps: CaptureDeps): CaptureSink {
  if (deps.sink) return deps.sink;
  if (dest.dir !== undefined)
    return new FileSink({
      dir: resolve(deps.cwd, dest.dir),
      rotateBytes: dest.rotateBytes,
      keepFiles: dest.keepFiles,
    });
  const s3 = dest.s3!;
  const prefix = s3.prefix === "" || s3.prefix.endsWith("/") ? s3.prefix : `${s3.prefix}/`;
  return new BlobSink(
    deps.blobStore ??
      new S3BlobStore({
        bucket: s3.bucket,
        prefix,
        region: s3.region,
        forcePathStyle: s3.forcePathStyle,
        ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
      }),
  );
}

/** The queue in front of server.capture's destination. */
export function createCaptureQueue(
  dest: Readonly<CaptureDestinationConfig>,
  deps: CaptureDeps,
): CaptureQueue {
  return new CaptureQueue({
    sink: createCaptureSink(dest, deps),
    metrics: deps.metrics,
    log: deps.log,
    maxRecords: dest.queueRecords,
    maxBytes: dest.queueBytes,
    batchBytes: dest.batchBytes,
    flushMs: dest.flushMs,
  });
}
