// Fuzzes the management routes of a real `modelport serve` deployment (docs/Models-over-time.md):
// the repository extension (index, load, unload) and promote, rollback, weights and shadow, on a
// repository model and a config model, with hostile names, bodies and content types; then
// sequences of actions while predict calls run, each answer checked against the version that
// computed it, and the model brought back by a load. Loopback callers may manage a server with no
// keys, as this one is. management.test.ts runs it on one process; management-tiers.test.ts on an
// API tier in front of a runner, where every call goes on to the runner and the answer must say
// what the runner did.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { tempRepository, writeModelSettings, writeScaleVersion } from "../helpers/repository.js";
import { edgeString, encode, type Json, mutated, mutatedText, wellFormed } from "./arbitraries.js";
import {
  type Answer,
  check,
  checkAnswer,
  postJson,
  type Share,
  send,
  styleOf,
  useFuzzServer,
} from "./harness.js";

/** The repository model: version v answers y = K[v]·x. */
const K: Record<string, number> = { "1": 2, "2": 3 };

async function warm(url: string): Promise<void> {
  await postJson(url, "/v2/repository/index", {});
  await postJson(url, "/v1/models/scale/predict", { rows: [[1]] });
  await postJson(url, "/v1/models/scale/weights", { weights: null });
}

const ACTIONS = ["index", "load", "unload", "promote", "rollback", "weights", "shadow"] as const;
type Action = (typeof ACTIONS)[number];

function pathOf(action: Action, model: string): string {
  if (action === "index") return "/v2/repository/index";
  if (action === "load" || action === "unload") return `/v2/repository/models/${model}/${action}`;
  return `/v1/models/${model}/${action}`;
}

/** Bodies each action accepts, with versions that exist and some that do not. */
const version = fc.oneof(
  fc.constantFrom<Json>("1", "2", 1, 2, "3", "01", "0", "-1", "1.0", ""),
  fc.integer({ min: -5, max: 5 }),
);
const validBody: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>({}, { ready: true }, { ready: false }, { parameters: { unload_dependents: true } }),
  fc.record({ version }),
  fc.record({
    weights: fc.oneof(
      fc.constant<Json>(null),
      fc.dictionary(
        fc.constantFrom("1", "2", "3", "x"),
        fc.oneof(fc.integer({ min: 0, max: 100 }), fc.constantFrom(0.5, 1e308, -1, 0)),
        { minKeys: 1, maxKeys: 3 },
      ),
    ),
  }),
  fc.record(
    {
      version: fc.oneof(version, fc.constant<Json>(null)),
      sample: fc.constantFrom<Json>(1, 0.5, 0.001, 0, 2, -1),
      tolerance: fc.constantFrom<Json>(0, 1e-5, 1, -1, 1e308),
    },
    { requiredKeys: ["version"] },
  ),
);

/** A body as bytes on the wire: valid, mutated, text that is barely JSON, or past the 64 KiB limit. */
const wireBody: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: validBody.map((b) => encode(b)), weight: 3 },
  { arbitrary: mutated(validBody).map((b) => encode(b)), weight: 4 },
  { arbitrary: mutatedText(validBody), weight: 2 },
  { arbitrary: fc.constant(undefined), weight: 1 },
  {
    arbitrary: fc.integer({ min: 60_000, max: 70_000 }).map((n) => `{"version": "${"1".repeat(n)}"}`),
    weight: 1,
  },
);

const modelName = fc.oneof(
  { arbitrary: fc.constantFrom("scale", "tree", "nope", "SCALE", "scale@1", "scale@2"), weight: 6 },
  {
    arbitrary: fc.constantFrom(
      "..",
      "%2e%2e",
      "scale%2F1",
      "%00",
      "a%2F..%2Fscale",
      "%F2%B5%8D",
      "%ZZ",
      "x".repeat(200),
    ),
    weight: 2,
  },
  { arbitrary: edgeString.map((s) => encodeURIComponent(wellFormed(s))), weight: 1 },
);

