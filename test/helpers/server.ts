// Starts modelport for tests: in this process on a real listening port (buildApp + listen),
// or as a real `modelport serve` child process when signals and exit codes matter.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { type AddressInfo, createServer } from "node:net";
import { dirname, join } from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { type LoadConfigOptions, loadConfig } from "../../src/config/load.js";
import { type BuildOptions, buildApp, type ModelportApp } from "../../src/server/app.js";
import { TRACE_LOG_OPTIONS } from "../../src/telemetry/log-fields.js";

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const CLI = join(REPO_ROOT, "bin", "modelport.js");

export interface InProcessServer {
  url: string;
  /** host:port of the gRPC listener, when started with `grpc`. */
  grpc?: string;
  server: ModelportApp;
  /** Parsed JSON log lines written so far. */
  logs: Record<string, unknown>[];
  close(): Promise<void>;
}

/**
 * Builds the app from config options, listens on 127.0.0.1 (or `host`) at a free port (and, with
 * `grpc`, on another for gRPC, as `modelport serve --grpc-port 0`) and loads the models.
 */
export async function startInProcess(
  options: LoadConfigOptions,
  extra: { grpc?: boolean; build?: Omit<BuildOptions, "logger">; host?: string } = {},
): Promise<InProcessServer> {
  const host = extra.host ?? "127.0.0.1";
  const config = loadConfig({ ...options, flags: { port: 0, ...options.flags } });
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split("\n"))
        if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  // modelport's logger options, as the CLI's logger has them (trace ids on request lines).
  const logger = pino({ level: "info", ...TRACE_LOG_OPTIONS }, sink);
  const server = buildApp(config, { ...extra.build, logger });
  const url = await server.app.listen({ host, port: 0 });
  // Loaded only here, so the many tests without gRPC do not load grpc-js.
  const grpc = extra.grpc
    ? (await (await import("../../src/grpc/server.js")).startGrpcServer(server, { host, port: 0 })).address
    : undefined;
  await server.loadModels();
  return { url, ...(grpc ? { grpc } : {}), server, logs, close: () => server.close() };
}

export interface ChildServer {
  url: string;
  proc: ChildProcess;
  /** stdout and stderr so far. */
  output(): string;
  /** Sends `signal` and resolves to the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Spawns `modelport serve ARGS --port PORT` (default 0: any free port) and resolves once it
 * listens (models may still be loading). `prefix` runs it through a command that execs it (such
 * as `ip netns exec NS`), so the child's pid is still modelport's.
 */
export async function startChild(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  port = 0,
  prefix: string[] = [],
): Promise<ChildServer> {
  const command = [
    ...prefix,
    // The client suite runs on a newer Node than the server's (test/clients/): it names the server's.
    process.env.MODELPORT_SERVER_NODE ?? process.execPath,
    CLI,
    "serve",
    ...args,
    "--port",
    String(port),
    "--log-format",
    "json",
  ];
  const proc = spawn(command[0]!, command.slice(1), {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk;
      const m = /"address":"(http:\/\/[^"]+)"/.exec(out);
      if (m) resolve(m[1]!);
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", (c: Buffer) => {
      out += c;
    });
    proc.once("exit", (code) => reject(new Error(`modelport exited with ${code} before listening:\n${out}`)));
  });
  return {
    url,
    proc,
    output: () => out,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      // Already gone (exited, or killed by a signal): do not wait for an exit that came before.
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill(signal);
      const [code] = (await once(proc, "exit")) as [number | null];
      return code;
    },
  };
}

/** Polls GET /readyz until it answers 200 (or `timeoutMs` passes); returns the last body. */
export async function waitReady(url: string, timeoutMs = 20_000): Promise<{ status: number; body: unknown }> {
  const deadline = Date.now() + timeoutMs;
  let last = { status: 0, body: undefined as unknown };
  while (Date.now() < deadline) {
    const res = await fetch(`${url}/readyz`);
    last = { status: res.status, body: await res.json() };
    if (res.status === 200) return last;
    if ((last.body as { models?: Record<string, { state: string }> }).models) {
      const states = Object.values((last.body as { models: Record<string, { state: string }> }).models).map(
        (m) => m.state,
      );
      if (!states.includes("loading")) return last;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return last;
}

/** POSTs JSON and returns status, headers and parsed body. */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, body: parsed };
}

/** A TCP port that was free a moment ago (for a process that must come back on the same port). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

const started: ChildServer[] = [];

/**
 * Starts `modelport serve ARGS` and waits until it is ready (fails the test with the server's
 * output if it is not); call stopStartedChildren() in an `after` hook.
 */
export async function startReadyChild(args: string[]): Promise<ChildServer> {
  const child = await startChild(args);
  started.push(child);
  const ready = await waitReady(child.url);
  if (ready.status !== 200) {
    throw new Error(
      `modelport did not become ready: ${JSON.stringify(ready.body)}\n${child.output().slice(-2000)}`,
    );
  }
  return child;
}

/** SIGKILLs every child started by startReadyChild that is still running. */
export async function stopStartedChildren(): Promise<void> {
  for (const c of started.splice(0)) await c.stop("SIGKILL");
}
