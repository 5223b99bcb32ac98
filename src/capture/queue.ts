// The bounded asynchronous queue between the requests and the capture destination. offer()
// never waits and never throws: a record that does not fit (queueRecords, queueBytes) is dropped
// and counted, so a slow or stalled destination costs requests nothing. One background loop
// takes what waits, serializes it (record.ts: redaction, truncation) a slice at a time so the
// event loop keeps serving, and writes the batch; a destination that fails drops the batch,
// counts it and warns at most once per WARN_EVERY_MS. close() writes what is left within a deadline.
import type { Logger } from "pino";
import type { Metrics } from "../metrics/metrics.js";
import { heldBytes, type PendingRecord, serializeRecord } from "./record.js";
import type { CaptureLine, CaptureSink } from "./sink.js";

export type DropReason = "queue_full" | "sink_failed" | "serialize_failed" | "shutdown";

/** Fewest ms between two warnings of the same reason. */
const WARN_EVERY_MS = 10_000;
/** Records serialized before the loop yields to the event loop. */
const SLICE = 32;

export interface CaptureQueueOptions {
  sink: CaptureSink;
  metrics: Metrics;
  log: Logger;
  /** Records waiting at most. */
  maxRecords: number;
  /** Bytes of bodies waiting at most (estimated, record.ts heldBytes). */
  maxBytes: number;
  /** Batched sinks: a batch is taken once this many bytes wait... */
  batchBytes: number;
  /** ...or its oldest record waited this long. */
  flushMs: number;
}

interface Entry {
  record: PendingRecord;
  bytes: number;
  /** Date.now() when queued. */
  at: number;
}

/** The batch being written; abandoned when close() gives up on it (it then counts as dropped). */
interface InFlight {
  models: readonly { model: string }[];
  abandoned: boolean;
}

export class CaptureQueue {
  private waiting: Entry[] = [];
  /** Bytes of the waiting records and of the batch being written. */
  private bytes = 0;
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closing = false;
  private inFlight: InFlight | undefined;
  private readonly warned = new Map<DropReason, { at: number; suppressed: number }>();

  constructor(private readonly o: CaptureQueueOptions) {}

  /** Takes the record if there is room, else drops and counts it. Never throws, never waits. */
  offer(record: PendingRecord): boolean {
    const bytes = heldBytes(record);
    if (this.closing) {
      this.drop([record], "shutdown");
      return false;
    }
    if (this.waiting.length >= this.o.maxRecords || this.bytes + bytes > this.o.maxBytes) {
      this.drop([record], "queue_full");
      return false;
    }
    this.waiting.push({ record, bytes, at: Date.now() });
    this.bytes += bytes;
    this.o.metrics.captureQueued.set(this.waiting.length);
    this.kick();
    return true;
  }

  /** Records waiting now (not counting a batch being written). */
  get size(): number {
    return this.waiting.length;
  }

  /** Starts the loop when a batch is due; for a batched sink, arms the flushMs timer otherwise. */
  private kick(): void {
    if (this.running) return;
    if (this.due()) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.running = this.loop().finally(() => {
        this.running = undefined;
        if (this.waiting.length) this.kick();
      });
    } else if (!this.timer && this.waiting.length) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.kick();
      }, this.o.flushMs);
      this.timer.unref();
    }
  }

  private due(): boolean {
    if (this.waiting.length === 0) return false;
    if (this.closing || this.o.sink.batching === "immediate") return true;
    if (this.bytes >= this.o.batchBytes || this.waiting.length >= this.o.maxRecords / 2) return true;
    return Date.now() - this.waiting[0]!.at >= this.o.flushMs;
  }

  private async loop(): Promise<void> {
    while (this.waiting.length && (this.due() || this.closing)) {
      const batch = this.waiting;
      this.waiting = [];
      this.o.metrics.captureQueued.set(0);
      const lines: CaptureLine[] = [];
      for (let i = 0; i < batch.length; i++) {
        if (i > 0 && i % SLICE === 0) await new Promise((r) => setImmediate(r));
        const { record } = batch[i]!;
        try {
          lines.push({ model: record.model, text: serializeRecord(record) });
        } catch (err) {
          this.drop([record], "serialize_failed", err);
        }
      }
      const flight: InFlight = { models: lines, abandoned: false };
      this.inFlight = flight;
      try {
        await this.o.sink.write(lines);
        if (!flight.abandoned) for (const l of lines) this.o.metrics.captureRecords.inc({ model: l.model });
      } catch (err) {
        if (!flight.abandoned) this.drop(lines, "sink_failed", err);
      } finally {
        this.inFlight = undefined;
        for (const e of batch) this.bytes -= e.bytes;
      }
    }
  }

  private drop(records: readonly { model: string }[], reason: DropReason, err?: unknown): void {
    const counts = new Map<string, number>();
    for (const r of records) counts.set(r.model, (counts.get(r.model) ?? 0) + 1);
    for (const [model, n] of counts) this.o.metrics.captureDropped.inc({ model, reason }, n);
    if (records.length) this.warn(reason, records.length, err);
  }

  /** At most one warning per reason per WARN_EVERY_MS, saying how many drops it stands for. */
  private warn(reason: DropReason, n: number, err?: unknown): void {
    const now = Date.now();
    const w = this.warned.get(reason);
    if (w && now - w.at < WARN_EVERY_MS) {
      w.suppressed += n;
      return;
    }
    const dropped = n + (w?.suppressed ?? 0);
    this.warned.set(reason, { at: now, suppressed: 0 });
    this.o.log.warn(
      { reason, dropped, ...(err ? { err: err instanceof Error ? err.message : String(err) } : {}) },
      "payload capture dropped records (counted in modelport_capture_dropped_total)",
    );
  }

  /**
   * Stops taking records and writes what waits, until `deadline` (Date.now() ms); whatever is
   * still unwritten then is dropped as `shutdown`. Closes the sink. Idempotent.
   */
  async close(deadline: number): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.kick();
    let timeout: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((r) => {
      timeout = setTimeout(() => r("late"), Math.max(0, deadline - Date.now()));
    });
    const done = (async () => {
      while (this.running) await this.running;
    })();
    const outcome = await Promise.race([done.then(() => "done" as const), late]);
    clearTimeout(timeout);
    if (outcome === "late") {
      // A write still hanging counts as dropped, whatever it does later.
      const left: { model: string }[] = this.waiting.map((e) => e.record);
      this.waiting = [];
      this.o.metrics.captureQueued.set(0);
      if (this.inFlight) {
        this.inFlight.abandoned = true;
        left.push(...this.inFlight.models);
      }
      this.drop(left, "shutdown");
    }
    // A sink that hangs on close (a stalled disk or endpoint) does not hold up the shutdown.
    await Promise.race([
      this.o.sink.close().catch(() => undefined),
      new Promise((r) => setTimeout(r, 1000).unref()),
    ]);
  }
}
