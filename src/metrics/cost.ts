// What a request costs, so a user can compare self-hosting with a hosted API. Local models
// (tensor models and embedding models behind a batcher, llama.cpp models) cost machine time: a
// batch's time is shared among its rows, a generation's is its sequence's share of the model's
// busy time (src/llm/busy-time-split.ts), and time × the configured machine-hour price is the
// bill. Tokens cost the per-million prices where they are set (upstream models: only those).
// Work run as a job is counted at the model's batchPriceFactor. requestCost() is the one price
// function; totals go to Prometheus (modelport_cost_*) and to each model's stats; `modelport
// cost` reads them back.
import type { FastCounter } from "./fast-metrics.js";

/** Prices from config; absent ones count as 0 (time and tokens are still measured). */
export interface Prices {
  /** Dollars per machine-hour, for local models. */
  readonly pricePerHour?: number | undefined;
  /** Dollars per million prompt tokens (upstream and language models; adds to the time's price). */
  readonly pricePerMillionInputTokens?: number | undefined;
  /** Dollars per million completion tokens (upstream and language models). */
  readonly pricePerMillionOutputTokens?: number | undefined;
  /** What work run as a job (in the background) pays, as a fraction of the price (absent: 1). */
  readonly batchPriceFactor?: number | undefined;
}

/** Only the price fields of a model's config (what its stats show as `prices`). */
export function pricesOf(c: Prices): Prices {
  const out: {
    pricePerHour?: number;
    pricePerMillionInputTokens?: number;
    pricePerMillionOutputTokens?: number;
    batchPriceFactor?: number;
  } = {};
  if (c.pricePerHour !== undefined) out.pricePerHour = c.pricePerHour;
  if (c.pricePerMillionInputTokens !== undefined)
    out.pricePerMillionInputTokens = c.pricePerMillionInputTokens;
  if (c.pricePerMillionOutputTokens !== undefined)
    out.pricePerMillionOutputTokens = c.pricePerMillionOutputTokens;
  if (c.batchPriceFactor !== undefined) out.batchPriceFactor = c.batchPriceFactor;
  return Object.freeze(out);
}

/** What one request (or one batch's share, or one job attempt) used, to be priced. */
export interface Used {
  readonly inputTokens?: number;
  readonly outputTokens?: number;
  /** Machine time, ms (local models); an upstream's wall time is not priced. */
  readonly ms?: number;
  /** Run as a job: priced at batchPriceFactor. */
  readonly background?: boolean;
}

const MS_PER_HOUR = 3_600_000;

/** Dollars for `ms` of machine time at `pricePerHour`. */
export function timeCost(ms: number, pricePerHour = 0): number {
  return (ms / MS_PER_HOUR) * pricePerHour;
}

/** Dollars for a request's tokens at per-million prices. */
export function tokenCost(inputTokens: number, outputTokens: number, prices: Prices): number {
  return (
    (inputTokens * (prices.pricePerMillionInputTokens ?? 0) +
      outputTokens * (prices.pricePerMillionOutputTokens ?? 0)) /
    1_000_000
  );
}

/**
 * The dollars of what a request used: machine time × pricePerHour plus tokens × per-million
 * prices (both add up when both are set), × batchPriceFactor for background work. Every figure
 * of cost (the model's meter, usage per key, jobs) is priced here.
 */
export function requestCost(prices: Prices, used: Used): number {
  const dollars =
    timeCost(used.ms ?? 0, prices.pricePerHour) +
    tokenCost(used.inputTokens ?? 0, used.outputTokens ?? 0, prices);
  return used.background && prices.batchPriceFactor !== undefined
    ? dollars * prices.batchPriceFactor
    : dollars;
}

/**
 * Splits one batch's time among its requests in proportion to their rows.
 * @returns milliseconds per request, in the order of `rowsPerRequest`.
 */
export function shareBatchTime(ms: number, rowsPerRequest: readonly number[]): number[] {
  const rows = rowsPerRequest.reduce((a, b) => a + b, 0);
  return rowsPerRequest.map((r) => (rows > 0 ? (ms * r) / rows : 0));
}

/** A model's totals and the figures derived from them. */
export interface CostSnapshot {
  requests: number;
  computeMs: number;
  inputTokens: number;
  outputTokens: number;
  dollars: number;
  /** Dollars per 1,000 requests (0 before the first request). */
  costPer1000Requests: number;
  computeMsPerRequest: number;
  prices: Prices;
}

