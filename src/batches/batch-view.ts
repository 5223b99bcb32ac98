// The OpenAI wire shapes of files and batches (FileObject, Batch), as the openai SDK reads them:
// times in seconds since the epoch, null for what has not happened.
import type { BatchRecord, FileRecord } from "./batch-store.js";

const seconds = (ms: number | undefined) => (ms === undefined ? null : Math.floor(ms / 1000));

export function fileObject(file: FileRecord): Record<string, unknown> {
  return {
    id: file.id,
    object: "file",
    bytes: file.bytes,
    created_at: seconds(file.createdAt),
    filename: file.filename,
    purpose: file.purpose,
    // Deprecated by OpenAI but still read by older clients: a stored file is processed.
    status: "processed",
    expires_at: null,
  };
}

export function batchObject(batch: BatchRecord): Record<string, unknown> {
  return {
    id: batch.id,
    object: "batch",
    endpoint: batch.endpoint,
    errors: batch.errors?.length ? { object: "list", data: batch.errors } : null,
    input_file_id: batch.inputFileId,
    completion_window: batch.completionWindow,
    status: batch.status,
    output_file_id: batch.outputFileId ?? null,
    error_file_id: batch.errorFileId ?? null,
    created_at: seconds(batch.createdAt),
    in_progress_at: seconds(batch.inProgressAt),
    expires_at: seconds(batch.expiresAt),
    finalizing_at: seconds(batch.finalizingAt),
    completed_at: seconds(batch.completedAt),
    failed_at: seconds(batch.failedAt),
    expired_at: seconds(batch.expiredAt),
    cancelling_at: seconds(batch.cancellingAt),
    cancelled_at: seconds(batch.cancelledAt),
    request_counts: batch.requestCounts,
    metadata: batch.metadata ?? null,
  };
}

/** OpenAI's list shape: `{object: "list", data, first_id, last_id, has_more}`. */
export function listObject<T extends { id: string }>(
  items: T[],
  hasMore: boolean,
  view: (item: T) => Record<string, unknown>,
): Record<string, unknown> {
  return {
    object: "list",
    data: items.map(view),
    first_id: items[0]?.id ?? null,
    last_id: items.at(-1)?.id ?? null,
    has_more: hasMore,
  };
}
