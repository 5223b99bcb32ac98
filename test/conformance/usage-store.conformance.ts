// The contract every UsageStore keeps (src/tenants/usage-store.ts), as one suite any store can be
// run through, a fresh empty store per test: rows added come back from query; figures of the same
// hour, key and model add up (within one add and across adds); query returns exactly the rows whose
// hour is in [from, to), so other hours are left out; zero figures are fine; fractional dollars and
// compute time survive (within 1e-9), and so do large token counts.
//
// The order of query's rows is not part of the contract, so rows are compared sorted. Hours are
// recent ones (the last few days): a store may drop usage older than it keeps (Redis: 400 days).
//
//   usageStoreConformance("sqlite", async () => ({ store: new SqliteUsageStore(file), close: ... }));
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import {
  FIGURES,
  HOUR_MS,
  type UsageFigures,
  type UsageRow,
  type UsageStore,
  zeroFigures,
} from "../../src/tenants/usage-store.js";

export interface UsageStoreFixture {
  store: UsageStore;
  /** Frees what the fixture made (files, connections); the suite closes the store first. */
  close(): Promise<void>;
}

/** The start of an hour two days ago: recent, and with room on both sides. */
const H0 = Math.floor(Date.now() / HOUR_MS) * HOUR_MS - 48 * HOUR_MS;

export function usageRow(
  hour: number,
  key: string,
  model: string,
  figures: Partial<UsageFigures> = {},
): UsageRow {
  return { hour, key, model, ...zeroFigures(), ...figures };
}

const byName = (a: UsageRow, b: UsageRow) =>
  a.hour - b.hour ||
  (a.key < b.key ? -1 : a.key > b.key ? 1 : a.model < b.model ? -1 : a.model > b.model ? 1 : 0);

/** Asserts `got` holds the rows of `want`, in any order, figures equal within 1e-9. */
function assertRows(got: UsageRow[], want: UsageRow[], message = "rows"): void {
  const g = [...got].sort(byName);
  const w = [...want].sort(byName);
  assert.deepEqual(
    g.map((r) => `${r.hour} ${r.key} ${r.model}`),
    w.map((r) => `${r.hour} ${r.key} ${r.model}`),
    `${message}: which rows`,
  );
  g.forEach((row, i) => {
    const expected = w[i]!;
    for (const f of FIGURES) {
      assert.equal(typeof row[f], "number", `${message}: ${row.key}/${row.model} ${f} is a number`);
      assert.ok(
        Math.abs(row[f] - expected[f]) <= 1e-9,
        `${message}: ${row.key}/${row.model} ${f} is ${row[f]}, expected ${expected[f]}`,
      );
    }
  });
}

