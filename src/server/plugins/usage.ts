// Usage per key (tenants/usage.ts): once a request that used a model is answered, what it used
// (rows, tokens, compute, dollars at the model's prices) goes to its key's metrics and hourly sums.
import type { FastifyInstance } from "fastify";
import type { Catalogue } from "../../catalogue/catalogue.js";
import type { Config } from "../../config/schema.js";
import { pricesOf, requestCost } from "../../metrics/cost.js";
import type { Usage } from "../../tenants/usage.js";
import type { RequestUsage } from "../context.js";

/**
 * Dollars of one request or job on `model`, by the one price function (src/metrics/cost.ts):
 * machine time at pricePerHour (local models) plus tokens at per-million prices, × the model's
 * batchPriceFactor when `background` (a job).
 */
export function usageCost(
  catalogue: Catalogue,
  config: Config,
  model: string,
  used: Omit<RequestUsage, "model">,
  background = false,
): Usage {
  const c = catalogue.has(model) ? catalogue.get(model).config : undefined;
  const prices = c ? pricesOf(c) : { pricePerHour: config.server.pricePerHour };
  const dollars = requestCost(prices, {
    inputTokens: used.promptTokens,
    outputTokens: used.completionTokens,
    ms: used.computeMs,
    background,
  });
  return { ...used, requests: 1, dollars };
}

export function registerUsage(
  app: FastifyInstance,
  record: (key: string, model: string, used: Omit<RequestUsage, "model">) => void,
): void {
  const ctx = app.modelport;
  app.addHook("onResponse", (request, _reply, done) => {
    const used = request.usage;
    const principal = request.principal;
    // Only models served here are named (a metric label per random name would grow forever).
    if (used && principal && ctx.catalogue.has(used.model)) {
      const { model, ...figures } = used;
      record(principal.name, model, figures);
    }
    done();
  });
}
