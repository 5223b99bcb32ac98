// The Redis the tests use: the environment's (REDIS_URL, default redis://127.0.0.1:6379). Only
// when nothing answers there does a test start a throwaway `redis-server` on that address (no
// persistence), stopped when the test process exits; with no redis-server either, the test fails
// with a message that says so. Also a TCP relay in front of it, for a Redis that is "down" and
// then comes up, without a second server.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { connect, createServer, type Server, type Socket } from "node:net";
import { Redis } from "ioredis";

export const REDIS_URL = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";

let started: ChildProcess | undefined;
let ready: Promise<string> | undefined;

async function answers(url: string): Promise<boolean> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on("error", () => {});
  try {
    await redis.connect();
    return (await redis.ping()) === "PONG";
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/** REDIS_URL once something answers PING there (starting a local redis-server if need be). */
export function redisUrl(): Promise<string> {
  ready ??= (async () => {
    if (await answers(REDIS_URL)) return REDIS_URL;
    const { hostname, port } = new URL(REDIS_URL);
    if (!["127.0.0.1", "localhost", "::1", "[::1]"].includes(hostname)) {
      throw new Error(
        `no Redis answers at ${REDIS_URL} (REDIS_URL), and it is not on this machine to start one`,
      );
    }
    if (spawnSync("redis-server", ["--version"]).status !== 0) {
      throw new Error(`no Redis answers at ${REDIS_URL} (REDIS_URL) and there is no redis-server to start`);
    }
    started = spawn(
      "redis-server",
      ["--port", port || "6379", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      { stdio: "ignore" },
    );
    process.once("exit", () => started?.kill("SIGKILL"));
    for (let i = 0; i < 100; i++) {
      if (await answers(REDIS_URL)) return REDIS_URL;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`started redis-server for ${REDIS_URL}, but it did not answer within 5 s`);
  })();
  return ready;
}

/** A key prefix no other test run uses. */
export function uniquePrefix(tag: string): string {
  return `modelport-test:${tag}:${randomUUID()}:`;
}

/** Deletes every key under `prefix` (a prefix from uniquePrefix: no glob characters in it). */
export async function deletePrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== "0");
  } finally {
    await redis.quit();
  }
}

export interface Relay {
  /** redis://127.0.0.1:PORT: refuses connections until open(). */
  url: string;
  /** Starts relaying to the real Redis. */
  open(): Promise<void>;
  close(): Promise<void>;
}

/** A port that stands for a Redis which is not there yet; open() makes it the real one. */
export async function redisRelay(targetUrl: string): Promise<Relay> {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 6379), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  // Reserve a port, then let it go until open(): connections to it are refused meanwhile.
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  const url = new URL(targetUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString().replace(/\/$/, ""),
    open: () =>
      new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => resolve());
      }),
    async close() {
      for (const s of sockets) s.destroy();
      if (server.listening) await new Promise((r) => server.close(r));
    },
  };
}
