// GET /v1/usage?from=&to=&group_by=key,model: what each key used, for any period (by the hour),
// from the usage store every process of the deployment writes to. Admin keys see every key; a
// client key sees its own usage only.
import type { FastifyPluginAsync } from "fastify";
import { ModelportError } from "../../errors.js";
import { HOUR_MS, type UsageGroup } from "../../tenants/usage-store.js";

const GROUPS: readonly UsageGroup[] = ["key", "model", "hour", "day"];
const MAX_RANGE_MS = 400 * 24 * HOUR_MS;
const DEFAULT_RANGE_MS = 30 * 24 * HOUR_MS;

/** The latest time a Date can hold, less the hour the period may widen by. */
const MAX_TIME_MS = 8.64e15 - HOUR_MS;

/**
 * An ISO 8601 time or ms since epoch, from 1970 to what a Date can hold. (A parameter given twice
 * never gets here: plugins/query.ts refuses it on every route.)
 */
function time(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined || text === "") return fallback;
  const t = /^\d+$/.test(text) ? Number(text) : Date.parse(text);
  if (!(t >= 0 && t <= MAX_TIME_MS)) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `${name} must be an ISO 8601 time or ms since epoch, from 1970 on`,
      { param: name },
    );
  }
  return t;
}

export const usageRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.get<{
    Querystring: { from?: string; to?: string; group_by?: string };
  }>("/v1/usage", async (req) => {
    const recorder = ctx.usage;
    if (!recorder) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        "usage per key is recorded on a server with keys (--keys FILE or --api-key); this one has none",
      );
    }
    const to = time("to", req.query.to, Date.now());
    const from = time("from", req.query.from, to - DEFAULT_RANGE_MS);
    if (from >= to || to - from > MAX_RANGE_MS) {
      throw new ModelportError("MP_ERR_REQUEST_INVALID", "from must be before to, at most 400 days apart", {
        param: "from",
      });
    }
    const groupBy = (req.query.group_by ?? "key,model").split(",").filter(Boolean) as UsageGroup[];
    const unknown = groupBy.find((g) => !GROUPS.includes(g));
    if (unknown !== undefined) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `group_by takes ${GROUPS.join(", ")} (comma-separated), not '${unknown}'`,
        { param: "group_by" },
      );
    }
    // Whole hours: usage is kept per hour, so the period widens to the hours it touches.
    const start = from - (from % HOUR_MS);
    const end = to % HOUR_MS === 0 ? to : to - (to % HOUR_MS) + HOUR_MS;
    const principal = req.principal;
    const only = principal && principal.role !== "admin" ? principal.name : undefined;
    const groups = await recorder.query(start, end, groupBy, only);
    return {
      from: new Date(start).toISOString(),
      to: new Date(end).toISOString(),
      group_by: groupBy,
      data: groups.map(({ promptTokens, completionTokens, computeMs, dollars, ...g }) => ({
        ...g,
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        compute_ms: Math.round(computeMs * 1000) / 1000,
        dollars,
      })),
    };
  });
};
