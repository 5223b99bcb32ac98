// The README's first jobs example, run as written against the bundled examples config: its
// receiver (the `node -e` line) gets the job's webhook when the job ends, because the example
// config allows a loopback receiver. Only the port is changed, to a free one.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stageExamples } from "../helpers/examples.js";
import { freePort, type InProcessServer, postJson, REPO_ROOT, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

let srv: InProcessServer;
let receiver: ChildProcess | undefined;
const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
const jobsSection = readme.slice(readme.indexOf("# Asynchronous jobs"));

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelport-readme-jobs-"));
  const file = await stageExamples(dir);
  srv = await startInProcess({ file }, { build: { cwd: dir } });
});

after(async () => {
  receiver?.kill();
  await srv?.close();
});

describe("README: the first jobs example", () => {
  it("its receiver gets the signed webhook of its job from a server on the example config", async () => {
    const receiverLine = /^node -e '(.+)' &$/m.exec(jobsSection)?.[1];
    assert.ok(receiverLine, "the README starts a webhook receiver before the first job");
    const submit =
      /jobs -H 'content-type: application\/json' \\\n\s+-H 'idempotency-key: ([^']+)' -d '([^']+)'/.exec(
        jobsSection,
      );
    assert.ok(submit, "the README's first job submission");
    const body = JSON.parse(submit[2]!) as { callback_url: string };
    const url = new URL(body.callback_url);
    assert.equal(url.hostname, "127.0.0.1", "a receiver on this machine, not a public URL nobody watches");
    assert.ok(
      receiverLine.includes(`listen(${url.port}, "127.0.0.1")`),
      "the receiver listens where the job calls",
    );

    const port = String(await freePort());
    let out = "";
    receiver = spawn(process.execPath, ["-e", receiverLine.replace(url.port, port)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    receiver.stdout!.on("data", (c) => (out += String(c)));
    await until("the receiver to listen", () =>
      fetch(`http://127.0.0.1:${port}/`, { method: "POST", body: "{}" }).then(
        (r) => r.ok,
        () => false,
      ),
    );

    const job = await postJson(
      `${srv.url}/v1/models/churn-tree/jobs`,
      { ...body, callback_url: body.callback_url.replace(`:${url.port}/`, `:${port}/`) },
      { "idempotency-key": submit[1]! },
    );
    assert.equal(job.status, 202, JSON.stringify(job.body));
    await until("the webhook at the README's receiver", () => out.includes(`"id":"${job.body.id}"`), 60_000);
    assert.match(out, /"event":"job\.finished"/);
    assert.match(out, /"status":"succeeded"/);
  });
});
