// Who can see what (docs/Multi-tenant.md, "Who can see what"): for one caller, whether it sees
// the whole server or only its own part of it. A server without keys has no tenants and shows
// everything; admin and metrics keys see everything; a client key sees the models it may use
// (all of them when it lists none) and no other key, exactly as if the rest did not exist.
import type { Principal } from "./principal.js";
import { mayUse } from "./tenants.js";

/** The labels of one metric series. */
export type SeriesLabels = Readonly<Record<string, string | number | undefined>>;

/** True when `principal` sees the whole server: a server without required keys, an admin or a metrics key. */
export function seesAll(principal: Principal | undefined, keysRequired: boolean): boolean {
  return !keysRequired || principal?.role === "admin" || principal?.role === "metrics";
}

/**
 * The model names `principal` may hear of: undefined when every one (seesAll), else a predicate.
 * A caller without a valid key on a server with keys hears of none.
 */
export function visibleModels(
  principal: Principal | undefined,
  keysRequired: boolean,
): ((name: string) => boolean) | undefined {
  if (seesAll(principal, keysRequired)) return undefined;
  if (principal === undefined) return () => false;
  return (name) => mayUse(principal, name);
}

/**
 * The metric series `principal` may read: undefined when every one (seesAll), else a predicate.
 * A client key reads a series only when it has a `key` or a `model` label, its `key` label (if
 * any) is the key's own name and its `model` label (if any) names a model the key may use; a
 * series with neither label, another key's or another model's, or `model=""`, is not its own.
 */
export function visibleSeries(
  principal: Principal | undefined,
  keysRequired: boolean,
): ((labels: SeriesLabels) => boolean) | undefined {
  if (seesAll(principal, keysRequired)) return undefined;
  if (principal === undefined) return () => false;
  return (labels) => {
    const { key, model } = labels;
    if (key === undefined && model === undefined) return false;
    if (key !== undefined && String(key) !== principal.name) return false;
    return model === undefined || (model !== "" && mayUse(principal, String(model)));
  };
}
