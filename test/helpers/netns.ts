// Linux network namespaces for multi-process tests: each namespace is a "machine" with its own
// address (10.213.N.2), joined to this one by a veth pair (this side 10.213.N.1), so processes in
// different namespaces can listen on the same port and reach each other only over the network.
// Needs root and iproute2; where that is not possible `createNamespaces` says why, so the caller
// can skip what needs them with that reason (never silently fall back).
import { spawnSync } from "node:child_process";

export interface Namespace {
  name: string;
  /** This side's address on the link: how processes in the namespace reach this machine. */
  hostAddress: string;
  /** The namespace's own address. */
  address: string;
  /** Prefix that runs a command inside the namespace (it execs, so pids stay the command's). */
  exec: string[];
}

function ip(args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${(r.stderr || r.error?.message || "").trim()}`);
}

/** Removes namespaces made by createNamespaces (their veth pairs go with them); never throws. */
export function removeNamespaces(spaces: readonly Namespace[]): void {
  for (const ns of spaces) spawnSync("ip", ["netns", "del", ns.name]);
}

/**
 * Namespaces left by a test process that was killed before it cleaned up: they hold the same
 * addresses, and their routes would capture this run's traffic.
 */
function removeStale(): void {
  const list = spawnSync("ip", ["netns", "list"], { encoding: "utf8" }).stdout ?? "";
  for (const m of list.matchAll(/^mp-(\d+)-\d+/gm)) {
    const tag = Number(m[1]);
    if (tag === process.pid % 100_000) continue;
    let alive = false;
    try {
      process.kill(tag, 0);
      alive = true;
    } catch {
      // no such process: its namespaces are stale
    }
    if (!alive) spawnSync("ip", ["netns", "del", m[0]]);
  }
}

/** `count` namespaces, or why they cannot be made here (with nothing left behind). */
export function createNamespaces(count: number): { spaces: Namespace[] } | { reason: string } {
  if (process.platform !== "linux")
    return { reason: `network namespaces need Linux, not ${process.platform}` };
  if (process.getuid?.() !== 0) return { reason: "network namespaces need root (this test runs as a user)" };
  if (spawnSync("ip", ["-V"]).error)
    return { reason: "network namespaces need iproute2's `ip`, not installed" };
  removeStale();
  const made: Namespace[] = [];
  const tag = String(process.pid % 100_000);
  try {
    for (let i = 1; i <= count; i++) {
      const ns: Namespace = {
        name: `mp-${tag}-${i}`,
        hostAddress: `10.213.${i}.1`,
        address: `10.213.${i}.2`,
        exec: ["ip", "netns", "exec", `mp-${tag}-${i}`],
      };
      const host = `mph${tag}${i}`; // interface names: 15 characters at most
      const inner = `mpn${tag}${i}`;
      ip(["netns", "add", ns.name]);
      made.push(ns);
      ip(["link", "add", host, "type", "veth", "peer", "name", inner]);
      ip(["link", "set", inner, "netns", ns.name]);
      ip(["addr", "add", `${ns.hostAddress}/24`, "dev", host]);
      ip(["link", "set", host, "up"]);
      ip(["-n", ns.name, "addr", "add", `${ns.address}/24`, "dev", inner]);
      ip(["-n", ns.name, "link", "set", inner, "up"]);
      ip(["-n", ns.name, "link", "set", "lo", "up"]);
    }
    return { spaces: made };
  } catch (err) {
    removeNamespaces(made);
    return { reason: `cannot make network namespaces here: ${(err as Error).message}` };
  }
}
