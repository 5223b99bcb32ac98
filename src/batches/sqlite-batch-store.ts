// The BatchStore in tables of the job store's SQLite file (a connection of its own; WAL lets both
// write). Records are JSON text beside the columns lists and checks need.
import type Database from "better-sqlite3";
import { ensurePrivateFile } from "../private-files.js";
import { openSqlite } from "../sqlite.js";
import {
  type BatchRecord,
  type BatchRequest,
  type BatchStatus,
  type BatchStore,
  FINAL_BATCH_STATUSES,
  type FilePurpose,
  type FileRecord,
  type Page,
  type PageQuery,
} from "./batch-store.js";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS batch_files (
  id TEXT PRIMARY KEY,
  owner TEXT,
  purpose TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS batch_files_order ON batch_files (created_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS batches (
  id TEXT PRIMARY KEY,
  owner TEXT,
  status TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS batches_order ON batches (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS batches_status ON batches (status);
CREATE TABLE IF NOT EXISTS batch_requests (
  batch_id TEXT NOT NULL,
  line INTEGER NOT NULL,
  record TEXT NOT NULL,
  PRIMARY KEY (batch_id, line)
) WITHOUT ROWID;`;

const FINAL_LIST = FINAL_BATCH_STATUSES.map((s) => `'${s}'`).join(", ");

export class SqliteBatchStore implements BatchStore {
  readonly #db: Database.Database;
  #closed = false;

  constructor(path: string) {
    // Owner-only, as the job store whose file it shares (private-files.ts).
    if (path !== ":memory:" && !path.startsWith("file:")) ensurePrivateFile(path);
    this.#db = openSqlite(path, { timeout: 5000 });
    this.#db.pragma("journal_mode = WAL");
    this.#db.exec(SCHEMA);
  }

  async putFile(file: FileRecord): Promise<void> {
    this.#db
      .prepare(
        "INSERT OR REPLACE INTO batch_files (id, owner, purpose, created_at, record) VALUES (?, ?, ?, ?, ?)",
      )
      .run(file.id, file.owner ?? null, file.purpose, file.createdAt, JSON.stringify(file));
  }

  async getFile(id: string): Promise<FileRecord | undefined> {
    const row = this.#db.prepare("SELECT record FROM batch_files WHERE id = ?").get(id) as
      | { record: string }
      | undefined;
    return row ? (JSON.parse(row.record) as FileRecord) : undefined;
  }

  async deleteFile(id: string): Promise<boolean> {
    return this.#db.prepare("DELETE FROM batch_files WHERE id = ?").run(id).changes > 0;
  }

  async listFiles(query: PageQuery & { purpose?: FilePurpose }): Promise<Page<FileRecord>> {
    return this.#page<FileRecord>("batch_files", query, query.purpose);
  }

  async createBatch(batch: BatchRecord): Promise<void> {
    this.#db
      .prepare("INSERT INTO batches (id, owner, status, created_at, record) VALUES (?, ?, ?, ?, ?)")
      .run(batch.id, batch.owner ?? null, batch.status, batch.createdAt, JSON.stringify(batch));
  }

  async updateBatch(batch: BatchRecord, expected: BatchStatus): Promise<boolean> {
    const changed = this.#db
      .prepare("UPDATE batches SET status = ?, record = ? WHERE id = ? AND status = ?")
      .run(batch.status, JSON.stringify(batch), batch.id, expected).changes;
    return changed > 0;
  }

  async getBatch(id: string): Promise<BatchRecord | undefined> {
    const row = this.#db.prepare("SELECT record FROM batches WHERE id = ?").get(id) as
      | { record: string }
      | undefined;
    return row ? (JSON.parse(row.record) as BatchRecord) : undefined;
  }

  async listBatches(query: PageQuery): Promise<Page<BatchRecord>> {
    return this.#page<BatchRecord>("batches", query);
  }

  async unfinishedBatches(): Promise<BatchRecord[]> {
    const rows = this.#db
      .prepare(`SELECT record FROM batches WHERE status NOT IN (${FINAL_LIST}) ORDER BY created_at, id`)
      .all() as { record: string }[];
    return rows.map((r) => JSON.parse(r.record) as BatchRecord);
  }

  async putRequests(batchId: string, requests: readonly BatchRequest[]): Promise<void> {
    const put = this.#db.prepare(
      "INSERT OR REPLACE INTO batch_requests (batch_id, line, record) VALUES (?, ?, ?)",
    );
    this.#db.transaction(() => {
      for (const r of requests) put.run(batchId, r.line, JSON.stringify(r));
    })();
  }

  async requests(batchId: string): Promise<BatchRequest[]> {
    const rows = this.#db
      .prepare("SELECT record FROM batch_requests WHERE batch_id = ? ORDER BY line")
      .all(batchId) as { record: string }[];
    return rows.map((r) => JSON.parse(r.record) as BatchRequest);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#db.close();
  }

  /** A page of `table`, newest first, after the record `query.after` when it exists. */
  #page<T>(table: string, query: PageQuery, purpose?: string): Page<T> {
    const where: string[] = [];
    const args: (string | number)[] = [];
    if (query.owner !== undefined) {
      where.push("owner = ?");
      args.push(query.owner);
    }
    if (purpose !== undefined) {
      where.push("purpose = ?");
      args.push(purpose);
    }
    if (query.after !== undefined) {
      const at = this.#db.prepare(`SELECT created_at FROM ${table} WHERE id = ?`).get(query.after) as
        | { created_at: number }
        | undefined;
      // A cursor that no longer exists (deleted) ends the listing rather than restarting it.
      if (!at) return { items: [], hasMore: false };
      where.push("(created_at < ? OR (created_at = ? AND id < ?))");
      args.push(at.created_at, at.created_at, query.after);
    }
    const rows = this.#db
      .prepare(
        `SELECT record FROM ${table} ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY created_at DESC, id DESC LIMIT ?`,
      )
      .all(...args, query.limit + 1) as { record: string }[];
    return {
      items: rows.slice(0, query.limit).map((r) => JSON.parse(r.record) as T),
      hasMore: rows.length > query.limit,
    };
  }
}
