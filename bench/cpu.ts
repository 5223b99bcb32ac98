// CPU accounting during a measurement, from Linux /proc: how busy the whole machine was, how much
// of a core each server process (and each of its threads) used, and the bench process itself
// (autocannon's load generator). Elsewhere than Linux, the /proc figures are null.
import { readdirSync, readFileSync } from "node:fs";

const TICKS_PER_S = 100; // USER_HZ: /proc reports times in 1/100 s on Linux

interface MachineTicks {
  busy: number;
  total: number;
  softirq: number;
  steal: number;
}

interface ThreadTicks {
  name: string;
  ticks: number;
}

export interface CpuSnapshot {
  at: number; // performance.now(), ms
  machine: MachineTicks | null; // /proc/stat jiffies, all cores
  bench: NodeJS.CpuUsage; // this process, microseconds
  server: Map<number, ThreadTicks> | null; // tid -> ticks (utime + stime)
  serverPid: number;
}

export interface CpuReport {
  /** Machine-wide busy share, 0..100 % of all cores. */
  machineBusyPct: number | null;
  /**
   * % of one core busy with neither the server nor the bench process: other processes on this
   * shared machine, interrupts, steal. Large values mean the point was measured under noise.
   */
  otherPct: number | null;
  /** Of that, softirq (loopback TCP is largely processed there) and steal, % of one core. */
  softirqPct: number | null;
  stealPct: number | null;
  cores: number;
  /** % of one core used by the bench process (load generator + log consumer). */
  benchPct: number;
  /** % of one core used by the server process, all threads. */
  serverPct: number | null;
  /** The server's busiest threads, % of one core each. */
  serverThreads: { tid: number; name: string; pct: number }[] | null;
}

function readProcStat(): MachineTicks | null {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0); // user..steal
    const idle = (f[3] ?? 0) + (f[4] ?? 0); // idle + iowait
    return { busy: total - idle, total, softirq: f[6] ?? 0, steal: f[7] ?? 0 };
  } catch {
    return null;
  }
}

function threadTicks(pid: number): Map<number, ThreadTicks> | null {
  try {
    const out = new Map<number, ThreadTicks>();
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        const open = stat.indexOf("(");
        const close = stat.lastIndexOf(")");
        const name = stat.slice(open + 1, close);
        const f = stat.slice(close + 2).split(" "); // f[0] is field 3 (state)
        out.set(Number(tid), { name, ticks: Number(f[11]) + Number(f[12]) }); // utime + stime
      } catch {
        // the thread ended between readdir and read
      }
    }
    return out;
  } catch {
    return null;
  }
}

export function cpuSnapshot(serverPid: number): CpuSnapshot {
  return {
    at: performance.now(),
    machine: readProcStat(),
    bench: process.cpuUsage(),
    server: threadTicks(serverPid),
    serverPid,
  };
}

export function cpuReport(a: CpuSnapshot, b: CpuSnapshot, cores: number): CpuReport {
  const seconds = (b.at - a.at) / 1000;
  const pct = (ticks: number) => Math.round((ticks / TICKS_PER_S / seconds) * 1000) / 10;
  const benchUs = b.bench.user + b.bench.system - (a.bench.user + a.bench.system);
  let serverPct: number | null = null;
  let serverThreads: CpuReport["serverThreads"] = null;
  if (a.server && b.server) {
    const threads: { tid: number; name: string; pct: number }[] = [];
    let total = 0;
    for (const [tid, t] of b.server) {
      const ticks = t.ticks - (a.server.get(tid)?.ticks ?? 0);
      total += ticks;
      const name = tid === b.serverPid ? `${t.name} (main)` : t.name;
      threads.push({ tid, name, pct: pct(ticks) });
    }
    serverPct = pct(total);
    serverThreads = threads
      .filter((t) => t.pct >= 1)
      .sort((x, y) => y.pct - x.pct)
      .slice(0, 6);
  }
  const benchPct = Math.round((benchUs / 1e6 / seconds) * 1000) / 10;
  let machineBusyPct: number | null = null;
  let otherPct: number | null = null;
  let softirqPct: number | null = null;
  let stealPct: number | null = null;
  if (a.machine && b.machine && b.machine.total > a.machine.total) {
    const all = b.machine.total - a.machine.total;
    const share = (x: number) => Math.round((x / all) * cores * 1000) / 10; // % of one core
    machineBusyPct = Math.round(((b.machine.busy - a.machine.busy) / all) * 1000) / 10;
    softirqPct = share(b.machine.softirq - a.machine.softirq);
    stealPct = share(b.machine.steal - a.machine.steal);
    if (serverPct !== null)
      otherPct = Math.max(
        0,
        Math.round((share(b.machine.busy - a.machine.busy) - serverPct - benchPct) * 10) / 10,
      );
  }
  return {
    machineBusyPct,
    otherPct,
    softirqPct,
    stealPct,
    cores,
    benchPct,
    serverPct,
    serverThreads,
  };
}

/** CPU ms a process has used so far, all its threads (utime + stime); null where /proc is not readable. */
export function processCpuMs(pid: number): number | null {
  return cpuMsOf(statFields(pid));
}

/** utime + stime from /proc/PID/stat's fields, in ms. */
function cpuMsOf(fields: string[] | null): number | null {
  return fields ? ((Number(fields[11]) + Number(fields[12])) / TICKS_PER_S) * 1000 : null;
}

/** /proc/PID/stat's fields after the command name (which is in parentheses and may hold spaces). */
function statFields(pid: number | string): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  } catch {
    return null;
  }
}

/**
 * CPU ms used so far by `pid` and its child processes (a server's runner processes), from /proc;
 * null elsewhere than Linux. Children that exit meanwhile drop out of the sum.
 */
export function processTreeCpuMs(pid: number): number | null {
  const own = processCpuMs(pid);
  if (own === null) return null;
  let total = own;
  for (const entry of readdirSync("/proc")) {
    // A process that ends while the list is read has no fields, and drops out.
    const fields = /^\d+$/.test(entry) ? statFields(entry) : null;
    if (fields && Number(fields[1]) === pid) total += cpuMsOf(fields) ?? 0;
  }
  return total;
}
