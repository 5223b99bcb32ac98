// htm bound to Preact's h (tagged-template markup without a JSX step), the hooks the components
// use, and the number formats they share.
import htm from "htm";
import { h } from "preact";
import { useEffect } from "preact/hooks";

export const html = htm.bind(h);
export { useCallback, useEffect, useRef, useState } from "preact/hooks";

export function fmt(n: number | undefined, digits = 2): string {
  if (n === undefined || !Number.isFinite(n)) return "–";
  if (n !== 0 && Math.abs(n) < 10 ** -digits) return n.toExponential(1);
  return n.toFixed(digits).replace(/\.?0+$/, "") || "0";
}

export function fmtBytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${fmt(v, 1)} ${units[i]}`;
}

export const fmtMs = (ms: number | undefined) =>
  ms === undefined || !Number.isFinite(ms) ? "–" : ms >= 1000 ? `${fmt(ms / 1000, 2)} s` : `${fmt(ms, 1)} ms`;

/** Calls `f` now and every `ms` while the component is mounted. */
export function usePoll(f: () => void | Promise<void>, ms: number, deps: unknown[] = []): void {
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      try {
        await f();
      } finally {
        if (!stopped) timer = setTimeout(tick, ms);
      }
    };
    void tick();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }, deps);
}
