// The one cancellation type of modelport: a request's handle, canceled when its client goes
// away, passed down to whatever works for it (the batcher's queue, a language model's slot, an
// upstream call). A flag and a listener list, because AbortController/AbortSignal cost a few
// microseconds per request (EventTarget machinery) on the tensor hot path; code that must hand
// a driver an AbortSignal (fetch, node-llama-cpp) asks for `signal`, made on first use.

export class CancelHandle {
  private listeners: (() => void)[] | undefined;
  private controller: AbortController | undefined;
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

  /** An AbortSignal that aborts with this handle, for drivers that take one; made on first use. */
  get signal(): AbortSignal {
    if (!this.controller) {
      const controller = new AbortController();
      this.controller = controller;
      if (this.canceled) controller.abort();
    }
    return this.controller.signal;
  }

  cancel(): void {
    if (this.canceled) return;
    this.canceled = true;
    const fns = this.listeners;
    this.listeners = undefined;
    this.controller?.abort();
    if (fns) for (const fn of fns) fn();
  }
}
