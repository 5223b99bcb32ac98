// The compact form finished spans cross to the export worker in (export-worker.ts): one flat array
// per batch, a fixed number of slots per span, so the main thread does one pass of property reads
// and one structured clone per batch instead of protobuf-encoding and POSTing each batch itself.
// Only types come from OpenTelemetry here; both sides import this file.
import type { Attributes, HrTime } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";

/** Values per span in a packed batch (see pack()). */
export const SLOTS = 19;

/** What the worker is told once: the resource and scope every span of this process shares. */
export interface ExportInit {
  resource: Attributes;
  scope: { name: string; version?: string };
}

export type ToWorker = { type: "export"; id: number; spans: unknown[] } | { type: "shutdown" };

export type FromWorker = { type: "result"; id: number; ok: boolean; error?: string } | { type: "closed" };

type Event = ReadableSpan["events"][number];
type Link = ReadableSpan["links"][number];

/** Appends `spans` to `out`, SLOTS values each, in the order unpack() reads them. */
export function pack(spans: readonly ReadableSpan[], out: unknown[] = []): unknown[] {
  for (const s of spans) {
    const c = s.spanContext();
    const p = s.parentSpanContext;
    out.push(
      c.traceId,
      c.spanId,
      c.traceState?.serialize(),
      c.traceFlags,
      p?.spanId,
      p?.isRemote === true,
      s.name,
      s.kind,
      s.startTime[0],
      s.startTime[1],
      s.endTime[0],
      s.endTime[1],
      s.attributes,
      s.droppedAttributesCount,
      s.events.length === 0 ? 0 : s.events.map((e: Event) => [e.name, e.time[0], e.time[1], e.attributes]),
      s.links.length === 0
        ? 0
        : s.links.map((l: Link) => [
            l.context.traceId,
            l.context.spanId,
            l.context.traceState?.serialize(),
            l.context.traceFlags,
            l.context.isRemote === true,
            l.attributes,
          ]),
      s.status.code,
      s.status.message,
      s.droppedEventsCount + s.droppedLinksCount * 65536,
    );
  }
  return out;
}

/** A trace state the serializer can read back (it only calls serialize()). */
const state = (v: unknown) => (typeof v === "string" ? { serialize: () => v } : undefined);

/**
 * The spans of a packed batch as the objects the OTLP serializer reads (ReadableSpan's fields),
 * sharing one resource and scope.
 */
export function unpack(
  packed: readonly unknown[],
  resource: unknown,
  scope: ExportInit["scope"],
): ReadableSpan[] {
  const out: ReadableSpan[] = [];
  for (let i = 0; i + SLOTS <= packed.length; i += SLOTS) {
    const v = packed;
    const context = {
      traceId: v[i] as string,
      spanId: v[i + 1] as string,
      traceState: state(v[i + 2]),
      traceFlags: v[i + 3] as number,
    };
    const parentSpanId = v[i + 4] as string | undefined;
    const events = v[i + 14] === 0 ? [] : (v[i + 14] as [string, number, number, Attributes | undefined][]);
    const links =
      v[i + 15] === 0 ? [] : (v[i + 15] as [string, string, unknown, number, boolean, Attributes?][]);
    const dropped = v[i + 18] as number;
    out.push({
      spanContext: () => context,
      parentSpanContext:
        parentSpanId === undefined
          ? undefined
          : { traceId: context.traceId, spanId: parentSpanId, traceFlags: 0, isRemote: v[i + 5] as boolean },
      name: v[i + 6] as string,
      kind: v[i + 7] as number,
      startTime: [v[i + 8], v[i + 9]] as HrTime,
      endTime: [v[i + 10], v[i + 11]] as HrTime,
      attributes: v[i + 12] as Attributes,
      droppedAttributesCount: v[i + 13] as number,
      events: events.map(([name, s, ns, attributes]) => ({
        name,
        time: [s, ns] as HrTime,
        ...(attributes ? { attributes } : {}),
      })),
      links: links.map(([traceId, spanId, ts, traceFlags, isRemote, attributes]) => ({
        context: { traceId, spanId, traceState: state(ts), traceFlags, isRemote },
        ...(attributes ? { attributes } : {}),
      })),
      status: {
        code: v[i + 16] as number,
        ...(v[i + 17] !== undefined ? { message: v[i + 17] as string } : {}),
      },
      droppedEventsCount: dropped % 65536,
      droppedLinksCount: Math.floor(dropped / 65536),
      resource,
      instrumentationScope: scope,
      duration: [0, 0],
      ended: true,
    } as unknown as ReadableSpan);
  }
  return out;
}
