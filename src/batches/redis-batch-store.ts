// The BatchStore in Redis (the job store's server), for processes that share their jobs there.
// The one read-then-write, updateBatch's status check, is a Lua script, so two processes never
// both move a batch on from the same status.
//
// Layout under the prefix (default "modelport:"):
//   bf:{id}            string: a file's record (JSON)
//   bfl, bfo:{owner}   zsets of files, all scores 0, member orderKey (createdAt:id), read by lex
//   b:{id}             string: a batch's record (JSON)
//   bl, bo:{owner}     zsets of batches, as for files
//   bu                 set: ids of batches not yet final
//   br:{id}            hash: a batch's requests, line → JSON
import type { Redis } from "ioredis";
import {
  type BatchRecord,
  type BatchRequest,
  type BatchStatus,
  type BatchStore,
  FINAL_BATCH_STATUSES,
  type FilePurpose,
  type FileRecord,
  orderKey,
  type Page,
  type PageQuery,
} from "./batch-store.js";

/**
 * KEYS[1] the batch's record, KEYS[2] the set of unfinished batches.
 * ARGV[1] the new record (JSON), ARGV[2] the status it must have now, ARGV[3] "1" when the new
 * status is final, ARGV[4] the batch id. Returns 1 when written, 0 when the status differed.
 */
const UPDATE_BATCH = `
local current = redis.call('GET', KEYS[1])
if not current then return 0 end
if cjson.decode(current).status ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[3] == '1' then redis.call('SREM', KEYS[2], ARGV[4]) else redis.call('SADD', KEYS[2], ARGV[4]) end
return 1`;

/** How many ids one list read asks for while a purpose filter skips some. */
const SCAN_PAGE = 200;

export class RedisBatchStore implements BatchStore {
  readonly #redis: Redis;
  readonly #p: string;

  /** Uses `redis` (its owner closes it); keys go under `prefix`. */
  constructor(redis: Redis, prefix = "modelport:") {
    this.#redis = redis;
    this.#p = prefix;
  }

  async putFile(file: FileRecord): Promise<void> {
    const member = orderKey(file.createdAt, file.id);
    const tx = this.#redis
      .multi()
      .set(`${this.#p}bf:${file.id}`, JSON.stringify(file))
      .zadd(`${this.#p}bfl`, 0, member);
    if (file.owner !== undefined) tx.zadd(`${this.#p}bfo:${file.owner}`, 0, member);
    await exec(tx);
  }

  async getFile(id: string): Promise<FileRecord | undefined> {
    const raw = await this.#redis.get(`${this.#p}bf:${id}`);
    return raw ? (JSON.parse(raw) as FileRecord) : undefined;
  }

  async deleteFile(id: string): Promise<boolean> {
    const file = await this.getFile(id);
    if (!file) return false;
    const member = orderKey(file.createdAt, file.id);
    const tx = this.#redis.multi().del(`${this.#p}bf:${id}`).zrem(`${this.#p}bfl`, member);
    if (file.owner !== undefined) tx.zrem(`${this.#p}bfo:${file.owner}`, member);
    const results = await exec(tx);
    return results[0] === 1;
  }

