// The BatchStore interface: the durable records of the OpenAI Batch API (docs/Batch.md), kept in
// the job store's database: uploaded and written files (their bytes are in the BlobStore), batches,
// and each batch request's job. SQLite (sqlite-batch-store.ts) and Redis (redis-batch-store.ts)
// both pass test/conformance/batch-store.conformance.ts.

export type FilePurpose = "batch" | "batch_output";

export interface FileRecord {
  /** `file-…` */
  id: string;
  /** The key name that uploaded it (or whose batch wrote it); absent on a server without keys. */
  owner?: string;
  filename: string;
  purpose: FilePurpose;
  bytes: number;
  /** ms since epoch */
  createdAt: number;
  /** Where its bytes are in the BlobStore. */
  blobKey: string;
}

export type BatchStatus =
  | "validating"
  | "failed"
  | "in_progress"
  | "finalizing"
  | "completed"
  | "expired"
  | "cancelling"
  | "cancelled";

/** The statuses a batch ends in. */
export const FINAL_BATCH_STATUSES: readonly BatchStatus[] = ["failed", "completed", "expired", "cancelled"];

/** Why a batch failed validation (OpenAI's `errors.data[]`). */
export interface BatchError {
  code: string;
  message: string;
  /** 1-based line of the input file, when one line is at fault. */
  line?: number;
  param?: string;
}

export interface BatchRecord {
  /** `batch_…` */
  id: string;
  owner?: string;
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  status: BatchStatus;
  createdAt: number;
  expiresAt: number;
  inProgressAt?: number;
  finalizingAt?: number;
  completedAt?: number;
  failedAt?: number;
  expiredAt?: number;
  cancellingAt?: number;
  cancelledAt?: number;
  outputFileId?: string;
  errorFileId?: string;
  errors?: BatchError[];
  requestCounts: { total: number; completed: number; failed: number };
  metadata?: Record<string, string>;
  /** The owner's limit on jobs queued or running at once, when it has one: paces the submission. */
  maxActive?: number;
}

/**
 * One request of a batch: the job that runs it, or why it could not become one. Requests are
 * stored in line order as they are submitted, so how many there are says where submission resumes.
 */
export interface BatchRequest {
  /** 0-based index of the line among the file's requests. */
  line: number;
  customId: string;
  jobId?: string;
  error?: { code: string; message: string };
}

export interface PageQuery {
  /** Only this key name's records; undefined: everyone's. */
  owner?: string;
  /** The id of the last record of the previous page. */
  after?: string;
  /** 1..10000 */
  limit: number;
}

export interface Page<T> {
  /** Newest first (createdAt, then id, descending). */
  items: T[];
  hasMore: boolean;
}

export interface BatchStore {
  putFile(file: FileRecord): Promise<void>;
  getFile(id: string): Promise<FileRecord | undefined>;
  /** false when there was no such file. */
  deleteFile(id: string): Promise<boolean>;
  listFiles(query: PageQuery & { purpose?: FilePurpose }): Promise<Page<FileRecord>>;
  /** Stores a new batch. */
  createBatch(batch: BatchRecord): Promise<void>;
  /**
   * Replaces the batch when its stored status is still `expected` (another process may have moved
   * it on meanwhile); false, and no change, otherwise.
   */
  updateBatch(batch: BatchRecord, expected: BatchStatus): Promise<boolean>;
  getBatch(id: string): Promise<BatchRecord | undefined>;
  listBatches(query: PageQuery): Promise<Page<BatchRecord>>;
  /** Every batch not yet in a final status, oldest first: what the periodic check drives. */
  unfinishedBatches(): Promise<BatchRecord[]>;
  /** Stores (or replaces, by line) requests of a batch. */
  putRequests(batchId: string, requests: readonly BatchRequest[]): Promise<void>;
  /** The batch's requests, by line. */
  requests(batchId: string): Promise<BatchRequest[]>;
  /** Idempotent. */
  close(): Promise<void>;
}

/** The order key of a record: newest first is this, descending. */
export function orderKey(createdAt: number, id: string): string {
  return `${String(createdAt).padStart(15, "0")}:${id}`;
}