const contentType = fc.constantFrom<string | undefined>(
  "application/json",
  "application/json",
  "application/json; charset=utf-8",
  "text/plain",
  "application/octet-stream",
  undefined,
  "application/json; charset=latin1",
);

/** A predict on the repository model: unversioned or pinned to a version. */
async function predict(url: string, pin: string | undefined): Promise<Answer> {
  const path = pin ? `/v1/models/scale/versions/${pin}/predict` : "/v1/models/scale/predict";
  return postJson(url, path, { rows: [[1]] });
}

/**
 * A predict's answer while the model is being managed: the factor of the version that says it
 * computed it, or the documented answer of a model unloaded (503 MP_ERR_MODEL_NOT_READY) or of a
 * version not loaded (404 MP_ERR_MODEL_VERSION_NOT_FOUND).
 */
function checkPredict(res: Answer, pin: string | undefined, what: string): void {
  if (res.status === 200) {
    const body = res.json as { model_version?: string; outputs?: { y?: number[][] } };
    const v = body.model_version;
    assert.ok(v !== undefined && v in K, `a version that exists: ${res.text}${what}`);
    if (pin) assert.equal(v, pin, `the pinned version answered${what}`);
    assert.equal(body.outputs?.y?.[0]?.[0], K[v], `version ${v}'s factor${what}`);
    return;
  }
  const code = (res.json as { error?: { code?: string } } | undefined)?.error?.code;
  if (res.status === 503)
    assert.equal(code, "MP_ERR_MODEL_NOT_READY", `503 only for an unloaded model${what}`);
  else {
    checkAnswer(res, "native", { what });
    assert.ok(
      code === "MP_ERR_MODEL_VERSION_NOT_FOUND" || code === "MP_ERR_MODEL_NOT_READY",
      `a predict on a managed model: ${res.status} ${code}${what}`,
    );
  }
}

/** Load the model back and clear any split and shadow: its highest version serves, both answer. */
async function restore(url: string, model: "scale" | "tree"): Promise<void> {
  const load = await postJson(url, `/v2/repository/models/${model}/load`, {});
  assert.equal(load.status, 200, `load ${model}: ${load.text}`);
  if (model === "tree") {
    const res = await postJson(url, "/v1/models/tree/predict", { rows: [[3, 95, 4, 1, 0, 20]] });
    assert.equal(res.status, 200, `tree serves again: ${res.text}`);
    return;
  }
  for (const action of ["weights", "shadow"] as const) {
    const body = action === "weights" ? { weights: null } : { version: null };
    const res = await postJson(url, `/v1/models/scale/${action}`, body);
    assert.equal(res.status, 200, `${action} cleared: ${res.text}`);
  }
  for (const pin of [undefined, undefined, "1", "2"]) {
    const res = await predict(url, pin);
    assert.equal(res.status, 200, `scale serves again (${pin ?? "unversioned"}): ${res.text}`);
    const v = (res.json as { model_version: string }).model_version;
    assert.equal(v, pin ?? "2", "after a load the highest version is current");
  }
}

/**
 * An action answered through an API tier: one the tier passed on carries `runners`, what each
 * runner answered (here one, the deployment's runner). A success only when every runner applied
 * it; a refusal with the status of a runner that refused, or the tier's own refusal (a body it
 * cannot read) with no `runners`. The index is the runners' lists merged, checked as a list.
 */
function checkTierOutcome(res: Answer, path: string, runner: string, what: string): void {
  if (path === "/v2/repository/index") return;
  const body = res.json as { runners?: { runner?: unknown; status?: unknown }[] } | undefined;
  const runners = body?.runners;
  const said = `${res.status} ${res.text.slice(0, 300)}${what}`;
  if (res.status < 300) {
    assert.ok(Array.isArray(runners), `a success says what each runner did: ${said}`);
    assert.deepEqual(
      runners.map((r) => [r.runner, typeof r.status === "number" && r.status < 300]),
      [[runner, true]],
      `applied on the one runner: ${said}`,
    );
  } else if (runners !== undefined) {
    assert.ok(
      Array.isArray(runners) && runners.some((r) => r.status === res.status),
      `a refusal with a runner's status: ${said}`,
    );
  }
}

