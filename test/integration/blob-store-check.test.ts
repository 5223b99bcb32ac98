// A blob store that cannot be used is found at start and by /readyz, with its own code
// (MP_ERR_BLOB_STORE_UNAVAILABLE), not when the first large job result fails to store: S3 blobs
// against a real S3-protocol server (s3rver, test/helpers/s3.ts) with a bucket that exists, one
// that does not, and an endpoint where nothing answers.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { BUCKET, CREDENTIALS, startS3, stopS3 } from "../helpers/s3.js";
import { freePort, type InProcessServer, postJson, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

let models: string;
let dir: string;
let endpoint: string;
const servers: InProcessServer[] = [];

before(async () => {
  // The S3 store reads the SDK's usual credential chain, as in production.
  process.env.AWS_ACCESS_KEY_ID = CREDENTIALS.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = CREDENTIALS.secretAccessKey;
  models = await testModels();
  dir = mkdtempSync(join(tmpdir(), "modelport-blob-check-"));
  ({ endpoint } = await startS3());
});

after(async () => {
  for (const s of servers) await s.close();
  await stopS3();
});

async function serve(name: string, bucket: string, at = endpoint): Promise<InProcessServer> {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    [
      "jobs:",
      `  sqlitePath: ${join(dir, `${name}.db`)}`,
      "  inlineResultMaxBytes: 1",
      `  blobs: {backend: s3, bucket: ${bucket}, endpoint: "${at}", forcePathStyle: true, region: us-east-1}`,
      "models:",
      `  - {name: tree, path: ${join(models, "churn-tree.onnx")}}`,
    ].join("\n"),
  );
  const s = await startInProcess({ file });
  servers.push(s);
  return s;
}

const readyz = async (s: InProcessServer) => {
  const res = await fetch(`${s.url}/readyz`);
  return { status: res.status, body: (await res.json()) as any };
};

describe("blob store check", () => {
  it("a bucket that exists: usable in /readyz, and a job's result goes there", async () => {
    const s = await serve("good", BUCKET);
    const r = await readyz(s);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.jobs.blobs, { backend: "s3", reachable: true });
    const job = await postJson(`${s.url}/v1/models/tree/jobs`, { rows: [[3, 95, 4, 1, 0, 20]] });
    assert.equal(job.status, 202);
    const done = (await (await fetch(`${s.url}/v1/jobs/${job.body.id}?wait=30`)).json()) as any;
    assert.equal(done.status, "succeeded", JSON.stringify(done));
    assert.equal(s.logs.filter((l) => l.code === "MP_ERR_BLOB_STORE_UNAVAILABLE").length, 0);
  });

  it("a bucket that does not exist: said at start and in /readyz with its code, before any job", async () => {
    const s = await serve("nobucket", "no-such-bucket");
    await until("the start-up check's log line", () =>
      s.logs.some((l) => l.code === "MP_ERR_BLOB_STORE_UNAVAILABLE"),
    );
    const line = s.logs.find((l) => l.code === "MP_ERR_BLOB_STORE_UNAVAILABLE")!;
    assert.equal(line.level, 50, "logged as an error");
    assert.match(
      String(line.msg),
      /s3:\/\/no-such-bucket .*the bucket does not exist; create it or fix jobs\.blobs\.bucket/,
    );
    const r = await readyz(s);
    // Reported, not required (as the job store): synchronous predicts do not need it.
    assert.equal(r.status, 200);
    assert.equal(r.body.jobs.blobs.reachable, false);
    assert.equal(r.body.jobs.blobs.backend, "s3");
    assert.equal(r.body.jobs.blobs.code, "MP_ERR_BLOB_STORE_UNAVAILABLE");
    assert.match(r.body.jobs.blobs.reason, /no-such-bucket.*does not exist/);
  });

  it("an endpoint where nothing answers: /readyz says so with the code", async () => {
    const s = await serve("noendpoint", BUCKET, `http://127.0.0.1:${await freePort()}`);
    const r = await readyz(s);
    assert.equal(r.body.jobs.blobs.reachable, false, JSON.stringify(r.body));
    assert.equal(r.body.jobs.blobs.code, "MP_ERR_BLOB_STORE_UNAVAILABLE");
    assert.match(r.body.jobs.blobs.reason, /no answer|within 2 s/);
  });
});
