// The span processor behind the spans (sdk.ts), in place of the SDK's BatchSpanProcessor: when a
// sampled span ends it is encoded at once as OTLP protobuf (otlp-encode.ts) into the current
// batch's buffer, so the span object is garbage as soon as end() returns instead of waiting
// in a queue. A batch is handed over, its ArrayBuffer transferred (not copied), when it holds
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans or OTEL_BSP_SCHEDULE_DELAY after its first span; like the
// SDK's processor, one export runs at a time, what waits is bounded by OTEL_BSP_MAX_QUEUE_SIZE
// (spans beyond it are dropped and counted), an export that takes longer than
// OTEL_BSP_EXPORT_TIMEOUT is given up, and forceFlush/shutdown export every span ended before them.
import { diag } from "@opentelemetry/api";
import { ProtoWriter, writeSpan } from "./otlp-encode.js";
import type { BatchSettings } from "./settings.js";
import type { RecordedSpan } from "./span.js";

/** Where batches go: the export worker (worker-exporter.ts). */
export interface BatchSink {
  /** Bytes to leave free in front of a batch's spans (for the request's head). */
  readonly headRoom: number;
  /** Sends `count` encoded spans, `buffer` from `headRoom` to `end` (the buffer is transferred). */
  export(buffer: ArrayBuffer, end: number, count: number): Promise<void>;
  /** An exported batch's buffer of at least `size` bytes, to fill again, if one is back. */
  spare?(size: number): ArrayBuffer | undefined;
  shutdown(): Promise<void>;
}

interface Batch {
  id: number;
  buffer: ArrayBuffer;
  end: number;
  count: number;
}

/** The smallest buffer a batch starts with; the next one is sized from the last batch. */
const MIN_BUFFER = 16 * 1024;

export class OtlpSpanProcessor {
  private writer: ProtoWriter;
  /** Spans in `writer`. */
  private count = 0;
  /** Cut batches waiting for the export before them. */
  private readonly waiting: Batch[] = [];
  /** Spans not yet handed over: in `waiting` and in `writer`. */
  private queued = 0;
  private exporting = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private dropped = 0;
  private nextId = 1;
  /** The id of the last batch whose export has finished (batches finish in order). */
  private doneUpTo = 0;
  private flushes: { upTo: number; resolve: () => void }[] = [];
  private closed: Promise<void> | undefined;

  constructor(
    private readonly settings: BatchSettings,
    private readonly sink: BatchSink,
  ) {
    this.writer = new ProtoWriter(MIN_BUFFER, undefined, sink.headRoom);
  }

  /** A sampled span that has ended. */
  onEnd(span: RecordedSpan): void {
    if (this.closed !== undefined) return;
    if (this.queued >= this.settings.maxQueueSize) {
      if (this.dropped++ === 0) diag.debug("maxQueueSize reached, dropping spans");
      return;
    }
    if (this.dropped > 0) {
      diag.warn(`Dropped ${this.dropped} spans because maxQueueSize reached`);
      this.dropped = 0;
    }
    const w = this.writer;
    const before = w.pos;
    try {
      writeSpan(w, span);
    } catch (err) {
      // Nothing half-written stays in the batch.
      w.pos = before;
      diag.error("a span could not be encoded", err);
      return;
    }
    this.queued++;
    if (++this.count >= this.settings.maxExportBatchSize) {
      this.cut();
      this.next();
    } else if (this.timer === undefined && !this.exporting) this.startTimer();
  }

  forceFlush(): Promise<void> {
    return this.closed ?? this.flushAll();
  }

  shutdown(): Promise<void> {
    this.closed ??= this.flushAll().then(() => this.sink.shutdown());
    return this.closed;
  }

  /** Resolves once every span ended so far has been exported (or its export has failed). */
  private flushAll(): Promise<void> {
    this.cut();
    const upTo = this.nextId - 1;
    if (this.doneUpTo >= upTo) return Promise.resolve();
    const done = new Promise<void>((resolve) => this.flushes.push({ upTo, resolve }));
    this.next();
    return done;
  }

  /** Closes the current buffer as a batch. */
  private cut(): void {
    if (this.count === 0) return;
    const w = this.writer;
    this.waiting.push({
      id: this.nextId++,
      buffer: w.buf.buffer as ArrayBuffer,
      end: w.pos,
      count: this.count,
    });
    // A returned buffer that held a batch as long as this one (a new one costs page faults), or a
    // new one with room to spare.
    const spare = this.sink.spare?.(Math.max(MIN_BUFFER, w.pos));
    this.writer = new ProtoWriter(Math.max(MIN_BUFFER, w.pos + (w.pos >>> 2)), spare, this.sink.headRoom);
    this.count = 0;
  }

  /** Starts the next waiting batch's export unless one is running. */
  private next(): void {
    if (this.exporting) return;
    const batch = this.waiting.shift();
    if (batch === undefined) return;
    this.clearTimer();
    this.exporting = true;
    this.queued -= batch.count;
    let timeout: ReturnType<typeof setTimeout> | undefined;
    Promise.race([
      this.sink.export(batch.buffer, batch.end, batch.count),
      new Promise<never>((_, reject) => {
        timeout = setTimeout(() => reject(new Error("Timeout")), this.settings.exportTimeoutMillis);
      }),
    ])
      .catch((err: unknown) => diag.error("span export failed", err))
      .finally(() => {
        clearTimeout(timeout);
        this.exporting = false;
        this.doneUpTo = batch.id;
        if (this.flushes.length > 0) {
          const due = this.flushes.filter((f) => f.upTo <= batch.id);
          this.flushes = this.flushes.filter((f) => f.upTo > batch.id);
          for (const f of due) f.resolve();
        }
        if (this.waiting.length > 0) this.next();
        else if (this.count > 0) this.startTimer();
      });
  }

  private startTimer(): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.cut();
      this.next();
    }, this.settings.scheduledDelayMillis);
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
