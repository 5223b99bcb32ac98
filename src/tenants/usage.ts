// Usage per key as requests and jobs finish: counted at once in the metrics (by key name and
// model) and summed per hour in memory, flushed to the usage store every few seconds and on
// close. A store that cannot be written keeps the sums for the next flush (bounded: past
// MAX_PENDING hour-key-model rows the oldest are dropped and the drop is logged).
import type { Logger } from "pino";
import {
  FIGURES,
  groupUsage,
  HOUR_MS,
  type UsageFigures,
  type UsageGroup,
  type UsageRow,
  type UsageStore,
  zeroFigures,
} from "./usage-store.js";

/** What one request or job used; absent figures are 0. */
export type Usage = Partial<UsageFigures>;

/** The metric counters usage goes to (Metrics.keyUsage has this shape). */
export interface UsageCounters {
  requests: { inc(labels: { key: string; model: string }, v: number): void };
  rows: { inc(labels: { key: string; model: string }, v: number): void };
  tokens: { inc(labels: { key: string; model: string; kind: string }, v: number): void };
  computeSeconds: { inc(labels: { key: string; model: string }, v: number): void };
  dollars: { inc(labels: { key: string; model: string }, v: number): void };
}

const MAX_PENDING = 100_000;

export class UsageRecorder {
  #pending = new Map<string, UsageRow>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  readonly #store: () => UsageStore;
  #opened: UsageStore | undefined;

  /** `store` is opened on first use, so a server that records nothing creates no table. */
  constructor(
    store: () => UsageStore,
    private readonly counters: UsageCounters,
    private readonly log: Logger,
    private readonly clock: () => number = Date.now,
  ) {
    this.#store = store;
  }

  /** Adds one request's or job's usage for `key` on `model`. */
  record(key: string, model: string, usage: Usage): void {
    const labels = { key, model };
    const c = this.counters;
    c.requests.inc(labels, usage.requests ?? 1);
    if (usage.rows) c.rows.inc(labels, usage.rows);
    if (usage.promptTokens) c.tokens.inc({ ...labels, kind: "prompt" }, usage.promptTokens);
    if (usage.completionTokens) c.tokens.inc({ ...labels, kind: "completion" }, usage.completionTokens);
    if (usage.computeMs) c.computeSeconds.inc(labels, usage.computeMs / 1000);
    if (usage.dollars) c.dollars.inc(labels, usage.dollars);
    const now = this.clock();
    const hour = now - (now % HOUR_MS);
    const id = `${hour}\t${key}\t${model}`;
    let row = this.#pending.get(id);
    if (!row) {
      if (this.#pending.size >= MAX_PENDING) this.#dropOldest();
      row = { hour, key, model, ...zeroFigures() };
      this.#pending.set(id, row);
    }
    row.requests += usage.requests ?? 1;
    for (const f of FIGURES) if (f !== "requests") row[f] += usage[f] ?? 0;
  }

  /** Flushes every `intervalMs` until close(). */
  start(intervalMs = 5000): void {
    this.#timer ??= setInterval(() => void this.flush(), intervalMs);
    this.#timer.unref();
  }

  /** Writes the sums so far to the store; on failure they wait for the next flush. Never rejects. */
  flush(): Promise<void> {
    this.#flushing ??= (async () => {
      const rows = [...this.#pending.values()];
      if (rows.length === 0) return;
      this.#pending = new Map();
      try {
        await this.#storeNow().add(rows);
      } catch (err) {
        for (const r of rows) this.#merge(r);
        this.log.warn(
          `usage: could not write ${rows.length} rows to the usage store (kept for the next try): ${(err as Error).message}`,
        );
      }
    })().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  /** Usage in [from, to) by `groupBy` (of the key `only`, when given), this process's included. */
  async query(from: number, to: number, groupBy: readonly UsageGroup[], only?: string) {
    await this.flush();
    const rows = await this.#storeNow().query(from, to);
    return groupUsage(only === undefined ? rows : rows.filter((r) => r.key === only), groupBy);
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
    await this.#opened?.close();
  }

  #storeNow(): UsageStore {
    this.#opened ??= this.#store();
    return this.#opened;
  }

  #merge(r: UsageRow): void {
    const id = `${r.hour}\t${r.key}\t${r.model}`;
    const row = this.#pending.get(id);
    if (!row) {
      if (this.#pending.size >= MAX_PENDING) this.#dropOldest();
      this.#pending.set(id, r);
      return;
    }
    for (const f of FIGURES) row[f] += r[f];
  }

  #dropOldest(): void {
    const first = this.#pending.keys().next().value;
    if (first === undefined) return;
    this.#pending.delete(first);
    this.log.warn(
      "usage: the usage store has been unwritable for long; dropped the oldest unsaved hour of one key",
    );
  }
}