/** Derived figures from totals; shared by the meter and `modelport cost` (which reads /metrics). */
export function summarize(
  totals: {
    requests: number;
    computeMs: number;
    dollars: number;
    inputTokens?: number;
    outputTokens?: number;
  },
  prices: Prices = {},
): CostSnapshot {
  const per = (x: number) => (totals.requests > 0 ? x / totals.requests : 0);
  return {
    requests: totals.requests,
    computeMs: totals.computeMs,
    inputTokens: totals.inputTokens ?? 0,
    outputTokens: totals.outputTokens ?? 0,
    dollars: totals.dollars,
    costPer1000Requests: per(totals.dollars) * 1000,
    computeMsPerRequest: per(totals.computeMs),
    prices,
  };
}

/** The Prometheus counters a meter feeds (Metrics.cost*); absent in tests without metrics. */
export interface CostCounters {
  readonly dollars: FastCounter<"model">;
  readonly computeSeconds: FastCounter<"model">;
  readonly requests: FastCounter<"model">;
  readonly tokens: FastCounter<"model" | "kind">;
}

/** One model's running cost. Cheap on the hot path: a few additions per batch. */
export class CostMeter {
  private requests = 0;
  private computeMs = 0;
  private inputTokens = 0;
  private outputTokens = 0;
  private dollars = 0;
  private readonly counters:
    | {
        dollars: { inc(v: number): void };
        compute: { inc(v: number): void };
        requests: { inc(v: number): void };
      }
    | undefined;
  private readonly tokenCounters:
    | { input: { inc(v: number): void }; output: { inc(v: number): void } }
    | undefined;

  constructor(
    readonly model: string,
    readonly prices: Prices,
    counters?: CostCounters,
  ) {
    if (counters) {
      const labels = { model };
      this.counters = {
        dollars: counters.dollars.labels(labels),
        compute: counters.computeSeconds.labels(labels),
        requests: counters.requests.labels(labels),
      };
      this.tokenCounters = {
        input: counters.tokens.labels({ model, kind: "input" }),
        output: counters.tokens.labels({ model, kind: "output" }),
      };
      // Zero-valued series exist from the start, so `modelport cost` lists an idle model too.
      this.counters.dollars.inc(0);
      this.counters.compute.inc(0);
      this.counters.requests.inc(0);
    }
  }

  /** A local batch: `ms` of machine time for `requests` requests (the time is theirs in total). */
  batch(requests: number, ms: number): void {
    const dollars = requestCost(this.prices, { ms });
    this.requests += requests;
    this.computeMs += ms;
    this.dollars += dollars;
    if (this.counters) {
      this.counters.requests.inc(requests);
      this.counters.compute.inc(ms / 1000);
      this.counters.dollars.inc(dollars);
    }
  }

  /**
   * One request with tokens: an upstream's (its wall time as "compute", not priced: an upstream
   * has no pricePerHour) or a generation's (its share of the machine time). `background`: a job's.
   */
  tokens(inputTokens: number, outputTokens: number, ms = 0, background = false): void {
    const dollars = requestCost(this.prices, { inputTokens, outputTokens, ms, background });
    this.requests += 1;
    this.computeMs += ms;
    this.inputTokens += inputTokens;
    this.outputTokens += outputTokens;
    this.dollars += dollars;
    if (this.counters) {
      this.counters.requests.inc(1);
      this.counters.compute.inc(ms / 1000);
      this.counters.dollars.inc(dollars);
    }
    this.tokenCounters?.input.inc(inputTokens);
    this.tokenCounters?.output.inc(outputTokens);
  }

  /**
   * Counts tokens of batched requests (embeddings), whose time the batches count: priced at the
   * per-million prices where they are set.
   */
  countTokens(inputTokens: number, outputTokens = 0): void {
    const dollars = tokenCost(inputTokens, outputTokens, this.prices);
    this.inputTokens += inputTokens;
    this.outputTokens += outputTokens;
    if (dollars > 0) {
      this.dollars += dollars;
      this.counters?.dollars.inc(dollars);
    }
    this.tokenCounters?.input.inc(inputTokens);
    this.tokenCounters?.output.inc(outputTokens);
  }

  snapshot(): CostSnapshot {
    return summarize(
      {
        requests: this.requests,
        computeMs: this.computeMs,
        dollars: this.dollars,
        inputTokens: this.inputTokens,
        outputTokens: this.outputTokens,
      },
      this.prices,
    );
  }
}
