// The API tier's routing, against real runner servers on loopback ports (in this process):
// least-loaded choice, a retry on another runner when one stops answering, that runner leaving
// the rotation at once and coming back when it answers again, a hung runner dropped by the
// health poll, a retryable 503 when no runner can answer, and dns+http:// expansion.
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { pino } from "pino";
import { loadConfig } from "../../src/config/load.js";
import { isModelportError } from "../../src/errors.js";
import { RunnerPool } from "../../src/runner/remote/runner-pool.js";
import { freePort, type InProcessServer, REPO_ROOT } from "../helpers/server.js";

const HANDLER = join(REPO_ROOT, "dist", "examples", "handlers", "latency-handler.js");
const quiet = pino({ level: "silent" });
const open: { close(): unknown }[] = [];

after(async () => {
  for (const o of open.reverse()) await o.close();
});

async function runner(waitMs: number, port = 0, maxQueueRows?: number): Promise<InProcessServer> {
  const config = loadConfig({
    modelPath: HANDLER,
    flags: { name: "latency", role: "runner", port, ...(maxQueueRows ? { maxQueueRows } : {}) },
  });
  // loadConfig's single-model path takes no options: set the wait through the frozen copy.
  const withWait = { ...config, models: [{ ...config.models[0]!, options: { waitMs } }] };
  const { buildApp } = await import("../../src/server/app.js");
  const server = buildApp(withWait, { logger: quiet });
  const url = await server.app.listen({ host: "127.0.0.1", port });
  await server.loadModels();
  const s = { url, server, logs: [], close: () => server.close() };
  open.push(s);
  return s;
}

function pool(runners: string[], runnerPollMs = 200): RunnerPool {
  const config = loadConfig({ modelPath: HANDLER, flags: { role: "api", runners } });
  const p = new RunnerPool({ ...config.server, runnerPollMs }, quiet);
  open.push(p);
  return p;
}

const x = (v: number) => ({ x: { datatype: "FP32" as const, shape: [1, 1], data: new Float32Array([v]) } });
const deadline = () => performance.now() + 10_000;

describe("RunnerPool", () => {
  it("scores through a runner with binary tensors, and spreads concurrent work least-loaded", async () => {
    const [a, b] = [await runner(150), await runner(150)];
    const p = pool([a.url, b.url]);
    await p.start();
    const out = await p.predict("latency", x(21), { deadline: deadline() });
    assert.deepEqual([...(out.outputs.y!.data as Float32Array)], [42]);
    assert.deepEqual(out.outputs.y!.shape, [1, 1]);
    const inFlight = Array.from({ length: 10 }, (_, i) =>
      p.predict("latency", x(i), { deadline: deadline() }),
    );
    assert.deepEqual(
      p.all().map((ep) => ep.inFlight),
      [5, 5],
    );
    const results = await Promise.all(inFlight);
    assert.deepEqual(
      results.map((r) => (r.outputs.y!.data as Float32Array)[0]),
      Array.from({ length: 10 }, (_, i) => 2 * i),
    );
  });

  it("retries once on another runner when one stops answering, drops it at once, takes it back when it returns", async () => {
    const port = await freePort();
    const a = await runner(0, port);
    const b = await runner(0);
    const p = pool([a.url, b.url], 60_000); // no poll during the test: only the failure removes it
    await p.start();
    await a.close();
    // Whichever runner is picked first, every request succeeds.
    for (let i = 0; i < 4; i++) {
      const out = await p.predict("latency", x(i), { deadline: deadline() });
      assert.equal((out.outputs.y!.data as Float32Array)[0], 2 * i);
    }
    const down = p.all().find((ep) => ep.url === a.url)!;
    assert.equal(down.healthy, false);
    assert.match(down.reason, /ECONNREFUSED|socket|closed|reset/i);
    // Back on its port, it rejoins at the next poll.
    await runner(0, port);
    await p.pollAll();
    assert.equal(p.all().find((ep) => ep.url === a.url)!.healthy, true);
  });

  it("answers 503 MP_ERR_RUNNER_UNAVAILABLE (retryable, Retry-After) when no runner can answer", async () => {
    const p = pool([`http://127.0.0.1:${await freePort()}`]);
    await p.start();
    await assert.rejects(p.predict("latency", x(1), { deadline: deadline() }), (err: unknown) => {
      assert.ok(isModelportError(err));
      assert.equal(err.code, "MP_ERR_RUNNER_UNAVAILABLE");
      assert.equal(err.status, 503);
      assert.equal(err.retryable, true);
      assert.match(err.message, /no runner serving it is ready/);
      assert.ok((err.details?.retryAfterSeconds as number) >= 1);
      return true;
    });
  });

  it("passes on the only runner's overload answer, with its Retry-After estimate", async () => {
    const a = await runner(300, 0, 1);
    const p = pool([a.url]);
    await p.start();
    const results = await Promise.allSettled(
      Array.from({ length: 4 }, (_, i) => p.predict("latency", x(i), { deadline: deadline() })),
    );
    const refused = results
      .filter((r) => r.status === "rejected")
      .map((r) => (r as PromiseRejectedResult).reason);
    assert.ok(refused.length >= 1, "the queue of one row overflowed");
    for (const err of refused) {
      assert.ok(isModelportError(err));
      assert.equal(err.code, "MP_ERR_MODEL_OVERLOADED");
      assert.ok((err.details?.retryAfterSeconds as number) >= 1);
    }
  });

  it("takes a runner that accepts connections but never answers out of rotation at the next poll", async () => {
    const sockets = new Set<Socket>();
    const hung: Server = createServer((s) => sockets.add(s)); // accepts, never answers
    await new Promise<void>((r) => hung.listen(0, "127.0.0.1", r));
    open.push({
      close: () => {
        for (const s of sockets) s.destroy();
        return new Promise((r) => hung.close(r));
      },
    });
    const hungUrl = `http://127.0.0.1:${(hung.address() as { port: number }).port}`;
    const good = await runner(0);
    const p = pool([hungUrl, good.url], 300);
    await p.start();
    assert.deepEqual(
      p.all().map((ep) => [ep.url, ep.healthy]),
      [
        [hungUrl, false],
        [good.url, true],
      ],
    );
    assert.match(p.all()[0]!.reason, /no answer within/);
    for (let i = 0; i < 3; i++) await p.predict("latency", x(i), { deadline: deadline() });
  });

  it("gives the runner's own error for a request another runner would refuse too", async () => {
    const a = await runner(300);
    const p = pool([a.url]);
    await p.start();
    await assert.rejects(
      p.predict("latency", x(1), { deadline: performance.now() + 50 }),
      (err: unknown) => isModelportError(err) && err.code === "MP_ERR_DEADLINE_EXCEEDED",
    );
  });

  it("expands dns+http://NAME:PORT to one runner per address NAME resolves to", async () => {
    const a = await runner(0);
    const port = new URL(a.url).port;
    const p = pool([`dns+http://localhost:${port}`]);
    await p.start();
    const ipv4 = p.all().find((ep) => ep.url === `http://127.0.0.1:${port}`);
    assert.ok(ipv4, `expanded to ${p.all().map((ep) => ep.url)}`);
    assert.equal(ipv4.healthy, true);
    const out = await p.predict("latency", x(4), { deadline: deadline() });
    assert.equal((out.outputs.y!.data as Float32Array)[0], 8);
  });
});