  async listFiles(query: PageQuery & { purpose?: FilePurpose }): Promise<Page<FileRecord>> {
    const list = query.owner !== undefined ? `${this.#p}bfo:${query.owner}` : `${this.#p}bfl`;
    return this.#page<FileRecord>(
      list,
      "bf",
      query,
      (f) => query.purpose === undefined || f.purpose === query.purpose,
    );
  }

  async createBatch(batch: BatchRecord): Promise<void> {
    const member = orderKey(batch.createdAt, batch.id);
    const tx = this.#redis
      .multi()
      .set(`${this.#p}b:${batch.id}`, JSON.stringify(batch))
      .zadd(`${this.#p}bl`, 0, member);
    if (batch.owner !== undefined) tx.zadd(`${this.#p}bo:${batch.owner}`, 0, member);
    if (!FINAL_BATCH_STATUSES.includes(batch.status)) tx.sadd(`${this.#p}bu`, batch.id);
    await exec(tx);
  }

  async updateBatch(batch: BatchRecord, expected: BatchStatus): Promise<boolean> {
    const written = await this.#redis.eval(
      UPDATE_BATCH,
      2,
      `${this.#p}b:${batch.id}`,
      `${this.#p}bu`,
      JSON.stringify(batch),
      expected,
      FINAL_BATCH_STATUSES.includes(batch.status) ? "1" : "0",
      batch.id,
    );
    return written === 1;
  }

  async getBatch(id: string): Promise<BatchRecord | undefined> {
    const raw = await this.#redis.get(`${this.#p}b:${id}`);
    return raw ? (JSON.parse(raw) as BatchRecord) : undefined;
  }

  async listBatches(query: PageQuery): Promise<Page<BatchRecord>> {
    const list = query.owner !== undefined ? `${this.#p}bo:${query.owner}` : `${this.#p}bl`;
    return this.#page<BatchRecord>(list, "b", query, () => true);
  }

  async unfinishedBatches(): Promise<BatchRecord[]> {
    const ids = await this.#redis.smembers(`${this.#p}bu`);
    if (ids.length === 0) return [];
    const raws = await this.#redis.mget(ids.map((id) => `${this.#p}b:${id}`));
    const batches = raws.flatMap((r) => (r ? [JSON.parse(r) as BatchRecord] : []));
    return batches
      .filter((b) => !FINAL_BATCH_STATUSES.includes(b.status))
      .sort((a, b) => (orderKey(a.createdAt, a.id) < orderKey(b.createdAt, b.id) ? -1 : 1));
  }

  async putRequests(batchId: string, requests: readonly BatchRequest[]): Promise<void> {
    if (requests.length === 0) return;
    const fields: string[] = [];
    for (const r of requests) fields.push(String(r.line), JSON.stringify(r));
    await this.#redis.hset(`${this.#p}br:${batchId}`, ...fields);
  }

  async requests(batchId: string): Promise<BatchRequest[]> {
    const all = await this.#redis.hgetall(`${this.#p}br:${batchId}`);
    return Object.values(all)
      .map((r) => JSON.parse(r) as BatchRequest)
      .sort((a, b) => a.line - b.line);
  }

  async close(): Promise<void> {}

  /** Newest first from the zset `list`, after the record `query.after`, keeping those `keep` accepts. */
  async #page<T extends { id: string; createdAt: number }>(
    list: string,
    kind: "bf" | "b",
    query: PageQuery,
    keep: (record: T) => boolean,
  ): Promise<Page<T>> {
    let max = "+";
    if (query.after !== undefined) {
      const raw = await this.#redis.get(`${this.#p}${kind}:${query.after}`);
      if (!raw) return { items: [], hasMore: false };
      max = `(${orderKey((JSON.parse(raw) as T).createdAt, query.after)}`;
    }
    const items: T[] = [];
    for (;;) {
      const want = Math.max(query.limit + 1 - items.length, 1);
      const count = Math.min(Math.max(want, SCAN_PAGE), 10_000);
      const members = await this.#redis.zrevrangebylex(list, max, "-", "LIMIT", 0, count);
      if (members.length === 0) break;
      const raws = await this.#redis.mget(
        members.map((m) => `${this.#p}${kind}:${m.slice(m.indexOf(":") + 1)}`),
      );
      for (const raw of raws) {
        if (!raw) continue;
        const record = JSON.parse(raw) as T;
        if (keep(record)) items.push(record);
      }
      if (items.length > query.limit || members.length < count) break;
      max = `(${members[members.length - 1]}`;
    }
    return { items: items.slice(0, query.limit), hasMore: items.length > query.limit };
  }
}

async function exec(tx: ReturnType<Redis["multi"]>): Promise<unknown[]> {
  const results = await tx.exec();
  const failed = results?.find(([err]) => err);
  if (failed) throw failed[0];
  return (results ?? []).map(([, value]) => value);
}
