// Builds the BlobStore the configuration names (jobs.blobs): a folder, or an S3 bucket.
import { resolve } from "node:path";
import type { JobsConfig } from "../config/schema.js";
import type { BlobStore } from "./blob-store.js";
import { FsBlobStore } from "./fs-blob-store.js";
import { S3BlobStore, type S3BlobStoreOptions } from "./s3-blob-store.js";

export interface CreateBlobStoreOptions {
  /** S3 only: explicit credentials instead of the SDK's chain (tests, embedding). */
  credentials?: S3BlobStoreOptions["credentials"];
}

/**
 * The store for `jobs.blobs`. A relative fs dir resolves against `cwd`. For S3, callers pass
 * `blobs.urlTtlSeconds` to url(); the SDK is loaded on first use, not here.
 */
export function createBlobStore(
  blobs: Readonly<JobsConfig["blobs"]>,
  cwd: string,
  options: CreateBlobStoreOptions = {},
): BlobStore {
  if (blobs.backend === "fs") return new FsBlobStore({ dir: resolve(cwd, blobs.dir) });
  return new S3BlobStore({
    bucket: blobs.bucket,
    prefix: blobs.prefix,
    region: blobs.region,
    forcePathStyle: blobs.forcePathStyle,
    ...(blobs.endpoint ? { endpoint: blobs.endpoint } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
  });
}
