// The management routes on the API tier (docs/Models-over-time.md#across-tiers): the API tier
// holds no models, so each call is sent to every runner with the caller's own credentials, and
// the answer says what each runner did. Success only when every runner applied it; otherwise
// the first refusal's status and error, with every runner's outcome beside it. The repository
// index is the runners' indexes merged: a version is READY only when every runner listing it
// has it ready. What is sent and how the answers combine follow the route the call matched,
// never its URL as spelled (`/v2/repository/%69ndex` is the index too).
import type { FastifyReply, FastifyRequest } from "fastify";
import type { IndexEntry } from "../../catalogue/catalogue.js";
import { ModelportError } from "../../errors.js";
import type { BroadcastAnswer, RunnerPool } from "../../runner/remote/runner-pool.js";

/** A management call may load a large model on every runner. */
const MANAGEMENT_TIMEOUT_MS = 10 * 60_000;

const INDEX_ROUTE = "/v2/repository/index";

/** The path of the route `req` matched, its parameters filled in: what each runner is sent. */
function routePath(req: FastifyRequest): string {
  const params = req.params as Record<string, string | undefined>;
  return (req.routeOptions.url ?? "").replace(/:([A-Za-z0-9_]+)/g, (_, name: string) =>
    encodeURIComponent(params[name] ?? ""),
  );
}

/** Sends the request to every runner and answers with their outcome. */
export async function toEveryRunner(
  pool: RunnerPool,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<unknown> {
  if (pool.all().length === 0)
    throw new ModelportError(
      "MP_ERR_RUNNER_UNAVAILABLE",
      "no runners are known to this API tier; retry shortly",
      {
        retryAfterSeconds: 1,
      },
    );
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (req.headers.authorization) headers.authorization = req.headers.authorization;
  const body = Buffer.from(JSON.stringify(req.body ?? {}));
  const answers = await pool.broadcast("POST", routePath(req), body, headers, MANAGEMENT_TIMEOUT_MS);
  if (req.routeOptions.url === INDEX_ROUTE) return mergeIndexes(answers);
  const outcome = answers.map((a) => ({
    runner: a.runner,
    status: a.status,
    ...(a.error ? { error: a.error } : {}),
  }));
  const unreachable = answers.filter((a) => a.status === 0);
  const refused = answers.find((a) => a.status >= 300);
  if (refused) {
    // The runner's own error (in this route family's shape), and what every runner did.
    const parsed = parse(refused.body);
    const out =
      parsed && typeof parsed === "object" && !Array.isArray(parsed)
        ? parsed
        : { error: `HTTP ${refused.status}` };
    return reply.code(refused.status).send({ ...out, runners: outcome });
  }
  if (unreachable.length) {
    const applied = answers.filter((a) => a.status !== 0).map((a) => a.runner);
    throw new ModelportError(
      "MP_ERR_RUNNER_UNAVAILABLE",
      `not every runner could be reached: ${unreachable.map((a) => `${a.runner} (${a.error})`).join(", ")}; applied on ${applied.join(", ") || "none"}; repeat the call once they answer`,
      { retryAfterSeconds: 1 },
    );
  }
  const first = parse(answers[0]!.body);
  return { ...(first && typeof first === "object" && !Array.isArray(first) ? first : {}), runners: outcome };
}

function parse(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}

/**
 * The runners' repository indexes as one: per name and version, READY only when ready on every
 * runner listing it; the reason names the runners where it is not ready or not listed.
 */
function mergeIndexes(answers: BroadcastAnswer[]): IndexEntry[] {
  const rows = new Map<string, { entry: IndexEntry; notes: string[]; on: Set<string> }>();
  const answered: string[] = [];
  for (const a of answers) {
    const list = a.status === 200 ? parse(a.body) : undefined;
    if (!Array.isArray(list)) continue;
    answered.push(a.runner);
    for (const e of list as IndexEntry[]) {
      if (typeof e?.name !== "string") continue;
      const key = `${e.name}\0${e.version ?? ""}`;
      let row = rows.get(key);
      if (!row) {
        row = { entry: { ...e, state: "READY", reason: "" }, notes: [], on: new Set() };
        rows.set(key, row);
      }
      row.on.add(a.runner);
      if (e.state === "READY") continue;
      // The least ready state wins: UNAVAILABLE over LOADING over READY.
      if (row.entry.state !== "UNAVAILABLE") row.entry.state = e.state;
      row.notes.push(`${a.runner}: ${e.reason || e.state}`);
    }
  }
  return [...rows.values()].map(({ entry, notes, on }) => {
    const missing = answered.filter((r) => !on.has(r)).map((r) => `${r}: not listed`);
    return { ...entry, reason: [...notes, ...missing].join("; ") };
  });
}
