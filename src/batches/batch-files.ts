// Files of the Batch API (POST/GET/DELETE /v1/files): batch inputs a client uploads and the
// output and error files its batches write. The bytes are in the BlobStore under files/{id}, the
// record in the BatchStore. A key sees only its own files; another key's id is "not found".
import { randomUUID } from "node:crypto";
import type { JobsConfig } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import type { BlobStore } from "../storage/blob-store.js";
import { parseBatchFile } from "./batch-input.js";
import type { BatchStore, FilePurpose, FileRecord, Page, PageQuery } from "./batch-store.js";

export const FILE_PURPOSES: readonly FilePurpose[] = ["batch", "batch_output"];
/** Longest filename kept (longer ones are cut). */
const MAX_FILENAME_CHARS = 255;

export interface Upload {
  owner?: string;
  filename: string;
  purpose: string;
  data: Buffer;
}

export class BatchFiles {
  constructor(
    private readonly store: BatchStore,
    private readonly blobs: BlobStore,
    private readonly config: Readonly<JobsConfig["batches"]>,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * Checks and stores an uploaded batch input file.
   * @throws ModelportError MP_ERR_REQUEST_INVALID (purpose), MP_ERR_FILE_TOO_LARGE,
   * MP_ERR_FILE_INVALID (a line, naming it)
   */
  async upload(upload: Upload): Promise<FileRecord> {
    if (upload.purpose !== "batch") {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `"purpose" must be "batch" (the only files modelport keeps are batch inputs); got ${JSON.stringify(upload.purpose)}`,
        { param: "purpose" },
      );
    }
    if (upload.data.length > this.config.maxFileBytes) throw this.tooLarge(upload.data.length);
    await parseBatchFile(upload.data, this.config.maxFileLines);
    return this.write(upload.owner, upload.filename, "batch", upload.data, newFileId());
  }

  /** Stores a file of `purpose` under `id` (replacing one of that id: a batch's output written again). */
  async write(
    owner: string | undefined,
    filename: string,
    purpose: FilePurpose,
    data: Buffer,
    id: string,
  ): Promise<FileRecord> {
    const record: FileRecord = {
      id,
      ...(owner !== undefined ? { owner } : {}),
      filename: filename.slice(0, MAX_FILENAME_CHARS) || "file.jsonl",
      purpose,
      bytes: data.length,
      createdAt: this.clock(),
      blobKey: `files/${id}.jsonl`,
    };
    await this.blobs.put(record.blobKey, data, "application/jsonl");
    await this.store.putFile(record);
    return record;
  }

  /**
   * The file if `scope` (a key name; undefined: every file) may see it.
   * @throws ModelportError MP_ERR_FILE_NOT_FOUND, the same for another key's file as for none
   */
  async get(id: string, scope: string | undefined): Promise<FileRecord> {
    const file = await this.store.getFile(id);
    if (!file || (scope !== undefined && file.owner !== scope)) throw notFound(id);
    return file;
  }

  list(query: PageQuery & { purpose?: FilePurpose }): Promise<Page<FileRecord>> {
    return this.store.listFiles(query);
  }

  /** The bytes of a file. @throws ModelportError MP_ERR_FILE_NOT_FOUND (also when its bytes are gone) */
  async content(file: FileRecord): Promise<Buffer> {
    const blob = await this.blobs.get(file.blobKey);
    if (!blob) throw notFound(file.id);
    return blob.data;
  }

  /** Removes the record, then the bytes. */
  async delete(file: FileRecord): Promise<void> {
    await this.store.deleteFile(file.id);
    await this.blobs.delete(file.blobKey);
  }

  tooLarge(bytes: number): ModelportError {
    return new ModelportError(
      "MP_ERR_FILE_TOO_LARGE",
      `the file is ${bytes} bytes or more; at most ${this.config.maxFileBytes} (jobs.batches.maxFileBytes): split it into several batches`,
      { limit: this.config.maxFileBytes, param: "file" },
    );
  }
}

export function newFileId(): string {
  return `file-${randomUUID().replaceAll("-", "")}`;
}

function notFound(id: string): ModelportError {
  return new ModelportError("MP_ERR_FILE_NOT_FOUND", `no file '${id}'`, { param: "file_id" });
}
