// htm bound to Preact's h (tagged-template markup without a JSX step), the hooks the components
// use, and the number formats they share (format.ts).
import htm from "htm";
import { h } from "preact";
import { useEffect } from "preact/hooks";

export const html = htm.bind(h);
export { useCallback, useEffect, useRef, useState } from "preact/hooks";
export { fmt, fmtBytes, fmtMs } from "./format.js";

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
