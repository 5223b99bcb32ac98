// The S3 BlobStore: AWS S3 or any S3-compatible endpoint (MinIO, R2, a local test server). Keys
// live under a prefix in one bucket; url() presigns a GET. The AWS SDK is imported on first use,
// so a server that keeps its blobs on disk never loads it.
import type { GetObjectCommandOutput, S3Client, S3ClientConfig } from "@aws-sdk/client-s3";
import { ModelportError } from "../errors.js";
import type { BlobStore } from "./blob-store.js";
import { assertValidBlobKey } from "./fs-blob-store.js";

/** SigV4 presigned URLs live at most 7 days. */
const MAX_URL_TTL_SECONDS = 7 * 24 * 3600;

export interface S3BlobStoreOptions {
  bucket: string;
  /** Prepended to every key as is (include the trailing '/'). Default "". */
  prefix?: string;
  region?: string;
  /** An S3-compatible endpoint; default: AWS. */
  endpoint?: string;
  /** Path-style URLs (http://host/bucket/key), needed by most S3-compatible servers. */
  forcePathStyle?: boolean;
  /** Explicit credentials; default: the SDK's chain (AWS_ACCESS_KEY_ID…, profiles, roles). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /**
   * Checksums on requests and responses: "when_supported" (the SDK default, for AWS) or
   * "when_required" (for S3-compatible servers that refuse or mangle the newer checksum headers).
   * Default: "when_supported" on AWS, "when_required" when an endpoint is set.
   */
  checksums?: "when_supported" | "when_required";
}

interface Sdk {
  client: S3Client;
  s3: typeof import("@aws-sdk/client-s3");
  presign: typeof import("@aws-sdk/s3-request-presigner");
}

export class S3BlobStore implements BlobStore {
  readonly bucket: string;
  readonly prefix: string;
  private readonly options: S3BlobStoreOptions;
  private sdk: Promise<Sdk> | undefined;
  private closed = false;

  constructor(options: S3BlobStoreOptions) {
    this.options = options;
    this.bucket = options.bucket;
    this.prefix = options.prefix ?? "";
  }

  async put(key: string, data: Buffer, contentType: string): Promise<void> {
    const Key = this.objectKey(key);
    const { client, s3 } = await this.load();
    await this.call("put", key, () =>
      client.send(
        new s3.PutObjectCommand({
          Bucket: this.bucket,
          Key,
          Body: data,
          ContentType: contentType,
          ContentLength: data.length,
        }),
      ),
    );
  }

