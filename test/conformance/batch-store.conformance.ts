// The contract every BatchStore keeps (src/batches/batch-store.ts), as one suite any store can be
// run through, a fresh empty store per test: files and batches come back as stored; lists are
// newest first, paged by `after` and `limit` with has_more, and per owner; updateBatch writes only
// while the status is the expected one; unfinishedBatches holds exactly the batches not final;
// requests come back by line, a line stored again replaced.
//
//   batchStoreConformance("sqlite", async () => ({ store: new SqliteBatchStore(file), close: ... }));
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import type { BatchRecord, BatchStore, FileRecord } from "../../src/batches/batch-store.js";

export interface BatchStoreFixture {
  store: BatchStore;
  /** Frees what the fixture made (files, connections); the suite closes the store first. */
  close(): Promise<void>;
}

const T0 = 1_700_000_000_000;

function file(
  id: string,
  createdAt: number,
  owner?: string,
  purpose: FileRecord["purpose"] = "batch",
): FileRecord {
  return {
    id,
    ...(owner !== undefined ? { owner } : {}),
    filename: `${id}.jsonl`,
    purpose,
    bytes: 10,
    createdAt,
    blobKey: `files/${id}.jsonl`,
  };
}

function batch(
  id: string,
  createdAt: number,
  owner?: string,
  status: BatchRecord["status"] = "in_progress",
): BatchRecord {
  return {
    id,
    ...(owner !== undefined ? { owner } : {}),
    endpoint: "/v1/chat/completions",
    inputFileId: "file-x",
    completionWindow: "24h",
    status,
    createdAt,
    expiresAt: createdAt + 86_400_000,
    requestCounts: { total: 3, completed: 0, failed: 0 },
    metadata: { k: "v" },
  };
}

