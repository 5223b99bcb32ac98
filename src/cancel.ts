// A minimal cancellation handle for the request hot path: AbortController/AbortSignal cost a
// few microseconds per request (EventTarget machinery); this is a flag and a listener list.

export class CancelHandle {
  private listeners: (() => void)[] | undefined;
  canceled = false;

  /** Runs `fn` once when canceled (at once if already canceled); returns a function that unregisters it. */
  onCancel(fn: () => void): () => void {
    if (this.canceled) {
      fn();
      return () => {};
    }
    this.listeners ??= [];
    this.listeners.push(fn);
    return () => {
      const i = this.listeners?.indexOf(fn) ?? -1;
      if (i >= 0) this.listeners!.splice(i, 1);
    };
  }

  cancel(): void {
    if (this.canceled) return;
    this.canceled = true;
    const fns = this.listeners;
    this.listeners = undefined;
    if (fns) for (const fn of fns) fn();
  }
}
