// Shadow traffic (docs/Models-over-time.md#shadow-and-canary): a sample of a model's live predict
// calls is copied to a candidate version, whose answers are compared with the live ones and
// discarded. The live call never waits for the shadow: the copy runs as background work behind
// every synchronous request, at most MAX_IN_FLIGHT at once (beyond that a sample is skipped and
// counted), and a shadow failure only counts.
import type { Logger } from "pino";
import type { Metrics } from "../metrics/metrics.js";
import type { Tensor, TensorData, TensorMap } from "../tensor.js";
import type { ShadowSpec, ShadowStatus } from "./served-model.js";

/** The shadow version's predict (a ServedModel's), while it is loaded. */
type Predict = (inputs: TensorMap, options: { background: boolean; deadline: number }) => Promise<TensorMap>;

/** Shadow calls in flight at once per model; more samples are skipped. */
export const MAX_SHADOW_IN_FLIGHT = 32;
/** At most one disagreement log line per this many ms. */
const LOG_EVERY_MS = 1000;

/** How two answers differ: the largest absolute difference, and the first output that disagrees. */
export function compareOutputs(
  live: TensorMap,
  shadow: TensorMap,
  tolerance: number,
): { maxAbsDiff: number; disagree?: string } {
  let maxAbsDiff = 0;
  let disagree: string | undefined;
  for (const [name, a] of Object.entries(live)) {
    const b = shadow[name];
    const why = b ? tensorDifference(a, b) : "missing from the shadow's answer";
    if (typeof why === "string") {
      disagree ??= `${name}: ${why}`;
      continue;
    }
    maxAbsDiff = Math.max(maxAbsDiff, why);
    if (why > tolerance) disagree ??= `${name}: differs by ${why}`;
  }
  return disagree ? { maxAbsDiff, disagree } : { maxAbsDiff };
}

/** The largest absolute element difference, or why the tensors cannot be compared. */
function tensorDifference(a: Tensor, b: Tensor): number | string {
  if (a.datatype !== b.datatype) return `datatype ${b.datatype} instead of ${a.datatype}`;
  if (a.shape.join() !== b.shape.join()) return `shape [${b.shape}] instead of [${a.shape}]`;
  const x = a.data as ArrayLike<unknown>;
  const y = b.data as ArrayLike<unknown>;
  let max = 0;
  for (let i = 0; i < x.length; i++) {
    const u = x[i];
    const v = y[i];
    if (typeof u === "number" && typeof v === "number") {
      const d = Math.abs(u - v);
      if (d > max || Number.isNaN(d)) max = Number.isNaN(d) ? Number.POSITIVE_INFINITY : d;
    } else if (typeof u === "bigint" && typeof v === "bigint") {
      const d = Math.abs(Number(u - v));
      if (d > max) max = d;
    } else if (String(u) !== String(v)) return `element ${i} differs`;
  }
  return max;
}

/** A deep copy of a call's inputs: the live call's runner may take (transfer) their buffers. */
export function copyInputs(inputs: TensorMap): TensorMap {
  const out: TensorMap = {};
  for (const [name, t] of Object.entries(inputs)) {
    out[name] = {
      datatype: t.datatype,
      shape: [...t.shape],
      data: (t.data as { slice(): TensorData }).slice(),
    };
  }
  return out;
}

export class Shadow {
  private inFlight = 0;
  private compared = 0;
  private disagreed = 0;
  private failed = 0;
  private skipped = 0;
  private maxAbsDiff = 0;
  private lastLog = 0;

  constructor(
    readonly spec: ShadowSpec,
    private readonly model: string,
    private readonly target: () => Predict | undefined,
    private readonly log: Logger,
    private readonly metrics: Metrics | undefined,
  ) {}

  /** Whether to copy this call (sampled; false while too many shadow calls are in flight). */
  wants(): boolean {
    if (Math.random() >= this.spec.sample) return false;
    if (this.inFlight >= MAX_SHADOW_IN_FLIGHT) {
      this.count("skipped");
      return false;
    }
    return true;
  }

  /** Sends `inputs` (a copy) to the shadow version and compares its answer with `live`'s. */
  mirror(live: Promise<TensorMap>, inputs: TensorMap, timeoutMs: number): void {
    const predict = this.target();
    if (!predict) {
      this.count("failed");
      return;
    }
    this.inFlight++;
    const shadow = predict(inputs, { background: true, deadline: performance.now() + timeoutMs });
    void Promise.allSettled([live, shadow]).then(([l, s]) => {
      this.inFlight--;
      if (l.status === "rejected" || s.status === "rejected") {
        this.count("failed");
        return;
      }
      const diff = compareOutputs(l.value, s.value, this.spec.tolerance);
      this.maxAbsDiff = Math.max(this.maxAbsDiff, diff.maxAbsDiff);
      this.metrics?.shadowMaxAbsDiff.set(this.labels(), this.maxAbsDiff);
      this.count(diff.disagree ? "disagree" : "agree");
      if (diff.disagree && Date.now() - this.lastLog >= LOG_EVERY_MS) {
        this.lastLog = Date.now();
        this.log.warn(
          { model: this.model, shadowVersion: this.spec.version, maxAbsDiff: diff.maxAbsDiff },
          `${this.model}: shadow version ${this.spec.version} disagrees (${diff.disagree}); ${this.disagreed} of ${this.compared} so far`,
        );
      }
    });
  }

  status(): ShadowStatus {
    return {
      ...this.spec,
      compared: this.compared,
      disagreed: this.disagreed,
      failed: this.failed,
      skipped: this.skipped,
      maxAbsDiff: this.maxAbsDiff,
      disagreementRate: this.compared ? this.disagreed / this.compared : 0,
    };
  }

  /** Removes its metric series (when shadowing stops). */
  forget(): void {
    for (const result of ["agree", "disagree", "failed", "skipped"])
      this.metrics?.shadowComparisons.remove({ ...this.labels(), result });
    this.metrics?.shadowMaxAbsDiff.remove(this.labels());
  }

  private labels() {
    return { model: this.model, version: this.spec.version };
  }

  private count(result: "agree" | "disagree" | "failed" | "skipped"): void {
    if (result === "agree" || result === "disagree") this.compared++;
    if (result === "disagree") this.disagreed++;
    if (result === "failed") this.failed++;
    if (result === "skipped") this.skipped++;
    this.metrics?.shadowComparisons.inc({ ...this.labels(), result });
  }
}
