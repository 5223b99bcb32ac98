// The one layout choice modelport leaves to measurement: how many intra-op threads a model gets.
// The default is one, because that is right for most traffic (single rows at low concurrency gain
// nothing from a second thread, and onnxruntime's spinning pool would take the HTTP thread's core),
// and wrong for one shape: a compute-bound model under steady multi-row load, whose runner is
// busy all the time while the machine has cores to spare. That shape is visible only while
// serving, so it is watched for, not guessed at load: over each window, a model whose runner held
// batches nearly all the time while the process left at least half a core idle gets one warning
// naming the fix (more threads for it, or `modelport tune`, which measures the layouts).
import type { Logger } from "pino";
import { THREADS_DOC } from "../config/threads.js";

/** One model's counters, read at each window's end. */
export interface RunnerLoad {
  name: string;
  /** Its intra-op threads. */
  threads: number;
  /** Milliseconds its runner has held at least one batch (a counter; it restarts with the runner). */
  runnerBusyMs: number;
}

/** Share of a window a runner must be busy to count as the bottleneck. */
export const SATURATED = 0.9;
/** Cores the process must leave idle over the window for more threads to have somewhere to run. */
export const IDLE_CORES = 0.5;

export class IdleCoresWatch {
  private last: { at: number; cpuMicros: number; busy: Map<string, number> } | undefined;
  private readonly warned = new Set<string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly cores: number,
    private readonly models: () => readonly RunnerLoad[],
    private readonly log: Pick<Logger, "warn">,
  ) {}

  /** Checks every `windowMs` until stop(); the timer does not hold the process open. */
  start(windowMs = 30_000): void {
    this.check(performance.now(), cpuMicros());
    this.timer = setInterval(() => this.check(performance.now(), cpuMicros()), windowMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Closes the window that started at the previous call (`now` in ms, `cpu` the process's CPU
   * time in µs) and warns about each saturated model beside idle cores, once per model.
   * @returns the names warned about in this window.
   */
  check(now: number, cpu: number): string[] {
    const loads = this.models();
    const last = this.last;
    this.last = { at: now, cpuMicros: cpu, busy: new Map(loads.map((m) => [m.name, m.runnerBusyMs])) };
    if (!last || now <= last.at) return [];
    const windowMs = now - last.at;
    const coresUsed = (cpu - last.cpuMicros) / 1000 / windowMs;
    const idle = this.cores - coresUsed;
    if (idle < IDLE_CORES) return [];
    const warned: string[] = [];
    for (const m of loads) {
      const before = last.busy.get(m.name);
      if (before === undefined || this.warned.has(m.name) || m.threads >= this.cores) continue;
      const busy = (m.runnerBusyMs - before) / windowMs;
      if (busy < SATURATED) continue; // also a counter that restarted (negative)
      this.warned.add(m.name);
      warned.push(m.name);
      this.log.warn(
        {
          model: m.name,
          runnerBusy: round2(busy),
          coresUsed: round2(coresUsed),
          cores: this.cores,
          threads: m.threads,
        },
        `${m.name}: its runner was busy ${Math.round(Math.min(1, busy) * 100)}% of the last ${Math.round(windowMs / 1000)} s while this process used ${round2(coresUsed)} of ${this.cores} cores: it is the bottleneck and cores stand idle. More intra-op threads for it (threads: ${Math.min(this.cores, m.threads * 2)}) or more processes may raise throughput; \`modelport tune\` measures which (see ${THREADS_DOC})`,
      );
    }
    return warned;
  }
}

function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

const round2 = (x: number) => Math.round(x * 100) / 100;