export function batchStoreConformance(name: string, open: () => Promise<BatchStoreFixture>): void {
  describe(`BatchStore conformance: ${name}`, () => {
    let fixture: BatchStoreFixture;
    let store: BatchStore;
    beforeEach(async () => {
      fixture = await open();
      store = fixture.store;
    });
    afterEach(async () => {
      await store.close();
      await fixture.close();
    });

    it("keeps a file as stored, and deletes it once", async () => {
      const f = file("file-a", T0, "alice");
      await store.putFile(f);
      assert.deepEqual(await store.getFile("file-a"), f);
      assert.equal(await store.getFile("file-missing"), undefined);
      assert.equal(await store.deleteFile("file-a"), true);
      assert.equal(await store.deleteFile("file-a"), false);
      assert.equal(await store.getFile("file-a"), undefined);
      assert.deepEqual((await store.listFiles({ limit: 10 })).items, []);
    });

    it("lists files newest first, per owner and purpose, paged by after", async () => {
      await store.putFile(file("file-1", T0, "alice"));
      await store.putFile(file("file-2", T0 + 1, "bob"));
      await store.putFile(file("file-3", T0 + 2, "alice", "batch_output"));
      // The same time: ids break the tie.
      await store.putFile(file("file-4", T0 + 2, "alice"));
      const all = await store.listFiles({ limit: 10 });
      assert.deepEqual(
        all.items.map((f) => f.id),
        ["file-4", "file-3", "file-2", "file-1"],
      );
      assert.equal(all.hasMore, false);
      const alice = await store.listFiles({ owner: "alice", limit: 2 });
      assert.deepEqual(
        alice.items.map((f) => f.id),
        ["file-4", "file-3"],
      );
      assert.equal(alice.hasMore, true);
      const rest = await store.listFiles({ owner: "alice", limit: 2, after: "file-3" });
      assert.deepEqual(
        rest.items.map((f) => f.id),
        ["file-1"],
      );
      assert.equal(rest.hasMore, false);
      const outputs = await store.listFiles({ owner: "alice", purpose: "batch_output", limit: 10 });
      assert.deepEqual(
        outputs.items.map((f) => f.id),
        ["file-3"],
      );
      assert.deepEqual((await store.listFiles({ owner: "carol", limit: 10 })).items, []);
    });

    it("writes a batch only while its status is the expected one", async () => {
      const b = batch("batch_1", T0, "alice");
      await store.createBatch(b);
      assert.deepEqual(await store.getBatch("batch_1"), b);
      const counted = { ...b, requestCounts: { total: 3, completed: 1, failed: 0 } };
      assert.equal(await store.updateBatch(counted, "in_progress"), true);
      const cancelling = { ...counted, status: "cancelling" as const, cancellingAt: T0 + 5 };
      assert.equal(await store.updateBatch(cancelling, "in_progress"), true);
      // A second writer that still believes it in progress changes nothing.
      assert.equal(await store.updateBatch({ ...b, status: "finalizing" }, "in_progress"), false);
      assert.deepEqual(await store.getBatch("batch_1"), cancelling);
      assert.equal(await store.updateBatch(batch("batch_none", T0), "in_progress"), false);
      assert.equal(await store.getBatch("batch_none"), undefined);
    });

    it("holds in unfinishedBatches exactly the batches not final, oldest first", async () => {
      await store.createBatch(batch("batch_b", T0 + 1, "bob"));
      await store.createBatch(batch("batch_a", T0, "alice"));
      await store.createBatch(batch("batch_f", T0 + 2, "alice", "failed"));
      assert.deepEqual(
        (await store.unfinishedBatches()).map((b) => b.id),
        ["batch_a", "batch_b"],
      );
      const a = (await store.getBatch("batch_a"))!;
      assert.equal(
        await store.updateBatch({ ...a, status: "completed", completedAt: T0 + 9 }, "in_progress"),
        true,
      );
      assert.deepEqual(
        (await store.unfinishedBatches()).map((b) => b.id),
        ["batch_b"],
      );
      const b = (await store.getBatch("batch_b"))!;
      assert.equal(await store.updateBatch({ ...b, status: "cancelling" }, "in_progress"), true);
      assert.deepEqual(
        (await store.unfinishedBatches()).map((x) => x.id),
        ["batch_b"],
      );
    });

    it("lists batches newest first, per owner, paged by after", async () => {
      for (let i = 0; i < 5; i++)
        await store.createBatch(batch(`batch_${i}`, T0 + i, i % 2 ? "bob" : "alice"));
      const page = await store.listBatches({ owner: "alice", limit: 2 });
      assert.deepEqual(
        page.items.map((b) => b.id),
        ["batch_4", "batch_2"],
      );
      assert.equal(page.hasMore, true);
      const next = await store.listBatches({ owner: "alice", limit: 2, after: "batch_2" });
      assert.deepEqual(
        next.items.map((b) => b.id),
        ["batch_0"],
      );
      assert.equal(next.hasMore, false);
      assert.equal((await store.listBatches({ limit: 100 })).items.length, 5);
      // A cursor that is gone ends the list rather than starting it again.
      assert.deepEqual((await store.listBatches({ limit: 100, after: "batch_gone" })).items, []);
    });

    it("keeps a batch's requests by line, a line stored again replaced", async () => {
      assert.deepEqual(await store.requests("batch_r"), []);
      await store.putRequests("batch_r", [
        { line: 1, customId: "b", jobId: "j1" },
        { line: 0, customId: "a", jobId: "j0" },
      ]);
      await store.putRequests("batch_r", [
        { line: 2, customId: "c", error: { code: "MP_ERR_REQUEST_INVALID", message: "bad" } },
        { line: 1, customId: "b", jobId: "j1" },
      ]);
      await store.putRequests("batch_other", [{ line: 0, customId: "z", jobId: "jz" }]);
      assert.deepEqual(await store.requests("batch_r"), [
        { line: 0, customId: "a", jobId: "j0" },
        { line: 1, customId: "b", jobId: "j1" },
        { line: 2, customId: "c", error: { code: "MP_ERR_REQUEST_INVALID", message: "bad" } },
      ]);
    });
  });
}
