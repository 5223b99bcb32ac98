// Durable usage per key: requests, rows, tokens, compute and dollars by hour, key name and model,
// in the job store's database (SQLite here, Redis in redis-usage-store.ts), so
// GET /v1/usage and `modelport cost --by key` answer for any period, across restarts. Both
// stores run test/conformance/usage-store.conformance.ts.
//
// What the contract leaves out: anything finer than an hour (periods round to whole hours), and
// usage a process held in memory when it died without flushing (at most one flush interval).
import type Database from "better-sqlite3";
import { ensurePrivateFile } from "../private-files.js";
import { openSqlite } from "../sqlite.js";

/** Figures that add up. */
export interface UsageFigures {
  requests: number;
  rows: number;
  promptTokens: number;
  completionTokens: number;
  computeMs: number;
  dollars: number;
}

/** One hour of one key on one model. */
export interface UsageRow extends UsageFigures {
  /** The hour's start, ms since epoch (a multiple of HOUR_MS). */
  hour: number;
  key: string;
  model: string;
}

export const HOUR_MS = 3_600_000;
export const FIGURES: readonly (keyof UsageFigures)[] = [
  "requests",
  "rows",
  "promptTokens",
  "completionTokens",
  "computeMs",
  "dollars",
];

export const zeroFigures = (): UsageFigures => ({
  requests: 0,
  rows: 0,
  promptTokens: 0,
  completionTokens: 0,
  computeMs: 0,
  dollars: 0,
});

export interface UsageStore {
  /** Adds each row's figures to what is stored for its hour, key and model. */
  add(rows: readonly UsageRow[]): Promise<void>;
  /** Every stored row whose hour is in [from, to). */
  query(from: number, to: number): Promise<UsageRow[]>;
  close(): Promise<void>;
}

export type UsageGroup = "key" | "model" | "hour" | "day";

/**
 * Sums `rows` by the `groupBy` fields (none: one total), in time order then by name. Day and hour
 * groups are ISO times of their start (UTC).
 */
export function groupUsage(
  rows: readonly UsageRow[],
  groupBy: readonly UsageGroup[],
): (UsageFigures & Record<string, unknown>)[] {
  const groups = new Map<string, UsageFigures & Record<string, unknown>>();
  for (const r of rows) {
    const label: Record<string, unknown> = {};
    for (const g of groupBy) {
      if (g === "key") label.key = r.key;
      else if (g === "model") label.model = r.model;
      else if (g === "hour") label.hour = new Date(r.hour).toISOString();
      else label.day = new Date(r.hour - (r.hour % (24 * HOUR_MS))).toISOString().slice(0, 10);
    }
    const id = JSON.stringify(label);
    let sum = groups.get(id);
    if (!sum) {
      sum = { ...label, ...zeroFigures() };
      groups.set(id, sum);
    }
    for (const f of FIGURES) sum[f] += r[f];
  }
  return [...groups.values()].sort((a, b) => {
    for (const g of ["day", "hour", "key", "model"]) {
      const x = String(a[g] ?? "");
      const y = String(b[g] ?? "");
      if (x !== y) return x < y ? -1 : 1;
    }
    return 0;
  });
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS usage (
  hour INTEGER NOT NULL,
  key TEXT NOT NULL,
  model TEXT NOT NULL,
  requests INTEGER NOT NULL,
  rows INTEGER NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  compute_ms REAL NOT NULL,
  dollars REAL NOT NULL,
  PRIMARY KEY (hour, key, model)
) WITHOUT ROWID;`;

const UPSERT = `INSERT INTO usage (hour, key, model, requests, rows, prompt_tokens, completion_tokens, compute_ms, dollars)
  VALUES (@hour, @key, @model, @requests, @rows, @promptTokens, @completionTokens, @computeMs, @dollars)
  ON CONFLICT (hour, key, model) DO UPDATE SET requests = requests + excluded.requests,
  rows = rows + excluded.rows, prompt_tokens = prompt_tokens + excluded.prompt_tokens,
  completion_tokens = completion_tokens + excluded.completion_tokens,
  compute_ms = compute_ms + excluded.compute_ms, dollars = dollars + excluded.dollars`;

/** Usage in a table of the job store's SQLite file (its own connection; WAL lets both write). */
export class SqliteUsageStore implements UsageStore {
  readonly #db: Database.Database;

  constructor(path: string) {
    // Owner-only, as the job store whose file it shares (private-files.ts): usage says who used what.
    if (path !== ":memory:" && !path.startsWith("file:")) ensurePrivateFile(path);
    // A short busy wait: a flush that finds the file locked fails and is tried again next time.
    this.#db = openSqlite(path, { timeout: 200 });
    this.#db.pragma("journal_mode = WAL");
    this.#db.exec(SCHEMA);
  }

  async add(rows: readonly UsageRow[]): Promise<void> {
    const upsert = this.#db.prepare(UPSERT);
    this.#db.transaction(() => {
      for (const r of rows) upsert.run(r);
    })();
  }

  async query(from: number, to: number): Promise<UsageRow[]> {
    return this.#db
      .prepare(
        `SELECT hour, key, model, requests, rows, prompt_tokens AS promptTokens, completion_tokens AS completionTokens,
          compute_ms AS computeMs, dollars FROM usage WHERE hour >= ? AND hour < ? ORDER BY hour, key, model`,
      )
      .all(from, to) as UsageRow[];
  }

  async close(): Promise<void> {
    this.#db.close();
  }
}
