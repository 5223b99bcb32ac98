// Limits that hold across processes: two API servers sharing one Redis (jobs.store redis) and one
// key file, two keys with different requests-per-second limits under concurrent load spread
// over both servers. Each key gets what its own policy allows (burst + rate × elapsed, within
// 10%), whatever the other key does. Bounds are load-independent: a machine too busy to send
// that many requests simply sees all of them pass, and the lower bound leaves out the tokens a
// full bucket could not hold while the client sent nothing (a pause of a busy machine longer than
// burst ÷ rate), the time before the first answer (the bucket is full then and gains nothing, and a
// busy machine may take a while to serve the first requests) and the time after the last request
// was sent.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createKey } from "../../src/tenants/key-file.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";

const ROW = JSON.stringify({ rows: [[1, 2, 3, 1, 0, 4]] });
const POLICIES = { small: { rps: 20, burst: 10 }, large: { rps: 60, burst: 30 } };

let servers: InProcessServer[] = [];
const keys: Record<string, string> = {};

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelport-tenants-redis-"));
  const keysFile = join(dir, "keys.yaml");
  for (const [name, p] of Object.entries(POLICIES))
    keys[name] = createKey(keysFile, name, { limits: { requestsPerSecond: p.rps, burst: p.burst } }).key;
  const config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    [
      "server:",
      `  keys: ${keysFile}`,
      "jobs:",
      "  store: redis",
      `  redisPrefix: "mp-test-${randomUUID()}:"`,
      "models:",
      `  - {name: churn-tree, path: ${join(await testModels(), "churn-tree.onnx")}}`,
      "",
    ].join("\n"),
  );
  servers = [
    await startInProcess({ file: config, env: {} }),
    await startInProcess({ file: config, env: {} }),
  ];
});

after(async () => {
  for (const s of servers) await s.close();
});

/** Sends requests of `key` for `ms` from `workers` loops, alternating servers; counts the answers. */
async function load(key: string, ms: number, workers: number) {
  let sent = 0;
  let ok = 0;
  let limited = 0;
  const sentAt: number[] = [];
  let firstAnswerAt = Number.POSITIVE_INFINITY;
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (let i = w; performance.now() < end; i++) {
        sentAt.push(performance.now());
        const res = await fetch(`${servers[i % 2]!.url}/v1/models/churn-tree/predict`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
          body: ROW,
        });
        firstAnswerAt = Math.min(firstAnswerAt, performance.now());
        await res.arrayBuffer();
        sent++;
        if (res.status === 200) ok++;
        else if (res.status === 429) limited++;
        else assert.fail(`unexpected ${res.status}`);
      }
    }),
  );
  return { sent, ok, limited, seconds: (performance.now() - start) / 1000, sentAt, firstAnswerAt };
}

/**
 * The tokens the client could have used: the burst, the refill from the first answer (the bucket
 * was first drawn on no later) to the last request sent, less what overflowed a full bucket during
 * gaps in sending longer than burst ÷ rate.
 */
function usable(p: { rps: number; burst: number }, firstAnswerAt: number, sentAt: readonly number[]): number {
  const fill = (p.burst / p.rps) * 1000;
  const points = [firstAnswerAt, ...sentAt.filter((t) => t > firstAnswerAt)];
  let overflow = 0;
  for (let i = 1; i < points.length; i++) overflow += Math.max(0, points[i]! - points[i - 1]! - fill);
  const spanMs = points[points.length - 1]! - firstAnswerAt;
  return p.burst + (p.rps * (spanMs - overflow)) / 1000;
}

describe("limits shared through Redis by two API processes", () => {
  it("each key gets burst + rate × time (±10%) across both processes, the other key unaffected", async () => {
    const [small, large] = await Promise.all([load(keys.small!, 3000, 6), load(keys.large!, 3000, 6)]);
    for (const [name, got] of [
      ["small", small],
      ["large", large],
    ] as const) {
      const p = POLICIES[name];
      const allowed = p.burst + p.rps * got.seconds;
      const floor = usable(p, got.firstAnswerAt, got.sentAt);
      const { sentAt, firstAnswerAt, ...counts } = got;
      const firstAnswerMs = (firstAnswerAt - sentAt[0]!).toFixed(0);
      const detail = `${name}: ${JSON.stringify(counts)}, first answer after ${firstAnswerMs} ms, policy allows ${allowed.toFixed(1)}, of which the client could use ${floor.toFixed(1)}`;
      assert.ok(got.ok <= allowed * 1.1, detail);
      assert.ok(got.ok >= Math.min(got.sent, floor * 0.9), detail);
    }
  });
});