/** Registers the conformance suite; `make` builds a fresh, empty store for each test. */
export function usageStoreConformance(name: string, make: () => Promise<UsageStoreFixture>): void {
  describe(`UsageStore conformance: ${name}`, () => {
    let fixture: UsageStoreFixture;
    let store: UsageStore;

    beforeEach(async () => {
      fixture = await make();
      store = fixture.store;
    });
    afterEach(async () => {
      await store?.close();
      await fixture?.close();
    });

    it("a new store has no usage", async () => {
      assert.deepEqual(await store.query(0, H0 + 1000 * HOUR_MS), []);
    });

    it("rows added come back from query", async () => {
      const rows = [
        usageRow(H0, "alice", "iris", {
          requests: 3,
          rows: 7,
          promptTokens: 0,
          completionTokens: 0,
          computeMs: 12,
          dollars: 1,
        }),
        usageRow(H0, "bob", "iris", { requests: 1, rows: 1, computeMs: 4, dollars: 2 }),
        usageRow(H0, "alice", "chat", { requests: 2, promptTokens: 120, completionTokens: 30, dollars: 3 }),
        usageRow(H0 + HOUR_MS, "alice", "iris", { requests: 5, rows: 5, computeMs: 9, dollars: 4 }),
      ];
      await store.add(rows);
      assertRows(await store.query(H0, H0 + 2 * HOUR_MS), rows);
      for (const row of await store.query(H0, H0 + 2 * HOUR_MS)) {
        assert.equal(row.hour % HOUR_MS, 0, "hours are whole hours");
      }
    });

    it("figures of the same hour, key and model add up, within one add and across adds", async () => {
      await store.add([
        usageRow(H0, "alice", "iris", { requests: 1, rows: 2, promptTokens: 3, completionTokens: 4 }),
        usageRow(H0, "alice", "iris", { requests: 10, rows: 20, promptTokens: 30, completionTokens: 40 }),
      ]);
      await store.add([
        usageRow(H0, "alice", "iris", { requests: 100, rows: 200, computeMs: 5, dollars: 6 }),
        usageRow(H0, "alice", "other-model", { requests: 1 }),
      ]);
      await store.add([usageRow(H0, "alice", "iris", { requests: 1000, computeMs: 50, dollars: 60 })]);
      assertRows(await store.query(H0, H0 + HOUR_MS), [
        usageRow(H0, "alice", "iris", {
          requests: 1111,
          rows: 222,
          promptTokens: 33,
          completionTokens: 44,
          computeMs: 55,
          dollars: 66,
        }),
        usageRow(H0, "alice", "other-model", { requests: 1 }),
      ]);
    });

    it("query returns exactly the rows whose hour is in [from, to)", async () => {
      const at = (h: number) => usageRow(H0 + h * HOUR_MS, "k", "m", { requests: h + 10 });
      await store.add([at(-1), at(0), at(1), at(2), at(3)]);
      const hours = async (from: number, to: number) =>
        (await store.query(from, to)).map((r) => (r.hour - H0) / HOUR_MS).sort((a, b) => a - b);
      assert.deepEqual(await hours(H0, H0 + 3 * HOUR_MS), [0, 1, 2], "from included, to excluded");
      assert.deepEqual(await hours(H0 + HOUR_MS, H0 + 2 * HOUR_MS), [1], "one hour");
      assert.deepEqual(await hours(H0 + HOUR_MS, H0 + HOUR_MS), [], "an empty period");
      assert.deepEqual(await hours(H0 + 2 * HOUR_MS, H0 + HOUR_MS), [], "a reversed period");
      // Bounds inside an hour: that hour's start is before `from`, so it is out; `to` inside the
      // next hour takes in that hour, whose start is before it.
      assert.deepEqual(await hours(H0 + 1, H0 + HOUR_MS + 1), [1], "bounds inside hours");
      assert.deepEqual(await hours(H0 - 1, H0 + HOUR_MS - 1), [0], "bounds just before hours");
      assert.deepEqual(await hours(0, H0 + 100 * HOUR_MS), [-1, 0, 1, 2, 3], "everything");
      assert.deepEqual(await hours(H0 + 4 * HOUR_MS, H0 + 100 * HOUR_MS), [], "after it all");
      assertRows(await store.query(H0 + 3 * HOUR_MS, H0 + 4 * HOUR_MS), [at(3)], "the last hour's figures");
    });

    it("zero figures are fine", async () => {
      await store.add([]);
      assert.deepEqual(await store.query(0, H0 + 100 * HOUR_MS), [], "an empty add adds nothing");
      const some = usageRow(H0, "alice", "iris", { requests: 1, dollars: 0.5 });
      await store.add([some]);
      // Adding nothing to a row leaves it as it was.
      await store.add([usageRow(H0, "alice", "iris")]);
      assertRows(await store.query(H0, H0 + HOUR_MS), [some], "a row with some figures zero");
      // A row of nothing but zeros may be listed (with zeros) or left out: it adds nothing either way.
      await store.add([usageRow(H0 + HOUR_MS, "zero", "iris")]);
      const zeros = await store.query(H0 + HOUR_MS, H0 + 2 * HOUR_MS);
      assert.ok(zeros.length <= 1, `at most the one row: ${JSON.stringify(zeros)}`);
      for (const row of zeros) assertRows([row], [usageRow(H0 + HOUR_MS, "zero", "iris")], "an all-zero row");
    });

    it("fractional dollars and compute time are kept; large counts too", async () => {
      await store.add([
        usageRow(H0, "alice", "chat", { requests: 1, computeMs: 0.1, dollars: 0.000_001_5 }),
        usageRow(H0, "alice", "chat", { requests: 1, computeMs: 0.2, dollars: 0.000_000_7 }),
        usageRow(H0, "bob", "chat", { computeMs: 1234.5678, dollars: 0.1 }),
        usageRow(H0, "carol", "chat", { promptTokens: 2 ** 40, completionTokens: 3e12 }),
      ]);
      await store.add([usageRow(H0, "bob", "chat", { computeMs: 0.0001, dollars: 0.2 })]);
      assertRows(await store.query(H0, H0 + HOUR_MS), [
        usageRow(H0, "alice", "chat", { requests: 2, computeMs: 0.3, dollars: 0.000_002_2 }),
        usageRow(H0, "bob", "chat", { computeMs: 1234.5679, dollars: 0.3 }),
        usageRow(H0, "carol", "chat", { promptTokens: 2 ** 40, completionTokens: 3e12 }),
      ]);
    });

    it("keys and models with dots, dashes, slashes and colons keep their names", async () => {
      const rows = [
        usageRow(H0, "team-a.prod_1", "org/model:v2", { requests: 1 }),
        usageRow(H0, "team-a", "org/model:v2", { requests: 2 }),
        usageRow(H0, "team-a.prod_1", "org/model", { requests: 3 }),
      ];
      await store.add(rows);
      assertRows(await store.query(H0, H0 + HOUR_MS), rows);
    });
  });
}
