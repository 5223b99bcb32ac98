// What spans.ts runs on when tracing is on, loaded by tracing.ts (a dynamic import) only then:
// spans (span.ts: the API's Span, as the SDK's SpanImpl behaves) sampled by the rule the
// environment names, with the resource the SDK's detectors read, ended into our span processor
// (span-processor.ts; OTEL_BSP_* apply), which encodes each span as OTLP protobuf when it ends and
// hands batches of bytes to the export worker (worker-exporter.ts, export-worker.ts), which sends
// them with the official OTLP/HTTP transport (it reads the endpoint, headers, timeout and
// compression from OTEL_EXPORTER_OTLP_* itself), so sending spans does not take the serving thread.
// The SDK's Tracer and SpanImpl are not used: per request they cost the serving thread more than
// the rest of tracing together (docs/PERFORMANCE.md, "Tracing").
import { type Link, ROOT_CONTEXT } from "@opentelemetry/api";
import {
  defaultResource,
  detectResources,
  envDetector,
  type Resource,
  resourceFromAttributes,
} from "@opentelemetry/resources";
import { SamplingDecision, TraceIdRatioBasedSampler } from "@opentelemetry/sdk-trace-base";
import { VERSION } from "../version.js";
import { newSpanId, newTraceId } from "./ids.js";
import type { TraceParent } from "./propagation.js";
import type { TracingSettings } from "./settings.js";
import { RecordedSpan, type SpanHome, spanContextOf } from "./span.js";
import { OtlpSpanProcessor } from "./span-processor.js";
import type { SpanFactory } from "./spans.js";
import { ExportWorker } from "./worker-exporter.js";

/**
 * Whether a new span is sampled, by OTEL_TRACES_SAMPLER's rule: the parent-based samplers follow
 * the parent's sampled flag (local or remote) and apply their root rule to new traces; the ratio
 * is decided from the trace id by the SDK's own TraceIdRatioBasedSampler.
 */
export function sampling(
  settings: Pick<TracingSettings, "sampler" | "ratio">,
): (parent: TraceParent | undefined, traceId: string) => boolean {
  const ratio = new TraceIdRatioBasedSampler(settings.ratio);
  const byRatio = (traceId: string): boolean =>
    ratio.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;
  const sampledParent = (p: TraceParent): boolean => (p.flags & 1) === 1;
  switch (settings.sampler) {
    case "always_on":
      return () => true;
    case "always_off":
      return () => false;
    case "traceidratio":
      return (_parent, traceId) => byRatio(traceId);
    case "parentbased_always_off":
      return (parent) => parent !== undefined && sampledParent(parent);
    case "parentbased_traceidratio":
      return (parent, traceId) => (parent !== undefined ? sampledParent(parent) : byRatio(traceId));
    default:
      return (parent) => parent === undefined || sampledParent(parent);
  }
}

/**
 * A parent made by parentOf(): a TraceParent like any other (its private field is not copied by
 * JSON or structured clone) that also holds the span behind it, for annotate() and links.
 */
class SpanParent implements TraceParent {
  readonly traceId: string;
  readonly spanId: string;
  readonly flags: number;
  declare readonly state?: string;
  readonly #span: RecordedSpan;

  constructor(span: RecordedSpan) {
    this.traceId = span.traceId;
    this.spanId = span.spanId;
    this.flags = span.flags;
    if (span.state !== undefined) (this as { state?: string }).state = span.state;
    this.#span = span;
  }

  get span(): RecordedSpan {
    return this.#span;
  }
}

const linkTo = (p: TraceParent): Link => ({
  context: p instanceof SpanParent ? p.span.spanContext() : spanContextOf(p),
});

/** The factory behind spans.ts: spans sampled by `sampled`, ended into `home`. */
export function createSpanFactory(
  sampled: (parent: TraceParent | undefined, traceId: string) => boolean,
  home: SpanHome,
): SpanFactory {
  return {
    start(name, kind, parent, attributes, links, startTime) {
      const traceId = parent === undefined ? newTraceId() : parent.traceId;
      const span = new RecordedSpan(
        home,
        name,
        kind,
        traceId,
        newSpanId(),
        sampled(parent, traceId) ? 1 : 0,
        parent?.state,
        parent,
        startTime,
      );
      if (span.flags === 1) {
        if (links !== undefined) for (const l of links) span.addLink(linkTo(l));
        if (attributes !== undefined) span.adopt(attributes);
      }
      return span;
    },
    parentOf: (span) => new SpanParent(span as RecordedSpan),
    annotate(parent, key, value) {
      if (parent instanceof SpanParent) parent.span.setAttribute(key, value);
    },
  };
}

export function loadSdk(settings: TracingSettings): {
  factory: SpanFactory;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
} {
  // OTEL_RESOURCE_ATTRIBUTES too; OTEL_SERVICE_NAME (default "modelport") wins over its service.name.
  const resource: Resource = defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes({ "service.name": settings.serviceName, "service.version": VERSION }));
  const scope = { name: "modelport", version: VERSION };
  const processor = new OtlpSpanProcessor(
    settings.batch,
    new ExportWorker({ resource: resource.attributes, scope }),
  );
  const home: SpanHome = { onEnd: (span) => processor.onEnd(span), limits: settings.limits, resource, scope };
  return {
    factory: createSpanFactory(sampling(settings), home),
    flush: () => processor.forceFlush(),
    shutdown: () => processor.shutdown(),
  };
}
