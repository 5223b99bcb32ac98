// Cooperative time slicing for the long loops of batches (parsing a file of 50,000 lines,
// submitting its jobs): they run on the event loop's thread, so they give way to I/O whenever
// they have held it for a slice, and interactive requests wait at most about one slice.

/** How long a batch loop holds the event loop before it gives way. */
export const SLICE_MS = 10;

export class TimeSlice {
  private start = performance.now();

  constructor(private readonly ms = SLICE_MS) {}

  /** Whether this slice is used up. */
  spent(): boolean {
    return performance.now() - this.start >= this.ms;
  }

  /** Gives way to I/O (one turn of the event loop) and starts a new slice. */
  async yield(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    this.start = performance.now();
  }

  /** Gives way only when the slice is used up. */
  async pass(): Promise<void> {
    if (this.spent()) await this.yield();
  }
}
