// Starts `modelport serve ...` as a tracked child process for a measurement and waits until
// every serving process is ready; used by `modelport tune` for each layout it tries.
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type Child, spawnChild } from "./children.js";

/** bin/modelport.js of this installation (this file is dist/src/loadgen/serve-child.js). */
export const MODELPORT_BIN = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "../../../bin/modelport.js",
);

const ADDRESS = /"address":"(http:\/\/[^"]+)"/;
const SHOWS_ADDRESS = new Set(["info", "debug", "trace"]);

export interface ServeChild {
  url: string;
  child: Child;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
}

export interface StartServeOptions {
  /** serve's arguments after `serve` (model path, layout flags); --port and --log-* are added. */
  args: readonly string[];
  /** Serving processes (readiness is confirmed on fresh connections to reach each of them). */
  processes: number;
  logLevel: string;
  timeoutMs?: number;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

interface Readyz {
  ready?: boolean;
  reasons?: string[];
  models?: Record<string, { state?: string; reason?: string }>;
}

/**
 * Polls GET /readyz on fresh connections until it answers 200 `times` times in a row (with
 * several processes behind one port, each new connection may reach another one).
 */
async function waitReady(url: string, child: Child, times: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let streak = 0;
  let last = "no answer";
  while (Date.now() < deadline) {
    if (child.process.exitCode !== null || child.process.signalCode !== null)
      throw new Error(
        `modelport serve exited (code ${child.process.exitCode}) before it was ready\n${child.stderrTail()}`,
      );
    try {
      const res = await fetch(`${url}/readyz`, { headers: { connection: "close" } });
      const body = (await res.json()) as Readyz;
      if (res.status === 200) {
        if (++streak >= times) return;
        continue;
      }
      streak = 0;
      last = `${res.status}: ${(body.reasons ?? []).join("; ")}`;
      const failed = Object.entries(body.models ?? {}).filter(([, m]) => m.state === "failed");
      if (failed.length)
        throw new Error(`not ready: ${failed.map(([n, m]) => `${n}: ${m.reason}`).join("; ")}`);
    } catch (err) {
      if ((err as Error).message.startsWith("not ready:")) throw err;
      streak = 0;
      last = String((err as Error).message);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url}/readyz not 200 within ${timeoutMs} ms; last answer ${last}`);
}

/** Spawns `node bin/modelport.js serve ARGS` and resolves once every process is ready. */
export async function startServe(opts: StartServeOptions): Promise<ServeChild> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const port = SHOWS_ADDRESS.has(opts.logLevel) ? 0 : await freePort();
  const args = [
    MODELPORT_BIN,
    "serve",
    ...opts.args,
    "--port",
    String(port),
    "--log-format",
    "json",
    "--log-level",
    opts.logLevel,
  ];
  const child = spawnChild(process.execPath, args, "modelport serve");
  try {
    const url = port === 0 ? (await child.waitFor(ADDRESS, timeoutMs))[1]! : `http://127.0.0.1:${port}`;
    await waitReady(url, child, 2 * opts.processes, timeoutMs);
    return { url, child, stop: (graceMs = 10_000) => child.stop(graceMs) };
  } catch (err) {
    await child.stop(1000);
    throw err;
  }
}
