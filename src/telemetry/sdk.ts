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
  // The span behind each parent made by parentOf(), and the context its children start in (made
  // on the first child, once per parent rather than once per child).
  const spans = new WeakMap<TraceParent, Span>();
  const contexts = new WeakMap<TraceParent, Context>();
  const contextOf = (parent: TraceParent): Context => {
    let c = contexts.get(parent);
    if (c === undefined) {
      const span = spans.get(parent);
      c = span ? trace.setSpan(ROOT_CONTEXT, span) : trace.setSpanContext(ROOT_CONTEXT, spanContext(parent));
      contexts.set(parent, c);
    }
    return c;
  };
  const factory: SpanFactory = {
    start(name: string, kind: SpanKind, parent, attributes: Attributes | undefined, links, startTime) {
      const linked: Link[] | undefined = links?.map((l) => ({ context: spanContext(l) }));
      return tracer.startSpan(
        name,
        {
          kind,
          ...(attributes ? { attributes } : {}),
          ...(linked ? { links: linked } : {}),
          ...(startTime !== undefined ? { startTime } : {}),
        },
        parent ? contextOf(parent) : ROOT_CONTEXT,
      );
    },
    parentOf(span: Span): TraceParent {
      const c = span.spanContext();
      const state = c.traceState?.serialize();
      const parent: TraceParent = {
        traceId: c.traceId,
        spanId: c.spanId,
        flags: c.traceFlags,
        ...(state ? { state } : {}),
      };
      spans.set(parent, span);
      return parent;
    },
    annotate(parent: TraceParent, key: string, value: number): void {
      spans.get(parent)?.setAttribute(key, value);
    },
  };
  return { factory, flush: () => provider.forceFlush(), shutdown: () => provider.shutdown() };
}
