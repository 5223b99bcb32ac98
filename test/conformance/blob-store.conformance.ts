// The contract every BlobStore keeps (src/storage/blob-store.ts), as one suite any store can be
// run through: binary round trips with their content type, overwrite, absent keys, idempotent
// delete, the key rules, and objects of several megabytes.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { BlobStore } from "../../src/storage/blob-store.js";

export interface BlobStoreFixture {
  store: BlobStore;
  /**
   * Whether url() gives download links (S3: presigned GETs); a store without them (filesystem)
   * must answer undefined, and modelport serves the bytes itself.
   */
  urls: boolean;
  /** Frees what the fixture made (folders, servers); the suite closes the store first. */
  cleanup?: () => Promise<void>;
}

export const INVALID_BLOB_KEYS: readonly string[] = [
  "",
  "/abs/path",
  "..",
  "../escape",
  "a/../../escape",
  "a/./b",
  "a//b",
  "trailing/",
  "back\\slash",
  "with space",
  "tilde~",
  "ümlaut",
  "nul\u0000byte",
  "x".repeat(1025),
];

/** Registers the conformance suite for the store `make` builds (once, before the tests). */
export function blobStoreConformance(name: string, make: () => Promise<BlobStoreFixture>): void {
  describe(`BlobStore conformance: ${name}`, () => {
    let fixture: BlobStoreFixture;
    let store: BlobStore;
    // Each run writes under its own folder of keys, so a shared backend cannot leak between runs.
    const ns = `conf-${randomBytes(4).toString("hex")}`;

    before(async () => {
      fixture = await make();
      store = fixture.store;
    });
    after(async () => {
      await store?.close();
      await fixture?.cleanup?.();
    });

    it("check(): a usable store passes, before and after a write", async () => {
      await assert.doesNotReject(store.check());
      await store.put(`${ns}/checked`, Buffer.from("x"), "text/plain");
      await assert.doesNotReject(store.check());
    });

    it("round-trips binary data and its content type", async () => {
      const data = Buffer.from(Array.from({ length: 512 }, (_, i) => i % 256));
      await store.put(`${ns}/bin/every-byte.bin`, data, "application/octet-stream");
      await store.put(`${ns}/bin/doc.json`, Buffer.from('{"a":1}'), "application/json; charset=utf-8");
      const got = await store.get(`${ns}/bin/every-byte.bin`);
      assert.ok(got, "stored blob is found");
      assert.ok(Buffer.isBuffer(got.data), "data is a Buffer");
      assert.deepEqual(got.data, data);
      assert.equal(got.contentType, "application/octet-stream");
      const json = await store.get(`${ns}/bin/doc.json`);
      assert.equal(json?.data.toString("utf8"), '{"a":1}');
      assert.equal(json?.contentType, "application/json; charset=utf-8");
    });

    it("round-trips an empty blob", async () => {
      await store.put(`${ns}/empty`, Buffer.alloc(0), "text/plain");
      const got = await store.get(`${ns}/empty`);
      assert.ok(got);
      assert.equal(got.data.length, 0);
      assert.equal(got.contentType, "text/plain");
    });

    it("overwrites data and content type", async () => {
      const key = `${ns}/over/write.dat`;
      await store.put(key, Buffer.from("first version, longer than the second"), "text/plain");
      await store.put(key, Buffer.from([1, 2, 3]), "application/x-second");
      const got = await store.get(key);
      assert.deepEqual(got?.data, Buffer.from([1, 2, 3]));
      assert.equal(got?.contentType, "application/x-second");
    });

    it("answers undefined for a key never written", async () => {
      assert.equal(await store.get(`${ns}/never/written`), undefined);
      assert.equal(await store.get(`${ns}-other-prefix`), undefined);
    });

    it("keeps a key and a key below it apart ('a' and 'a/b')", async () => {
      await store.put(`${ns}/nest`, Buffer.from("parent"), "text/plain");
      await store.put(`${ns}/nest/child`, Buffer.from("child"), "text/plain");
      assert.equal((await store.get(`${ns}/nest`))?.data.toString(), "parent");
      assert.equal((await store.get(`${ns}/nest/child`))?.data.toString(), "child");
      await store.delete(`${ns}/nest`);
      assert.equal(await store.get(`${ns}/nest`), undefined);
      assert.equal((await store.get(`${ns}/nest/child`))?.data.toString(), "child");
    });

    it("deletes, and deleting is idempotent", async () => {
      const key = `${ns}/del/me`;
      await store.put(key, Buffer.from("bye"), "text/plain");
      await store.delete(key);
      assert.equal(await store.get(key), undefined);
      await store.delete(key);
      await store.delete(`${ns}/del/never-existed`);
      await store.delete(`${ns}/no/such/folder/either`);
      assert.equal(await store.get(key), undefined);
    });

    it("accepts every character the contract allows", async () => {
      const key = `${ns}/Az09/-_./x.y-z_W`;
      await store.put(key, Buffer.from("ok"), "text/plain");
      assert.equal((await store.get(key))?.data.toString(), "ok");
    });

    it("refuses invalid keys on every method", async () => {
      for (const key of INVALID_BLOB_KEYS) {
        const shown = JSON.stringify(key.slice(0, 40));
        await assert.rejects(store.put(key, Buffer.from("x"), "text/plain"), Error, `put ${shown}`);
        await assert.rejects(store.get(key), Error, `get ${shown}`);
        await assert.rejects(store.delete(key), Error, `delete ${shown}`);
        await assert.rejects(store.url(key, 60), Error, `url ${shown}`);
      }
    });

    it("stores a large object (5 MB) intact", async () => {
      const data = randomBytes(5 * 1024 * 1024 + 123);
      await store.put(`${ns}/large/blob.bin`, data, "application/octet-stream");
      const got = await store.get(`${ns}/large/blob.bin`);
      assert.equal(got?.data.length, data.length);
      assert.ok(got.data.equals(data), "large blob bytes match");
    });

    it("url() is a link that downloads the blob, or undefined for a store without links", async () => {
      const data = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 13) % 256));
      await store.put(`${ns}/url/x.bin`, data, "application/x-conformance");
      const url = await store.url(`${ns}/url/x.bin`, 60);
      if (!fixture.urls) {
        assert.equal(url, undefined);
        return;
      }
      assert.equal(typeof url, "string");
      const res = await fetch(url!);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-type"), "application/x-conformance");
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), data);
    });

    it("close() is idempotent", async () => {
      // Checked on a throwaway fixture, so the suite's store stays usable.
      const other = await make();
      await other.store.put(`${ns}/close/k`, Buffer.from("x"), "text/plain");
      await assert.doesNotReject(other.store.close());
      await assert.doesNotReject(other.store.close());
      await other.cleanup?.();
    });
  });
}
