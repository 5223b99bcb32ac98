// `jobs.redisUrl: rediss://...`: the Redis job store over TLS. The test starts its own
// redis-server listening only on a TLS port, with a self-signed certificate made by openssl, and
// a `modelport serve` child that trusts it through NODE_EXTRA_CA_CERTS; a job submitted to that
// server is stored, run and answered through the TLS connection (there is no plain port to use).
// Skipped, visibly and with the reason, where openssl or a TLS-capable redis-server is missing.
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type ChildServer, freePort, postJson, startChild, waitReady } from "../helpers/server.js";

let dir: string;
let redis: ChildProcess | undefined;
let redisOutput = "";
let tlsPort: number;
let skipReason: string | undefined;
let server: ChildServer | undefined;

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, "127.0.0.1", () => {
      s.destroy();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-rediss-"));
  const cert = spawnSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
    ],
    { encoding: "utf8" },
  );
  if (cert.error || cert.status !== 0) {
    skipReason = `openssl could not make a certificate: ${cert.error?.message ?? cert.stderr}`;
    return;
  }
  tlsPort = await freePort();
  redis = spawn(
    "redis-server",
    [
      "--port",
      "0",
      "--tls-port",
      String(tlsPort),
      "--bind",
      "127.0.0.1",
      "--tls-cert-file",
      join(dir, "cert.pem"),
      "--tls-key-file",
      join(dir, "key.pem"),
      "--tls-ca-cert-file",
      join(dir, "cert.pem"),
      "--tls-auth-clients",
      "no",
      "--save",
      "",
      "--appendonly",
      "no",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  redis.stdout!.on("data", (c) => (redisOutput += c));
  redis.stderr!.on("data", (c) => (redisOutput += c));
  const spawnError = new Promise<string>((resolve) => redis!.once("error", (e) => resolve(e.message)));
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (redis.exitCode !== null) break;
    if (await listening(tlsPort)) return;
    const failed = await Promise.race([spawnError, new Promise((r) => setTimeout(() => r(undefined), 100))]);
    if (failed) {
      skipReason = `redis-server could not start: ${failed}`;
      return;
    }
  }
  skipReason = `redis-server did not listen with TLS (built without TLS?): ${redisOutput.slice(-500)}`;
  redis.kill("SIGKILL");
  redis = undefined;
});

after(async () => {
  await server?.stop("SIGKILL");
  redis?.kill("SIGKILL");
});

describe("Redis job store over TLS (rediss://)", () => {
  it("a job is stored, run and answered through a rediss:// store", async (t) => {
    if (skipReason) return t.skip(skipReason);
    const models = await testModels();
    const config = join(dir, "modelport.yaml");
    writeFileSync(
      config,
      [
        "jobs:",
        "  store: redis",
        `  redisUrl: rediss://127.0.0.1:${tlsPort}`,
        `  redisPrefix: "modelport-test-rediss-${process.pid}:"`,
        "models:",
        `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}}`,
      ].join("\n"),
    );
    server = await startChild(["-c", config], { NODE_EXTRA_CA_CERTS: join(dir, "cert.pem") });
    const ready = await waitReady(server.url, 60_000);
    assert.equal(ready.status, 200, `${JSON.stringify(ready.body)}\n${server.output().slice(-2000)}`);

    const rows = [[3, 95, 4, 1, 0, 20]];
    const sub = await postJson(`${server.url}/v1/models/churn-tree/jobs`, { rows });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    let job: any;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      job = await (await fetch(`${server.url}/v1/jobs/${sub.body.id}?wait=5`)).json();
      if (["succeeded", "failed", "canceled"].includes(job.status)) break;
    }
    assert.equal(job.status, "succeeded", JSON.stringify(job));
    const result = (await (await fetch(`${server.url}/v1/jobs/${sub.body.id}/result`)).json()) as any;
    const sync = await postJson(`${server.url}/v1/models/churn-tree/predict`, { rows });
    assert.deepEqual(result.outputs, sync.body.outputs);
  });
});
