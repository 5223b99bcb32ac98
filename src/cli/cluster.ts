// server.processes > 1: the primary forks that many `modelport serve` processes sharing the
// listening socket (node:cluster); each loads its own copy of the models. The primary restarts
// a process that dies (backing off while replacements keep dying young), forwards
// SIGTERM/SIGINT and exits 0 once every process drained.
import cluster, { type Worker } from "node:cluster";
import type { Logger } from "pino";

/** A process that lived less than this died young: its replacement waits (restartDelayMs). */
export const YOUNG_DEATH_MS = 10_000;

/**
 * Wait before replacing a process, by how many times in a row its slot's process died young:
 * none after a long life, then 1 s doubling to 30 s, so a crash loop does not spin.
 */
export function restartDelayMs(youngDeaths: number): number {
  return youngDeaths === 0 ? 0 : Math.min(30_000, 1000 * 2 ** (youngDeaths - 1));
}

interface Slot {
  index: number;
  worker?: Worker;
  startedAt: number;
  youngDeaths: number;
  restart?: NodeJS.Timeout;
}

export interface Primary {
  /** Resolves to the exit code once every process has stopped after stop(). */
  readonly done: Promise<number>;
  /** Sends `signal` to every serving process (once) and cancels pending restarts. */
  stop(signal: NodeJS.Signals): void;
}

/** Runs the primary: forks the processes, replaces dead ones, and stops them on SIGTERM/SIGINT. */
export function runPrimary(processes: number, logger: Logger, env: Record<string, string> = {}): Primary {
  let stopping = false;
  const slots: Slot[] = [];
  const fork = (slot: Slot) => {
    slot.restart = undefined;
    slot.startedAt = Date.now();
    const worker = cluster.fork({ ...env, MODELPORT_PROCESS_INDEX: String(slot.index) });
    slot.worker = worker;
    worker.once("exit", (code, signal) => {
      slot.worker = undefined;
      if (stopping) return;
      const lived = Date.now() - slot.startedAt;
      slot.youngDeaths = lived < YOUNG_DEATH_MS ? slot.youngDeaths + 1 : 0;
      const delayMs = restartDelayMs(slot.youngDeaths);
      logger.error(
        { pid: worker.process.pid, code, signal, livedMs: lived, restartInMs: delayMs },
        "a serving process died; starting another",
      );
      // Referenced: with every process dead, this timer is what keeps the primary alive.
      slot.restart = setTimeout(() => fork(slot), delayMs);
    });
  };
  for (let i = 0; i < processes; i++) {
    const slot: Slot = { index: i, startedAt: 0, youngDeaths: 0 };
    slots.push(slot);
    fork(slot);
  }
  let resolveDone: (code: number) => void = () => {};
  const done = new Promise<number>((r) => {
    resolveDone = r;
  });
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    for (const s of slots) if (s.restart) clearTimeout(s.restart);
    const workers = slots.map((s) => s.worker).filter((w): w is Worker => w !== undefined);
    logger.info({ signal, processes: workers.length }, "stopping every serving process");
    let failed = false;
    let left = workers.length;
    if (left === 0) resolveDone(0);
    for (const w of workers) {
      w.once("exit", (code) => {
        if (code !== 0) failed = true;
        if (--left === 0) resolveDone(failed ? 1 : 0);
      });
      w.process.kill(signal);
    }
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  return { done, stop };
}
