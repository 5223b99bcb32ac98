// The management routes (docs/Models-over-time.md) in the OpenAPI document: admin keys only. On
// an API tier each call reaches every runner and the answer adds `runners: [{runner, status}]`.
type Schema = Record<string, unknown>;

const modelParam = { name: "model", in: "path", required: true, schema: { type: "string" } };
const errors = {
  401: { description: "no API key" },
  403: { description: "not an admin key (MP_ERR_ADMIN_REQUIRED)" },
  404: { description: "no such model or version" },
  503: {
    description:
      "API tier: a runner could not be reached (MP_ERR_RUNNER_UNAVAILABLE); the answer names the runners that applied the change",
  },
};

/** One POST operation; `on.withModel`: the path has {model}; `on.schema`: its JSON body. */
function op(
  summary: string,
  on: { withModel?: boolean; schema?: Schema },
  ok: string,
  extra: Schema = {},
): Schema {
  return {
    post: {
      summary,
      tags: ["management"],
      security: [{ bearer: [] }],
      parameters: on.withModel ? [modelParam] : [],
      ...(on.schema ? { requestBody: { content: { "application/json": { schema: on.schema } } } } : {}),
      responses: { 200: { description: ok }, ...errors, ...extra },
    },
  };
}

export function managementPaths(): Record<string, Schema> {
  const refused = {
    409: {
      description:
        "the version failed its checks (MP_ERR_MODEL_VERSION_REFUSED); the one serving before still serves",
    },
  };
  return {
    "/v2/repository/index": op(
      "Every model and version with its state (Open Inference Protocol repository extension)",
      { schema: { type: "object", properties: { ready: { type: "boolean" } } } },
      '[{"name", "version", "state": "READY" | "LOADING" | "UNAVAILABLE", "reason"}]',
    ),
    "/v2/repository/models/{model}/load": op(
      "Load or reload {model}: a repository model's new and changed versions load and swap in once checked",
      { withModel: true },
      "{} once the model settled",
      refused,
    ),
    "/v2/repository/models/{model}/unload": op(
      "Unload every version of {model} once its calls finish",
      { withModel: true },
      "{}",
    ),
    "/v1/models/{model}/promote": op(
      "Make a version of {model} take its unversioned traffic (loaded and checked first if need be)",
      {
        withModel: true,
        schema: { type: "object", required: ["version"], properties: { version: { type: "string" } } },
      },
      "the model's description",
      refused,
    ),
    "/v1/models/{model}/rollback": op(
      "Swap {model} back to the version that served before the current one",
      { withModel: true },
      '{"from", "to", "model"}',
    ),
    "/v1/models/{model}/weights": op(
      "Split {model}'s unversioned calls between loaded versions by weight (a canary); null ends it",
      {
        withModel: true,
        schema: {
          type: "object",
          required: ["weights"],
          properties: {
            weights: { type: ["object", "null"], additionalProperties: { type: "number", minimum: 0 } },
          },
        },
      },
      "the model's description, with `traffic`",
    ),
    "/v1/models/{model}/shadow": op(
      "Copy a sample of {model}'s live predict calls to a version and compare its answers; version null stops it",
      {
        withModel: true,
        schema: {
          type: "object",
          required: ["version"],
          properties: {
            version: { type: ["string", "null"] },
            sample: { type: "number", exclusiveMinimum: 0, maximum: 1 },
            tolerance: { type: "number", minimum: 0 },
          },
        },
      },
      "the model's description, with `traffic.shadow`",
    ),
  };
}
