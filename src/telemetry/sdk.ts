// The OpenTelemetry SDK behind spans.ts, loaded by tracing.ts (a dynamic import) only when
// tracing is on: a tracer provider with the sampler the environment names, a batch span
// processor (OTEL_BSP_* apply) and the OTLP/HTTP protobuf exporter, which reads the endpoint,
// headers, timeout and compression from OTEL_EXPORTER_OTLP_* itself.
import {
  type Attributes,
  createTraceState,
  type Link,
  ROOT_CONTEXT,
  type SpanContext,
  type SpanKind,
  trace,
} from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
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
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import { VERSION } from "../version.js";
import type { TraceParent } from "./propagation.js";
import type { TracingSettings } from "./settings.js";
import type { SpanFactory } from "./spans.js";

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
  return {
    traceId: p.traceId,
    spanId: p.spanId,
    traceFlags: p.flags,
    isRemote: p.remote === true,
    ...(p.state !== undefined ? { traceState: createTraceState(p.state) } : {}),
  };
}

export function loadSdk(settings: TracingSettings): {
  factory: SpanFactory;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
} {
  const provider = new BasicTracerProvider({
    // OTEL_RESOURCE_ATTRIBUTES too; OTEL_SERVICE_NAME (default "modelport") wins over its service.name.
    resource: defaultResource()
      .merge(detectResources({ detectors: [envDetector] }))
      .merge(resourceFromAttributes({ "service.name": settings.serviceName, "service.version": VERSION })),
    sampler: sampler(settings),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  const tracer = provider.getTracer("modelport", VERSION);
  const factory: SpanFactory = {
    start(name: string, kind: SpanKind, parent, attributes: Attributes | undefined, links) {
      const context = parent ? trace.setSpanContext(ROOT_CONTEXT, spanContext(parent)) : ROOT_CONTEXT;
      const linked: Link[] | undefined = links?.map((l) => ({ context: spanContext(l) }));
      return tracer.startSpan(
        name,
        { kind, ...(attributes ? { attributes } : {}), ...(linked ? { links: linked } : {}) },
        context,
      );
    },
  };
  return { factory, flush: () => provider.forceFlush(), shutdown: () => provider.shutdown() };
}