/**
 * The management properties on a fresh deployment: one process, or (`tiers`) an API tier in front
 * of a runner that holds the models. Call it once, at a fuzz file's top level.
 */
export function managementSuite(tiers: boolean): void {
  const repo = tempRepository();
  writeModelSettings(repo, "scale", "versionPolicy: all\n");
  for (const [v, k] of Object.entries(K)) writeScaleVersion(repo, "scale", v, { k });
  after(() => rmSync(repo, { recursive: true, force: true }));
  const server = useFuzzServer({ warm, tiers, extra: [`repository: {dir: ${repo}}`] });
  const shares: Record<"hostile" | "sequence", Share> = tiers
    ? { hostile: "tiersManageHostile", sequence: "tiersManageSequence" }
    : { hostile: "manageHostile", sequence: "manageSequence" };
  /** The route's checks, and through an API tier what the runner did (checkTierOutcome). */
  const checkManaged = (res: Answer, path: string, what: string) => {
    checkAnswer(res, styleOf(path), { what });
    if (tiers) checkTierOutcome(res, path, server.runner, what);
  };

  describe("management routes", () => {
    it("hostile names, bodies and content types get a coded 4xx or 2xx, in the route's shape", async () => {
      await check(
        shares.hostile,
        fc.asyncProperty(
          fc.constantFrom(...ACTIONS),
          modelName,
          wireBody,
          contentType,
          fc.constantFrom("POST", "POST", "POST", "GET", "PUT"),
          async (action, name, body, type, method) => {
            // Another method than POST is 405 with Allow, in the route's shape (its path is served,
            // by POST), unless the router refuses the path first (a broken escape, a name too long):
            // so a plain name.
            const path = pathOf(action, method === "POST" ? name : "scale");
            const headers: Record<string, string> = type ? { "content-type": type } : {};
            // Node's client sends a GET's body with no length: the server would read it as the next request.
            const res = await send(server.url, method, path, {
              headers,
              body: method === "GET" ? undefined : body,
            });
            const what = `${method} ${path} ${type} ${(body ?? "").slice(0, 300)}`;
            if (method === "POST") checkManaged(res, path, what);
            // (A body the server cannot read is refused first, in the native shape, as before.)
            else checkAnswer(res, res.status === 405 ? styleOf(path) : "native", { what });
            if (res.status < 400 && method === "POST" && action === "index")
              assert.ok(Array.isArray(res.json), `the index is a list${what}`);
          },
        ),
      );
      // Whatever the fuzzer left behind, a load brings each model back.
      await restore(server.url, "scale");
      await restore(server.url, "tree");
    });

    it("actions in sequence while predicts run: every answer is its version's, and a load restores the model", async () => {
      await check(
        shares.sequence,
        fc.asyncProperty(
          fc.array(fc.tuple(fc.constantFrom(...ACTIONS), fc.oneof(validBody, mutated(validBody, 8))), {
            minLength: 1,
            maxLength: 6,
          }),
          fc.array(fc.constantFrom<string | undefined>(undefined, undefined, "1", "2", "3"), {
            minLength: 1,
            maxLength: 12,
          }),
          async (actions, pins) => {
            let managing = true;
            // Predicts run one after another, from before the first action until after the last.
            const calls = (async () => {
              let i = 0;
              do {
                const pin = pins[i++ % pins.length];
                checkPredict(
                  await predict(server.url, pin),
                  pin,
                  ` (pin ${pin}, during ${JSON.stringify(actions).slice(0, 400)})`,
                );
              } while (managing || i < pins.length);
            })();
            try {
              for (const [action, body] of actions) {
                const path = pathOf(action, "scale");
                const res = await postJson(server.url, path, body);
                checkManaged(res, path, `${path} ${encode(body).slice(0, 300)}`);
              }
            } finally {
              managing = false;
            }
            await calls;
            await restore(server.url, "scale");
          },
        ),
      );
    });

    server.finalCheck();
  });
}
