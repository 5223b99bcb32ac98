// Chaos: a webhook receiver that accepts TCP connections and never answers. Jobs with that
// callback_url must still succeed (the webhook is a notification, not part of the job), each
// delivery must time out per attempt and be retried exactly jobs.webhooks.maxAttempts times, the
// server must keep answering meanwhile, and every connection modelport opened must be closed by
// it (nothing piles up).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, it } from "node:test";
import { type InProcessServer, startInProcess } from "../helpers/server.js";
import { assertNothingLost, type Submission, submit, until, waitFinal, writeConfig } from "./chaos.js";

const JOBS = 20;
const ATTEMPTS = 3;
const dir = mkdtempSync(join(tmpdir(), "modelport-chaos-hook-"));
const sockets = new Set<Socket>();
let connections = 0;
let bytesReceived = 0;
// Accepts, reads, never writes a byte back.
const blackhole = createServer((socket) => {
  connections += 1;
  sockets.add(socket);
  socket.on("data", (chunk) => {
    bytesReceived += chunk.length;
  });
  socket.on("error", () => {});
  socket.on("close", () => sockets.delete(socket));
});
let server: InProcessServer | undefined;

after(async () => {
  await server?.close();
  for (const s of sockets) s.destroy();
  blackhole.close();
  rmSync(dir, { recursive: true, force: true });
});

it("a webhook target that never answers: jobs succeed, each delivery times out and is retried per policy, sockets are all closed", async (t) => {
  await new Promise<void>((r) => blackhole.listen(0, "127.0.0.1", r));
  const hook = `http://127.0.0.1:${(blackhole.address() as { port: number }).port}/hook`;
  const file = writeConfig(join(dir, "modelport.yaml"), {
    executionsLog: join(dir, "executions.log"),
    jobs: [
      `sqlitePath: ${join(dir, "jobs.db")}`,
      `blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "concurrency: 4",
      `webhooks: {timeoutMs: 1000, maxAttempts: ${ATTEMPTS}, allowPrivate: ["127.0.0.1"], secret: "chaos-secret-0123456789"}`,
    ],
  });
  server = await startInProcess({ file });

  const subs: Submission[] = [];
  for (let i = 0; i < JOBS; i++) subs.push(await submit(server.url, i, { callback_url: hook }));
  assert.deepEqual(
    subs.filter((s) => s.status !== 202),
    [],
    "every submission accepted",
  );

  // The jobs do not wait for their webhooks.
  await assertNothingLost(server.url, subs, 30_000);

  // While deliveries hang, the server answers.
  const probes: number[] = [];
  await until(async () => {
    const res = await fetch(`${server!.url}/livez`, { signal: AbortSignal.timeout(5000) });
    probes.push(res.status);
    return connections > 0;
  }, "the first delivery attempt reached the receiver");
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${server.url}/v1/jobs?limit=1`, { signal: AbortSignal.timeout(5000) });
    probes.push(res.status);
  }
  assert.ok(
    probes.every((s) => s === 200),
    `the server answered while deliveries hung: ${probes}`,
  );

  // Every delivery: exactly maxAttempts attempts, each one timed out.
  const final = await waitFinal(
    server.url,
    subs.map((s) => s.id!),
    60_000,
    (j) => (j.webhook?.attempts ?? 0) >= ATTEMPTS,
  );
  for (const s of subs) {
    const w = final.get(s.id!)?.webhook;
    assert.equal(w?.attempts, ATTEMPTS, `job ${s.input}: ${JSON.stringify(w)}`);
    assert.match(w?.last_error ?? "", /timed out after 1000 ms/);
    assert.equal(w?.delivered_at ?? undefined, undefined);
  }
  // No attempt beyond the policy, and every connection closed by modelport after its timeout.
  await until(() => sockets.size === 0, `all ${connections} connections closed (open: ${sockets.size})`);
  assert.equal(connections, JOBS * ATTEMPTS, "one connection per attempt, no more");
  assert.ok(bytesReceived > 0, "requests were sent");
  t.diagnostic(
    `${connections} connections, all closed; ${bytesReceived} bytes received; webhooks gave up after ${ATTEMPTS} timed-out attempts`,
  );
  const after = await fetch(`${server.url}/v1/jobs/${subs[0]!.id}`);
  assert.equal(after.status, 200);
});
