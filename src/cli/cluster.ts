// server.processes > 1: the primary forks that many `modelport serve` processes sharing the
// listening socket (node:cluster); each loads its own copy of the models. The primary restarts
// a process that dies, forwards SIGTERM/SIGINT and exits 0 once every process drained.
import cluster from "node:cluster";
import type { Logger } from "pino";

/** Runs the primary; resolves to the exit code once every worker has stopped after a signal. */
export function runPrimary(processes: number, logger: Logger): Promise<number> {
  let stopping = false;
  const started = new Map<number, number>();
  const fork = () => {
    const w = cluster.fork({ MODELPORT_PROCESS_INDEX: String(started.size) });
    started.set(w.id, Date.now());
  };
  for (let i = 0; i < processes; i++) fork();
  cluster.on("exit", (worker, code, signal) => {
    if (stopping) return;
    const lived = Date.now() - (started.get(worker.id) ?? 0);
    logger.error({ pid: worker.process.pid, code, signal }, "a serving process died; starting another");
    // A process that dies at once would die again: back off instead of spinning.
    setTimeout(fork, lived < 5000 ? 1000 : 0).unref();
  });
  return new Promise<number>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      logger.info(
        { signal, processes: Object.keys(cluster.workers ?? {}).length },
        "stopping every serving process",
      );
      let failed = false;
      const workers = Object.values(cluster.workers ?? {}).filter((w) => w !== undefined);
      let left = workers.length;
      if (left === 0) resolve(0);
      for (const w of workers) {
        w.once("exit", (code) => {
          if (code !== 0) failed = true;
          if (--left === 0) resolve(failed ? 1 : 0);
        });
        w.process.kill(signal);
      }
    };
    process.on("SIGTERM", () => stop("SIGTERM"));
    process.on("SIGINT", () => stop("SIGINT"));
  });
}
