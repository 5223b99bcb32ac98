// Both BlobStores through the conformance suite: the filesystem store in a temp folder, and the
// S3 store against a real S3-protocol server (s3rver) on 127.0.0.1 at a free port. Then what only
// S3 has: presigned URLs that a plain fetch can download, that stop working after their lifetime,
// and that fail once the object is deleted.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createBlobStore } from "../../src/storage/create-blob-store.js";
import { FsBlobStore } from "../../src/storage/fs-blob-store.js";
import { S3BlobStore } from "../../src/storage/s3-blob-store.js";
import { blobStoreConformance } from "../conformance/blob-store.conformance.js";
import { BUCKET, CREDENTIALS, startS3, stopS3 } from "../helpers/s3.js";

after(stopS3);

async function s3Store(prefix = "modelport/"): Promise<S3BlobStore> {
  const { endpoint } = await startS3();
  return new S3BlobStore({
    bucket: BUCKET,
    prefix,
    region: "us-east-1",
    endpoint,
    forcePathStyle: true,
    credentials: CREDENTIALS,
  });
}

blobStoreConformance("FsBlobStore", async () => {
  const dir = await mkdtemp(join(tmpdir(), "modelport-blobs-"));
  return {
    store: new FsBlobStore({ dir: join(dir, "not", "yet", "made") }),
    urls: false,
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

blobStoreConformance("S3BlobStore (s3rver)", async () => ({ store: await s3Store(), urls: true }));

describe("FsBlobStore", () => {
  it("creates its folder on first write and leaves no temp files", async () => {
    const dir = await mkdtemp(join(tmpdir(), "modelport-blobs-"));
    try {
      const root = join(dir, "blobs");
      const store = new FsBlobStore({ dir: root });
      assert.equal(await store.get("a"), undefined, "reading before any write is fine");
      await store.put("results/job-1.json", Buffer.from("{}"), "application/json");
      await store.put("results/job-1.json", Buffer.from("[]"), "application/json");
      const files = await readdir(join(root, "results"));
      assert.deepEqual(files.sort(), ["job-1.json~blob", "job-1.json~meta"]);
      assert.equal(await store.url("results/job-1.json", 60), undefined);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("S3BlobStore", () => {
  it("keeps keys under its prefix", async () => {
    const a = await s3Store("tenant-a/");
    const b = await s3Store("tenant-b/");
    await a.put("same/key", Buffer.from("A"), "text/plain");
    assert.equal(await b.get("same/key"), undefined);
    await b.put("same/key", Buffer.from("B"), "text/plain");
    assert.equal((await a.get("same/key"))?.data.toString(), "A");
    assert.equal((await b.get("same/key"))?.data.toString(), "B");
    await a.close();
    await b.close();
  });

  it("presigns a GET that a plain fetch downloads, with its content type", async () => {
    const store = await s3Store();
    const data = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 7) % 256));
    await store.put("presign/ok.bin", data, "application/x-modelport-test");
    const url = await store.url("presign/ok.bin", 60);
    assert.ok(url, "S3 returns a URL");
    assert.match(url, /X-Amz-Signature=/);
    const res = await fetch(url);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/x-modelport-test");
    assert.deepEqual(Buffer.from(await res.arrayBuffer()), data);
    await store.close();
  });

  it("a presigned URL stops working after its lifetime", async () => {
    const store = await s3Store();
    await store.put("presign/short.txt", Buffer.from("soon gone"), "text/plain");
    const url = await store.url("presign/short.txt", 1);
    assert.ok(url);
    const early = await fetch(url);
    assert.equal(early.status, 200);
    assert.equal(await early.text(), "soon gone");
    // X-Amz-Date has whole seconds: wait past the lifetime plus that rounding.
    await new Promise((r) => setTimeout(r, 2200));
    const late = await fetch(url);
    assert.equal(late.status, 403);
    assert.match(await late.text(), /expired/i);
    await store.close();
  });

  it("a presigned URL for a deleted object fails", async () => {
    const store = await s3Store();
    await store.put("presign/deleted.txt", Buffer.from("x"), "text/plain");
    const url = await store.url("presign/deleted.txt", 60);
    assert.ok(url);
    const first = await fetch(url);
    assert.equal(first.status, 200);
    await first.arrayBuffer();
    await store.delete("presign/deleted.txt");
    const res = await fetch(url);
    assert.equal(res.status, 404);
    await res.body?.cancel();
    await store.close();
  });

  it("refuses presigned lifetimes S3 cannot sign", async () => {
    const store = await s3Store();
    await assert.rejects(store.url("k", 0), /lifetime/);
    await assert.rejects(store.url("k", 8 * 24 * 3600), /lifetime/);
    await assert.rejects(store.url("k", 1.5), /lifetime/);
    await store.close();
  });

  it("reports a missing bucket as an error, not as an absent key", async () => {
    const { endpoint } = await startS3();
    const store = new S3BlobStore({
      bucket: "no-such-bucket",
      endpoint,
      forcePathStyle: true,
      credentials: CREDENTIALS,
    });
    await assert.rejects(store.get("k"), /NoSuchBucket/);
    await assert.rejects(store.put("k", Buffer.from("x"), "text/plain"), /NoSuchBucket/);
    await store.close();
  });

  it("uses the credentials it is given (an unknown access key is refused)", async () => {
    const { endpoint } = await startS3();
    const store = new S3BlobStore({
      bucket: BUCKET,
      endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: "NOT-A-KEY", secretAccessKey: "nope" },
    });
    await assert.rejects(store.put("k", Buffer.from("x"), "text/plain"), /InvalidAccessKeyId/);
    await store.close();
  });

  it("refuses use after close", async () => {
    const store = await s3Store();
    await store.put("closed/k", Buffer.from("x"), "text/plain");
    await store.close();
    await assert.rejects(store.get("closed/k"), /closed/);
  });
});

describe("createBlobStore", () => {
  it("fs: a relative dir resolves against cwd", async () => {
    const dir = await mkdtemp(join(tmpdir(), "modelport-blobs-"));
    try {
      const store = createBlobStore({ backend: "fs", dir: "rel/blobs" }, dir);
      assert.ok(store instanceof FsBlobStore);
      assert.equal(store.root, join(dir, "rel", "blobs"));
      await store.put("k", Buffer.from("v"), "text/plain");
      assert.deepEqual(await readdir(join(dir, "rel", "blobs")), ["k~blob", "k~meta"].sort());
      await store.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("s3: the configured bucket, prefix and endpoint", async () => {
    const { endpoint } = await startS3();
    const store = createBlobStore(
      {
        backend: "s3",
        bucket: BUCKET,
        prefix: "from-config/",
        region: "us-east-1",
        endpoint,
        forcePathStyle: true,
        urlTtlSeconds: 3600,
      },
      "/",
      { credentials: CREDENTIALS },
    );
    assert.ok(store instanceof S3BlobStore);
    await store.put("k", Buffer.from("v"), "text/plain");
    const url = await store.url("k", 3600);
    assert.ok(url?.includes(`/${BUCKET}/from-config/k?`), url);
    assert.equal(await (await fetch(url!)).text(), "v");
    await store.close();
  });

  it("s3: credentials come from the SDK's chain (AWS_* env) when none are given", async () => {
    const { endpoint } = await startS3();
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = CREDENTIALS.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = CREDENTIALS.secretAccessKey;
    try {
      const store = createBlobStore(
        {
          backend: "s3",
          bucket: BUCKET,
          prefix: "env/",
          region: "us-east-1",
          endpoint,
          forcePathStyle: true,
          urlTtlSeconds: 60,
        },
        "/",
      );
      await store.put("k", Buffer.from("from env"), "text/plain");
      assert.equal((await store.get("k"))?.data.toString(), "from env");
      await store.close();
    } finally {
      restoreEnv("AWS_ACCESS_KEY_ID", saved.id);
      restoreEnv("AWS_SECRET_ACCESS_KEY", saved.secret);
    }
  });
});

function restoreEnv(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}
