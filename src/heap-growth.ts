// How far V8 lets the heap grow between full collections, set once when a serving process (or a
// model's child process) starts. V8 begins a mark-compact when the old generation plus the
// external memory allocated since the last one nears a limit of about 1.3–2× the live heap (plus
// the young generation). Tensors are external memory: a 4.9 MB input arrives as socket chunks and
// a body, the answer comes back from the model's thread, and on a server's ~20 MB heap that
// reaches the limit every call or two, each mark-compact taking 5–30 ms of the request thread's
// time (docs/PERFORMANCE.md). A factor of 5 leaves room for several such calls between
// collections, which young-generation collections free first; it applies to every isolate of
// the process, model threads included.
import v8 from "node:v8";

/** modelport's default: the old generation may reach 5× the live heap before a mark-compact. */
export const HEAP_GROWING_PERCENT = 400;

const HEAP_GROWING_ENV = "MODELPORT_HEAP_GROWING_PERCENT";

/**
 * The value to set: node's own `--heap-growing-percent` flag wins (nothing is set), then
 * MODELPORT_HEAP_GROWING_PERCENT (a whole number; 0 keeps V8's own choice), then the default.
 * @throws Error when the environment variable is not a whole number from 0 to 10,000.
 */
export function heapGrowingPercent(
  execArgv: readonly string[] = process.execArgv,
  env: NodeJS.ProcessEnv = process.env,
): number | undefined {
  if (execArgv.some((a) => /^--heap[-_]growing[-_]percent(=|$)/.test(a))) return undefined;
  const text = env[HEAP_GROWING_ENV];
  if (text === undefined || text === "") return HEAP_GROWING_PERCENT;
  const digits = text.trim();
  const n = /^\d{1,5}$/.test(digits) ? Number(digits) : Number.NaN;
  if (!(n <= 10_000)) {
    throw new Error(
      `${HEAP_GROWING_ENV} must be a whole number from 0 to 10000, got ${JSON.stringify(text)}`,
    );
  }
  return n;
}

/** Applies heapGrowingPercent() to this process; returns what was set (undefined: node's flag stands). */
export function applyHeapGrowth(): number | undefined {
  const percent = heapGrowingPercent();
  if (percent !== undefined) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return percent;
}
