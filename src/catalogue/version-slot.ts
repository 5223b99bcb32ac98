// One loaded copy of a model version and the calls on it: counted (so a version being replaced
// closes only when its calls have finished), timed for the per-version metrics.
import type { ServedModel } from "./served-model.js";

/** One loaded copy of a version, and the calls on it. */
export class VersionSlot {
  private inFlight = 0;
  private idle: (() => void)[] = [];
  /** Set once it is being unloaded: new pinned calls are refused. */
  retired = false;

  constructor(
    readonly model: ServedModel,
    readonly fingerprint: string | undefined,
    private readonly record?: (ok: boolean, seconds: number) => void,
  ) {}

  get calls(): number {
    return this.inFlight;
  }

  call<T>(run: () => Promise<T>): Promise<T> {
    this.inFlight++;
    const started = performance.now();
    let p: Promise<T>;
    try {
      p = run();
    } catch (err) {
      this.done(false, started);
      return Promise.reject(err);
    }
    return p.then(
      (v) => {
        this.done(true, started);
        return v;
      },
      (err) => {
        this.done(false, started);
        throw err;
      },
    );
  }

  whenIdle(): Promise<void> {
    return this.inFlight === 0 ? Promise.resolve() : new Promise((r) => this.idle.push(r));
  }

  private done(ok: boolean, started: number): void {
    this.record?.(ok, (performance.now() - started) / 1000);
    if (--this.inFlight === 0) for (const r of this.idle.splice(0)) r();
  }
}
