// Child processes of a load test (the servers under test): spawn them tracked, so every one is
// killed when this process exits (normally, on an error, or on a signal), and stop them gracefully
// when a measurement ends. Shared by `modelport tune` and the benchmark in bench/.
import { type ChildProcess, spawn } from "node:child_process";

const children = new Set<ChildProcess>();
let hooked = false;

function killAll(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  children.clear();
}

/** Kills every tracked child on exit, on SIGINT/SIGTERM/SIGHUP and on an uncaught error. */
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.on("exit", killAll);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => {
      process.stderr.write(`\n${signal}: killing child processes\n`);
      killAll();
      process.exit(130);
    });
  }
  process.on("uncaughtException", (err) => {
    process.stderr.write(`uncaught error: ${err.stack ?? err}\n`);
    killAll();
    process.exit(1);
  });
  process.on("unhandledRejection", (err) => {
    process.stderr.write(`unhandled rejection: ${(err as Error)?.stack ?? err}\n`);
    killAll();
    process.exit(1);
  });
}

export interface Child {
  readonly process: ChildProcess;
  readonly pid: number;
  /** Lines and bytes the child wrote to stdout (read and discarded, except while waiting for a line). */
  stdoutStats(): { lines: number; bytes: number };
  /** The last few KiB of stderr, for error messages. */
  stderrTail(): string;
  /** Resolves with the first match of `pattern` on stdout, or rejects on exit or after `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Spawns a tracked child with stdout piped into a consumer that counts and discards it (so a
 * chatty server never blocks on a full pipe) and stderr kept as a short tail.
 */
export function spawnChild(command: string, args: readonly string[], label: string): Child {
  hookExit();
  const proc = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  if (proc.pid === undefined) throw new Error(`${label}: could not spawn ${command}`);
  children.add(proc);
  const exited = new Promise<void>((resolve) => {
    proc.once("exit", () => {
      children.delete(proc);
      resolve();
    });
  });

  let lines = 0;
  let bytes = 0;
  let watchText = ""; // stdout kept only while someone waits for a pattern
  const watchers: { pattern: RegExp; found(m: RegExpMatchArray): void }[] = [];
  proc.stdout!.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
    if (watchers.length === 0) return;
    watchText = (watchText + chunk.toString("utf8")).slice(-65536);
    for (let w = watchers.length - 1; w >= 0; w--) {
      const m = watchText.match(watchers[w]!.pattern);
      if (m) watchers.splice(w, 1)[0]!.found(m);
    }
    if (watchers.length === 0) watchText = "";
  });
  let stderr = "";
  proc.stderr!.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-8192);
  });

  return {
    process: proc,
    pid: proc.pid,
    stdoutStats: () => ({ lines, bytes }),
    stderrTail: () => stderr,
    waitFor(pattern, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          fail(new Error(`${label}: no ${pattern} on stdout within ${timeoutMs} ms\n${stderr}`));
        }, timeoutMs);
        const onExit = (code: number | null, signal: string | null) =>
          fail(new Error(`${label} exited (code ${code}, signal ${signal}) before ${pattern}\n${stderr}`));
        const watcher = {
          pattern,
          found(m: RegExpMatchArray) {
            clearTimeout(timer);
            proc.off("exit", onExit);
            resolve(m);
          },
        };
        function fail(err: Error) {
          clearTimeout(timer);
          proc.off("exit", onExit);
          const i = watchers.indexOf(watcher);
          if (i !== -1) watchers.splice(i, 1);
          reject(err);
        }
        proc.once("exit", onExit);
        watchers.push(watcher);
      });
    },
    async stop(graceMs = 5000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
