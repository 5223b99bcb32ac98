// The BlobStore interface: where results too large to keep inline go. Filesystem by default,
// S3 (or any S3-compatible endpoint) for many machines; both pass one conformance suite.

export interface BlobStore {
  /** Stores `data` under `key` (letters, digits, '/', '-', '_', '.'); overwrites. */
  put(key: string, data: Buffer, contentType: string): Promise<void>;
  /** The bytes, or undefined when absent. */
  get(key: string): Promise<{ data: Buffer; contentType: string } | undefined>;
  /**
   * A URL a client can GET the blob from without credentials for `ttlSeconds` (S3: a presigned
   * URL), or undefined when the store has none (filesystem: modelport serves the bytes itself).
   */
  url(key: string, ttlSeconds: number): Promise<string | undefined>;
  /**
   * Whether the store can be used at all (the folder can be written; the bucket exists and takes
   * the credentials), without writing a blob: checked at start and by /readyz.
   * @throws ModelportError MP_ERR_BLOB_STORE_UNAVAILABLE saying what is wrong.
   */
  check(): Promise<void>;
  /** Idempotent: removing a missing key is not an error. */
  delete(key: string): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}
