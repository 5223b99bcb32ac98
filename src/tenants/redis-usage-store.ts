// Durable usage per key in Redis (the job store's server): one hash per hour whose fields are
// "key \t model \t figure", added to with HINCRBYFLOAT in one MULTI per flush, and a sorted set of
// the hours that have usage, so a query reads only those. Hours are kept for 400 days.
//
// Layout under the prefix (default "modelport:"):
//   usage:h:{hour}   hash: "{key}\t{model}\t{figure}" → number
//   usage:hours      zset: score and member the hour (ms since epoch)
import type { Redis } from "ioredis";
import { FIGURES, type UsageFigures, type UsageRow, type UsageStore, zeroFigures } from "./usage-store.js";

const KEEP_MS = 400 * 24 * 3_600_000;

export class RedisUsageStore implements UsageStore {
  readonly #redis: Redis;
  readonly #prefix: string;

  /** Uses `redis` (its owner closes it); keys go under `prefix`. */
  constructor(redis: Redis, prefix = "modelport:") {
    this.#redis = redis;
    this.#prefix = prefix;
  }

  async add(rows: readonly UsageRow[]): Promise<void> {
    if (rows.length === 0) return;
    const tx = this.#redis.multi();
    for (const r of rows) {
      const hash = `${this.#prefix}usage:h:${r.hour}`;
      for (const f of FIGURES) if (r[f] !== 0) tx.hincrbyfloat(hash, `${r.key}\t${r.model}\t${f}`, r[f]);
      tx.pexpireat(hash, r.hour + KEEP_MS);
      tx.zadd(`${this.#prefix}usage:hours`, r.hour, String(r.hour));
    }
    tx.zremrangebyscore(`${this.#prefix}usage:hours`, "-inf", Date.now() - KEEP_MS);
    const results = await tx.exec();
    const failed = results?.find(([err]) => err);
    if (failed) throw failed[0];
  }

  async query(from: number, to: number): Promise<UsageRow[]> {
    const hours = await this.#redis.zrangebyscore(`${this.#prefix}usage:hours`, from, `(${to}`);
    if (hours.length === 0) return [];
    const read = this.#redis.pipeline();
    for (const h of hours) read.hgetall(`${this.#prefix}usage:h:${h}`);
    const hashes = (await read.exec()) ?? [];
    const out: UsageRow[] = [];
    hashes.forEach(([err, value], i) => {
      if (err) throw err;
      const hour = Number(hours[i]);
      const byName = new Map<string, UsageRow>();
      for (const [field, n] of Object.entries(value as Record<string, string>)) {
        const [key, model, figure] = field.split("\t") as [string, string, keyof UsageFigures];
        const id = `${key}\t${model}`;
        let row = byName.get(id);
        if (!row) {
          row = { hour, key, model, ...zeroFigures() };
          byName.set(id, row);
        }
        if (FIGURES.includes(figure)) row[figure] = Number(n);
      }
      out.push(...[...byName.values()].sort((a, b) => (a.key + a.model < b.key + b.model ? -1 : 1)));
    });
    return out;
  }

  async close(): Promise<void> {}
}