  async get(key: string): Promise<{ data: Buffer; contentType: string } | undefined> {
    const Key = this.objectKey(key);
    const { client, s3 } = await this.load();
    let out: GetObjectCommandOutput;
    try {
      out = await client.send(new s3.GetObjectCommand({ Bucket: this.bucket, Key }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw this.wrap("get", key, err);
    }
    const bytes = out.Body ? await out.Body.transformToByteArray() : new Uint8Array();
    return {
      data: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
      contentType: out.ContentType ?? "application/octet-stream",
    };
  }

  async url(key: string, ttlSeconds: number): Promise<string | undefined> {
    const Key = this.objectKey(key);
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_URL_TTL_SECONDS)
      throw new ModelportError(
        "MP_ERR_SERVER_INTERNAL",
        `presigned URL lifetime must be a whole number of seconds from 1 to ${MAX_URL_TTL_SECONDS} (7 days), got ${ttlSeconds}`,
      );
    const { client, s3, presign } = await this.load();
    return presign.getSignedUrl(client, new s3.GetObjectCommand({ Bucket: this.bucket, Key }), {
      expiresIn: ttlSeconds,
    });
  }

  async check(): Promise<void> {
    const where = `s3://${this.bucket}${this.options.endpoint ? ` at ${this.options.endpoint}` : ""}`;
    let sdk: Sdk;
    try {
      sdk = await this.load();
    } catch (err) {
      throw this.unavailable(where, `the AWS SDK could not be loaded (${(err as Error).message})`);
    }
    try {
      await sdk.client.send(new sdk.s3.HeadBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      const name = (err as { name?: string }).name ?? "Error";
      const why =
        status === 404 || name === "NotFound" || name === "NoSuchBucket"
          ? "the bucket does not exist; create it or fix jobs.blobs.bucket"
          : status === 403 || status === 401
            ? "the credentials were refused; check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the role) and the bucket's policy"
            : status === undefined
              ? `no answer (${name}: ${(err as Error).message}); check jobs.blobs.endpoint and region, and that the service is up`
              : `HTTP ${status} (${name}); check jobs.blobs`;
      throw this.unavailable(where, why);
    }
  }

  private unavailable(where: string, why: string): ModelportError {
    return new ModelportError(
      "MP_ERR_BLOB_STORE_UNAVAILABLE",
      `the blob store ${where} cannot be used: ${why}`,
      {
        backend: "s3",
        bucket: this.bucket,
      },
    );
  }

  async delete(key: string): Promise<void> {
    const Key = this.objectKey(key);
    const { client, s3 } = await this.load();
    try {
      // S3 answers 204 for a missing key too; some compatible servers answer 404.
      await client.send(new s3.DeleteObjectCommand({ Bucket: this.bucket, Key }));
    } catch (err) {
      if (isNotFound(err)) return;
      throw this.wrap("delete", key, err);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const sdk = this.sdk;
    this.sdk = undefined;
    if (sdk) (await sdk.catch(() => undefined))?.client.destroy();
  }

  private objectKey(key: string): string {
    assertValidBlobKey(key);
    return this.prefix + key;
  }

  private load(): Promise<Sdk> {
    if (this.closed)
      return Promise.reject(new ModelportError("MP_ERR_SERVER_INTERNAL", "blob store is closed"));
    this.sdk ??= (async (): Promise<Sdk> => {
      const [s3, presign] = await Promise.all([
        import("@aws-sdk/client-s3"),
        import("@aws-sdk/s3-request-presigner"),
      ]);
      const o = this.options;
      const checksums = o.checksums ?? (o.endpoint ? "when_required" : "when_supported");
      const config: S3ClientConfig = {
        region: o.region ?? "us-east-1",
        forcePathStyle: o.forcePathStyle ?? false,
        requestChecksumCalculation: checksums === "when_required" ? "WHEN_REQUIRED" : "WHEN_SUPPORTED",
        responseChecksumValidation: checksums === "when_required" ? "WHEN_REQUIRED" : "WHEN_SUPPORTED",
        ...(o.endpoint ? { endpoint: o.endpoint } : {}),
        ...(o.credentials ? { credentials: o.credentials } : {}),
      };
      return { client: new s3.S3Client(config), s3, presign };
    })().catch((err: unknown) => {
      this.sdk = undefined;
      throw err;
    });
    return this.sdk;
  }

  private async call<T>(op: string, key: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.wrap(op, key, err);
    }
  }

  private wrap(op: string, key: string, err: unknown): Error {
    if (err instanceof ModelportError) return err;
    const name = (err as { name?: string } | undefined)?.name ?? "Error";
    const message = err instanceof Error ? err.message : String(err);
    const e = new ModelportError(
      "MP_ERR_BLOB_STORE_UNAVAILABLE",
      `S3 ${op} of s3://${this.bucket}/${this.prefix}${key} failed: ${name}: ${message}`,
      { bucket: this.bucket, key: this.prefix + key },
    );
    e.cause = err;
    return e;
  }
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; Code?: string; $metadata?: { httpStatusCode?: number } } | undefined;
  if (e?.name === "NoSuchBucket" || e?.Code === "NoSuchBucket") return false;
  return (
    e?.name === "NoSuchKey" ||
    e?.name === "NotFound" ||
    e?.Code === "NoSuchKey" ||
    e?.$metadata?.httpStatusCode === 404
  );
}
