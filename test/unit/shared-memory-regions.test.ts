// The shared memory registry on its own, over files in a temporary folder: registrations racing for
// one name or for the last free slot, reads and writes bounded by their region, a region whose
// file closes only once the reads using it are done, and the table of objects bound to keys,
// which holds only objects that still exist.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { ModelportError } from "../../src/errors.js";
import { SharedMemoryRegions } from "../../src/shared-memory/regions.js";

const dir = mkdtempSync(join(tmpdir(), "mp-shm-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, bytes: number[] | number): string {
  writeFileSync(join(dir, name), typeof bytes === "number" ? Buffer.alloc(bytes) : Buffer.from(bytes));
  return `/${name}`;
}

async function rejectsCode(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => err instanceof ModelportError && err.code === code);
}

describe("SharedMemoryRegions", () => {
  it("lets one of two registrations of a name racing each other through", async () => {
    const regions = new SharedMemoryRegions({ dir, keyPrefix: "", maxRegions: 8, maxRegionsPerKey: 8 });
    const key = file("race", 16);
    const results = await Promise.allSettled([
      regions.register("k", "r", key, 0, 8),
      regions.register("k", "r", key, 8, 8),
    ]);
    const refused = results.filter((r) => r.status === "rejected");
    assert.equal(refused.length, 1, "exactly one of the two is registered");
    assert.equal((refused[0]!.reason as ModelportError).code, "MP_ERR_SHARED_MEMORY_REGION_EXISTS");
    assert.equal(regions.status("k").length, 1);
    await regions.close();
  });

  it("counts registrations still opening their file against maxRegions", async () => {
    const regions = new SharedMemoryRegions({ dir, keyPrefix: "", maxRegions: 2, maxRegionsPerKey: 2 });
    const key = file("slots", 16);
    const results = await Promise.allSettled(
      ["a", "b", "c", "d"].map((name) => regions.register("k", name, key, 0, 16)),
    );
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 2);
    for (const r of results.filter((r) => r.status === "rejected"))
      assert.equal(
        ((r as PromiseRejectedResult).reason as ModelportError).code,
        "MP_ERR_SHARED_MEMORY_LIMIT",
      );
    assert.equal(regions.status("k").length, 2);
    await regions.close();
  });

  it("reads and writes within the region only, at the region's offset into its object", async () => {
    const regions = new SharedMemoryRegions({ dir, keyPrefix: "mp", maxRegions: 8, maxRegionsPerKey: 8 });
    const key = file("mp-bytes", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    await rejectsCode(regions.register("k", "x", file("other", 4), 0, 4), "MP_ERR_SHARED_MEMORY_KEY");
    await regions.register("k", "r", key, 2, 6);
    assert.deepEqual([...(await regions.read("k", "r", 1, 3, "t"))], [3, 4, 5]);
    await rejectsCode(regions.read("k", "r", 4, 3, "t"), "MP_ERR_SHARED_MEMORY_RANGE");
    await rejectsCode(regions.read("other-key", "r", 0, 1, "t"), "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND");
    await regions.write("k", "r", 4, 2, new Uint8Array([90, 91]), "t");
    await rejectsCode(
      regions.write("k", "r", 0, 2, new Uint8Array([1, 2, 3]), "t"),
      "MP_ERR_SHARED_MEMORY_RANGE",
    );
    await rejectsCode(regions.write("k", "r", 5, 2, new Uint8Array([1]), "t"), "MP_ERR_SHARED_MEMORY_RANGE");
    assert.deepEqual([...readFileSync(join(dir, "mp-bytes"))], [0, 1, 2, 3, 4, 5, 90, 91, 8, 9]);
    await regions.close();
  });

  it("finishes reads under way when their region is unregistered", async () => {
    const regions = new SharedMemoryRegions({ dir, keyPrefix: "", maxRegions: 8, maxRegionsPerKey: 8 });
    const size = 8 << 20;
    const key = file("large", size);
    await regions.register("k", "r", key, 0, size);
    const reads = Array.from({ length: 4 }, () => regions.read("k", "r", 0, size, "t"));
    await regions.unregister("k");
    for (const bytes of await Promise.all(reads)) assert.equal(bytes.length, size);
    await rejectsCode(regions.read("k", "r", 0, 1, "t"), "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND");
  });

  it("forgets the objects it bound once they are gone, so the table stays as small as what exists", async () => {
    const regions = new SharedMemoryRegions({ dir, keyPrefix: "bound-", maxRegions: 4, maxRegionsPerKey: 4 });
    const kept = file("bound-kept", 8);
    await regions.register("k", "kept", kept, 0, 8);
    await regions.unregister("k");
    // 100 objects registered once each, the region let go, then the object deleted: by the time of
    // the next registration, or the next sweep (when the table has doubled), each is forgotten.
    for (let i = 0; i < 100; i++) {
      const key = file(`bound-${i}`, 8);
      await regions.register(i % 2 ? "k" : "other", "r", key, 0, 8);
      // Half deleted while registered (forgotten as the region goes), half after.
      if (i % 4 === 0) rmSync(join(dir, `bound-${i}`));
      await regions.unregister(i % 2 ? "k" : "other");
      rmSync(join(dir, `bound-${i}`), { force: true });
      assert.ok(regions.bindings <= 2 * 4, `${regions.bindings} bindings after ${i + 1} objects`);
    }
    // The object that still exists is still bound to its key, and to no other.
    await rejectsCode(regions.register("other", "r", kept, 0, 8), "MP_ERR_SHARED_MEMORY_KEY");
    // Renamed, it is the same object under another name: still bound.
    renameSync(join(dir, "bound-kept"), join(dir, "bound-moved"));
    await rejectsCode(regions.register("other", "r", "/bound-moved", 0, 8), "MP_ERR_SHARED_MEMORY_KEY");
    await regions.register("k", "r", "/bound-moved", 0, 8);
    // A revoked key's objects serve no key, not even a new one of the same name.
    await regions.revoke("k");
    assert.deepEqual(regions.status("k"), []);
    await rejectsCode(regions.register("k", "r", "/bound-moved", 0, 8), "MP_ERR_SHARED_MEMORY_KEY");
    await regions.close();
  });

  it("fails a registration under way when its key is revoked, which binds nothing", async () => {
    const regions = new SharedMemoryRegions({ dir, keyPrefix: "", maxRegions: 4, maxRegionsPerKey: 4 });
    const key = file("revoked-midway", 8);
    // The registration is opening its file when the key goes.
    const registering = regions.register("k", "r", key, 0, 8);
    const revoked = regions.revoke("k");
    await rejectsCode(registering, "MP_ERR_AUTH_KEY_REVOKED");
    await revoked;
    assert.deepEqual(regions.status("k"), []);
    // Nothing was bound: another key may have the object.
    await regions.register("other", "r", key, 0, 8);
    assert.equal(regions.status("other").length, 1);
    await regions.close();
  });
});
