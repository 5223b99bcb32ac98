// The OpenTelemetry SDK behind spans.ts, loaded by tracing.ts (a dynamic import) only when
// tracing is on: a tracer provider with the sampler the environment names and our span processor
// (span-processor.ts; OTEL_BSP_* apply), which encodes each span as OTLP protobuf when it ends and
// hands batches of bytes to the export worker (worker-exporter.ts, export-worker.ts), which sends
// them with the official OTLP/HTTP transport (it reads the endpoint, headers, timeout and
// compression from OTEL_EXPORTER_OTLP_* itself), so sending spans does not take the serving thread.
import {
  type Attributes,
  type Context,
  createTraceState,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  type SpanKind,
  trace,
} from "@opentelemetry/api";
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import { VERSION } from "../version.js";
import type { TraceParent } from "./propagation.js";
import type { TracingSettings } from "./settings.js";
import { OtlpSpanProcessor } from "./span-processor.js";
import type { SpanFactory } from "./spans.js";
import { ExportWorker } from "./worker-exporter.js";

function sampler(settings: TracingSettings): Sampler {
  switch (settings.sampler) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(settings.ratio);
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

function spanContext(p: TraceParent): SpanContext {
  const c: SpanContext = {
    traceId: p.traceId,
    spanId: p.spanId,
    traceFlags: p.flags,
    isRemote: p.remote === true,
  };
  if (p.state !== undefined) c.traceState = createTraceState(p.state);
  return c;
}

/**
 * A parent made by parentOf(): a TraceParent like any other (its private fields are not copied by
 * JSON or structured clone), that also holds the span behind it and the context its children start
 * in (made on the first child, once per parent rather than once per child).
 */
class SpanParent implements TraceParent {
  readonly traceId: string;
  readonly spanId: string;
  readonly flags: number;
  declare readonly state?: string;
  readonly #span: Span;
  #context: Context | undefined;

  constructor(span: Span) {
    const c = span.spanContext();
    this.traceId = c.traceId;
    this.spanId = c.spanId;
    this.flags = c.traceFlags;
    const state = c.traceState?.serialize();
    if (state) (this as { state?: string }).state = state;
    this.#span = span;
  }

  get span(): Span {
    return this.#span;
  }

  get context(): Context {
    this.#context ??= trace.setSpan(ROOT_CONTEXT, this.#span);
    return this.#context;
  }
}

const contextOf = (p: TraceParent): Context =>
  p instanceof SpanParent ? p.context : trace.setSpanContext(ROOT_CONTEXT, spanContext(p));
const linkTo = (p: TraceParent): Link => ({
  context: p instanceof SpanParent ? p.span.spanContext() : spanContext(p),
});

export function loadSdk(settings: TracingSettings): {
  factory: SpanFactory;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
} {
  // OTEL_RESOURCE_ATTRIBUTES too; OTEL_SERVICE_NAME (default "modelport") wins over its service.name.
  const resource = defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes({ "service.name": settings.serviceName, "service.version": VERSION }));
  const worker = new ExportWorker({
    resource: resource.attributes,
    scope: { name: "modelport", version: VERSION },
  });
  const provider = new BasicTracerProvider({
    resource,
    sampler: sampler(settings),
    spanProcessors: [new OtlpSpanProcessor(settings.batch, worker)],
  });
  const tracer = provider.getTracer("modelport", VERSION);
  const factory: SpanFactory = {
    start(name: string, kind: SpanKind, parent, attributes: Attributes | undefined, links, startTime) {
      const span = tracer.startSpan(
        name,
        { kind, links: links?.map(linkTo), startTime },
        parent ? contextOf(parent) : ROOT_CONTEXT,
      );
      // Set on the span rather than passed to startSpan, which sanitizes them twice over for the
      // sampler: none of the samplers above reads attributes.
      if (attributes !== undefined) span.setAttributes(attributes);
      return span;
    },
    parentOf: (span: Span): TraceParent => new SpanParent(span),
    annotate(parent: TraceParent, key: string, value: number): void {
      if (parent instanceof SpanParent) parent.span.setAttribute(key, value);
    },
  };
  return { factory, flush: () => provider.forceFlush(), shutdown: () => provider.shutdown() };
}
