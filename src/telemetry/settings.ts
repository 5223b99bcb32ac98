// Whether this process traces, and how, read from the standard OTEL_* environment variables
// (docs/Tracing.md). Tracing is on only when asked for: OTEL_TRACES_EXPORTER=otlp, or an OTLP
// endpoint set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with
// OTEL_TRACES_EXPORTER unset; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off.
import { ModelportError } from "../errors.js";

export type SamplerName =
  | "always_on"
  | "always_off"
  | "traceidratio"
  | "parentbased_always_on"
  | "parentbased_always_off"
  | "parentbased_traceidratio";

export const SAMPLERS: readonly SamplerName[] = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
];

export interface TracingSettings {
  serviceName: string;
  sampler: SamplerName;
  /** The ratio of the *traceidratio samplers, 0..1. */
  ratio: number;
  /** MODELPORT_TRACE_STAGE_MS: decode, queue and encode shorter than this are attributes, not spans. */
  stageMs: number;
  batch: BatchSettings;
  limits: SpanLimits;
}

/**
 * OTEL_SPAN_* and OTEL_ATTRIBUTE_* limits on what one span keeps (span.ts), with the SDK's
 * defaults: beyond a count the rest is dropped and counted; strings are cut to the value length.
 */
export interface SpanLimits {
  /** OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, else OTEL_ATTRIBUTE_COUNT_LIMIT (128). */
  attributeCount: number;
  /** OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, else OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT (no limit). */
  attributeValueLength: number;
  /** OTEL_SPAN_EVENT_COUNT_LIMIT (128): past it the oldest event goes. */
  eventCount: number;
  /** OTEL_SPAN_LINK_COUNT_LIMIT (128): past it the oldest link goes. */
  linkCount: number;
  /** OTEL_SPAN_ATTRIBUTE_PER_EVENT_COUNT_LIMIT (128). */
  attributePerEvent: number;
  /** OTEL_SPAN_ATTRIBUTE_PER_LINK_COUNT_LIMIT (128). */
  attributePerLink: number;
}

/** OTEL_BSP_*: how finished spans are batched for export (span-processor.ts). */
export interface BatchSettings {
  /** OTEL_BSP_MAX_QUEUE_SIZE: spans waiting for export beyond this are dropped. */
  maxQueueSize: number;
  /** OTEL_BSP_MAX_EXPORT_BATCH_SIZE: spans per export, at most maxQueueSize. */
  maxExportBatchSize: number;
  /** OTEL_BSP_SCHEDULE_DELAY: ms a batch that is not full waits before it is exported. */
  scheduledDelayMillis: number;
  /** OTEL_BSP_EXPORT_TIMEOUT: ms after which an export is given up and the next one starts. */
  exportTimeoutMillis: number;
}

/** The default of MODELPORT_TRACE_STAGE_MS (docs/Tracing.md, "What is traced"). */
export const DEFAULT_STAGE_MS = 10;

export type Env = Readonly<Record<string, string | undefined>>;

function invalid(message: string): ModelportError {
  return new ModelportError("MP_ERR_CONFIG_INVALID", `${message} (docs/Tracing.md)`);
}

/**
 * The tracing settings the environment asks for, or undefined when tracing is off.
 * @throws ModelportError MP_ERR_CONFIG_INVALID for an exporter, protocol or sampler this server
 * does not have, or a number out of range.
 */
export function tracingSettings(env: Env = process.env): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? "")
    .split(",")
    .map((e) => e.trim().toLowerCase())
    .filter((e) => e !== "");
  const endpoint = Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT);
  if (exporters.length === 0 ? !endpoint : exporters.every((e) => e === "none")) return undefined;
  const other = exporters.filter((e) => e !== "otlp" && e !== "none");
  if (other.length > 0)
    throw invalid(
      `OTEL_TRACES_EXPORTER=${env.OTEL_TRACES_EXPORTER}: modelport exports traces over OTLP only ("otlp" or "none")`,
    );
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL;
  if (protocol !== undefined && protocol.trim() !== "http/protobuf")
    throw invalid(`OTLP protocol ${JSON.stringify(protocol)}: modelport sends OTLP over http/protobuf only`);
  const sampler = (env.OTEL_TRACES_SAMPLER?.trim().toLowerCase() || "parentbased_always_on") as SamplerName;
  if (!SAMPLERS.includes(sampler))
    throw invalid(`OTEL_TRACES_SAMPLER=${env.OTEL_TRACES_SAMPLER}: one of ${SAMPLERS.join(", ")}`);
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  const ratio = arg ? Number(arg) : 1;
  if (!(ratio >= 0 && ratio <= 1))
    throw invalid(`OTEL_TRACES_SAMPLER_ARG=${arg}: a sampling ratio from 0 to 1`);
  const stageArg = env.MODELPORT_TRACE_STAGE_MS?.trim();
  const stageMs = stageArg ? Number(stageArg) : DEFAULT_STAGE_MS;
  if (!(stageMs >= 0))
    throw invalid(`MODELPORT_TRACE_STAGE_MS=${stageArg}: milliseconds, 0 or more (0: always a span)`);
  const whole = (name: string, fallback: number, min: number): number => {
    const raw = env[name]?.trim();
    if (!raw) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) throw invalid(`${name}=${raw}: a whole number, ${min} or more`);
    return n;
  };
  // The OpenTelemetry SDK's defaults for its batch span processor.
  const maxQueueSize = whole("OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1);
  const batch: BatchSettings = {
    maxQueueSize,
    maxExportBatchSize: Math.min(whole("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1), maxQueueSize),
    scheduledDelayMillis: whole("OTEL_BSP_SCHEDULE_DELAY", 5000, 0),
    exportTimeoutMillis: whole("OTEL_BSP_EXPORT_TIMEOUT", 30_000, 1),
  };
  const count = (name: string, fallback: number): number => whole(name, fallback, 0);
  const attributeCount = count("OTEL_ATTRIBUTE_COUNT_LIMIT", 128);
  const attributeValueLength = count("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", Number.POSITIVE_INFINITY);
  const limits: SpanLimits = {
    attributeCount: count("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", attributeCount),
    // 0, like no value, means no limit (as in the SDK).
    attributeValueLength:
      count("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", attributeValueLength) || Number.POSITIVE_INFINITY,
    eventCount: count("OTEL_SPAN_EVENT_COUNT_LIMIT", 128),
    linkCount: count("OTEL_SPAN_LINK_COUNT_LIMIT", 128),
    attributePerEvent: count("OTEL_SPAN_ATTRIBUTE_PER_EVENT_COUNT_LIMIT", 128),
    attributePerLink: count("OTEL_SPAN_ATTRIBUTE_PER_LINK_COUNT_LIMIT", 128),
  };
  return {
    serviceName: env.OTEL_SERVICE_NAME?.trim() || "modelport",
    sampler,
    ratio,
    stageMs,
    batch,
    limits,
  };
}
