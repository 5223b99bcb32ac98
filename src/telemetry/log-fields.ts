// trace_id and span_id on a request's log lines, added only to lines that are written. Fastify
// gives each request a pino child logger; binding the ids to it (pino's setBindings) serializes
// them at once, ~0.8 µs per request on this machine even when the level writes no line of it.
// Instead the request's logger holds its trace parent under TRACE_LOG, and modelport's loggers
// carry `traceLogFields` as their pino mixin, which reads it when a line is written (child loggers
// inherit both). A logger made elsewhere (one passed to buildApp) gets them bound as before.
import { type Logger, pino } from "pino";
import type { TraceParent } from "./propagation.js";

/** The request logger's trace parent (its server span's ids). */
const TRACE_LOG = Symbol("modelport.traceLog");

/** What the mixin returns for a logger without a trace: merged into nothing (see below). */
const NONE = Object.freeze({});

/** pino's `mixin`: a request logger's trace ids, when it has them. */
function traceLogFields(_merge: object, _level: number, logger: Logger): object {
  const p = (logger as Logger & { [TRACE_LOG]?: TraceParent })[TRACE_LOG];
  return p === undefined ? NONE : { trace_id: p.traceId, span_id: p.spanId };
}

/** pino's `mixinMergeStrategy`: as its default (the line's own fields win), without a copy for NONE. */
function mergeTraceFields(merge: object, mixed: object): object {
  return mixed === NONE ? merge : Object.assign(mixed, merge);
}

/** The pino options that give a logger trace ids on its request lines. */
export const TRACE_LOG_OPTIONS = {
  mixin: traceLogFields,
  mixinMergeStrategy: mergeTraceFields,
} as const;

/** What a request's logger needs here: pino's, or any logger with child(). */
interface RequestLogger<L> {
  child(bindings: Record<string, string>): L;
  setBindings?(bindings: Record<string, string>): void;
}

/**
 * Puts `trace`'s ids on the lines `log` writes (`log` is a request's own child logger) and returns
 * the logger to use from then on: `log` itself when it is one of modelport's (the mixin writes
 * them) or another pino logger (bound with setBindings), else a child logger with them.
 */
export function withTrace<L extends RequestLogger<L>>(log: L, trace: TraceParent): L {
  const fields = log as unknown as Record<symbol, unknown>;
  if (fields[pino.symbols.mixinSym] === traceLogFields) {
    fields[TRACE_LOG] = trace;
    return log;
  }
  const bindings = { trace_id: trace.traceId, span_id: trace.spanId };
  if (typeof log.setBindings === "function") {
    log.setBindings(bindings);
    return log;
  }
  return log.child(bindings);
}
