// Debian's nginx with deploy/nginx/modelport.conf in front of a real `modelport serve`: a job's
// Server-Sent Events arrive as they happen (not buffered until the stream ends) and a large
// binary tensor goes through both ways intact. The shipped config is used as it is, with only
// the addresses, ports and log path replaced for the test. Needs the nginx binary (.ci/run
// installs it); skipped with a reason where it is absent.
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  type ChildServer,
  freePort,
  REPO_ROOT,
  startReadyChild,
  stopStartedChildren,
} from "../helpers/server.js";

const NGINX = ["/usr/sbin/nginx", "/usr/bin/nginx"].find((p) => existsSync(p));
const HANDLER = join(REPO_ROOT, "dist", "examples", "handlers", "latency-handler.js");

let modelport: ChildServer;
let nginx: ChildProcess | undefined;
let front: string;
let dir: string;

/** deploy/nginx/modelport.conf with the upstream, listen address and access log pointed at the test's. */
function siteConfig(upstream: string, port: number): string {
  const site = readFileSync(join(REPO_ROOT, "deploy", "nginx", "modelport.conf"), "utf8");
  const replaced = site
    .replace(/server 127\.0\.0\.1:8080/, `server ${upstream}`)
    .replace(/listen 80;/, `listen 127.0.0.1:${port};`)
    .replace(/listen \[::\]:80;\n/, "")
    .replace(/access_log \S+ combined;/, `access_log ${join(dir, "access.log")} combined;`);
  assert.notEqual(replaced, site);
  assert.ok(replaced.includes(`server ${upstream}`) && replaced.includes(`listen 127.0.0.1:${port};`));
  return replaced;
}

before(async () => {
  if (!NGINX) return;
  dir = mkdtempSync(join(tmpdir(), "modelport-nginx-"));
  const config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    `limits:
  maxBatchRows: 4000000
models:
  - name: double
    backend: custom
    path: ${HANDLER}
    options: { waitMs: 0 }
  - name: slow-call
    backend: custom
    path: ${HANDLER}
    options: { waitMs: 1500 }
`,
  );
  modelport = await startReadyChild(["-c", config]);
  const port = await freePort();
  writeFileSync(join(dir, "modelport.conf"), siteConfig(new URL(modelport.url).host, port));
  for (const d of ["body", "proxy", "fastcgi", "uwsgi", "scgi"]) mkdirSync(join(dir, d));
  writeFileSync(
    join(dir, "nginx.conf"),
    `${process.getuid?.() === 0 ? "user root;\n" : ""}daemon off;
worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "error.log")} warn;
events { worker_connections 256; }
http {
  # As an operator might: compress everything, event streams too. The SSE location must undo it.
  gzip on;
  gzip_types text/event-stream application/json;
  client_body_temp_path ${join(dir, "body")};
  proxy_temp_path ${join(dir, "proxy")};
  fastcgi_temp_path ${join(dir, "fastcgi")};
  uwsgi_temp_path ${join(dir, "uwsgi")};
  scgi_temp_path ${join(dir, "scgi")};
  include ${join(dir, "modelport.conf")};
}
`,
  );
  const check = spawnSync(NGINX, ["-t", "-p", dir, "-c", join(dir, "nginx.conf")], { encoding: "utf8" });
  assert.equal(check.status, 0, `nginx -t rejects the shipped config:\n${check.stderr}`);
  nginx = spawn(NGINX, ["-p", dir, "-c", join(dir, "nginx.conf")], { stdio: "ignore" });
  front = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    const ok = await fetch(`${front}/v1/models`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nginx did not come up:\n${readFileSync(join(dir, "error.log"), "utf8")}`);
});

after(async () => {
  nginx?.kill("SIGQUIT");
  await stopStartedChildren();
});

describe("nginx in front of modelport (deploy/nginx/modelport.conf)", {
  skip: NGINX ? false : "nginx is not installed (apt-get install nginx)",
}, () => {
  it("streams a job's Server-Sent Events as they happen", async () => {
    const submitted = await fetch(`${front}/v1/models/slow-call/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rows: [[1]] }),
    });
    assert.equal(submitted.status, 202);
    const { id } = (await submitted.json()) as { id: string };
    const t0 = performance.now();
    const res = await fetch(`${front}/v1/jobs/${id}/events`, {
      headers: { accept: "text/event-stream", "accept-encoding": "gzip" },
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
    // The job takes 1.5 s: the first event (its state now) must arrive long before the last.
    const arrivals: { at: number; text: string }[] = [];
    const decoder = new TextDecoder();
    for await (const chunk of res.body!) {
      arrivals.push({ at: performance.now() - t0, text: decoder.decode(chunk as Uint8Array) });
    }
    const all = arrivals.map((a) => a.text).join("");
    assert.match(all, /succeeded/);
    const first = arrivals[0]!.at;
    const last = arrivals.at(-1)!.at;
    assert.ok(
      last - first > 700,
      `events came together (first at ${first.toFixed(0)} ms, last at ${last.toFixed(0)} ms): nginx buffered the stream`,
    );
    assert.ok(!/succeeded/.test(arrivals[0]!.text), "the first chunk came before the job finished");
  });

  it("passes a 7.6 MiB binary tensor in and its 7.6 MiB result out, byte for byte", async () => {
    const rows = 2_000_000;
    const x = new Float32Array(rows).map((_, i) => (i % 1000) / 8);
    const res = await fetch(`${front}/v1/models/double/predict?outputs=y`, {
      method: "POST",
      headers: {
        "content-type": "application/octet-stream",
        accept: "application/octet-stream",
        "x-tensor-shape": `${rows},1`,
      },
      body: Buffer.from(x.buffer),
    });
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(res.headers.get("x-tensor-shape"), `${rows},1`);
    const y = new Float32Array(await res.arrayBuffer());
    assert.equal(y.length, rows);
    for (let i = 0; i < rows; i += 997) assert.equal(y[i], x[i]! * 2);
    assert.equal(y[rows - 1], x[rows - 1]! * 2);
  });

  it("refuses a body above client_max_body_size at nginx with 413", async () => {
    const res = await fetch(`${front}/v1/models/double/predict`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body: Buffer.alloc(10 * 1024 * 1024 + 4096),
    });
    assert.equal(res.status, 413);
  });
});
