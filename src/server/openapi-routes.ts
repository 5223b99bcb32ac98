// Every route the server registers, one line each, for /openapi.json: a route without a
// detailed operation elsewhere (openapi.ts per model, openapi-openai.ts, openapi-management.ts,
// openapi-shared-memory.ts) is documented from its line here. A NEW ROUTE MUST BE ADDED HERE:
// test/integration/openapi-routes.test.ts compares this document with the router's routes.
type Schema = Record<string, unknown>;

export type RouteMethod = "get" | "post" | "put" | "delete" | "patch";

/**
 * [method, path with {params}, summary (a docs/ page for the details), and optionally the option
 * without which the route only refuses (then it is left out of the document)].
 */
export const ROUTES: readonly (
  | readonly [RouteMethod, string, string]
  | readonly [RouteMethod, string, string, "sharedMemory"]
)[] = [
  // Probes and the server itself (docs/API.md)
  ["get", "/livez", "Liveness probe"],
  ["get", "/readyz", "Readiness probe: 503 with reasons until every model passed its golden check"],
  ["get", "/metrics", "Prometheus metrics"],
  ["get", "/openapi.json", "This document"],
  ["get", "/docs", "The API documentation page for this document"],
  ["get", "/ui", "The dashboard (docs/Dashboard.md)"],
  [
    "get",
    "/v1/usage",
    "Usage and cost per API key and model for a period: ?from=&to= (ISO 8601 or ms), &group_by=key,model,hour,day (docs/Multi-tenant.md)",
  ],
  // Native models (docs/API.md)
  ["get", "/v1/models", "List served models with status"],
  ["get", "/v1/models/{model}", "One model: status, inputs, outputs, versions"],
  ["post", "/v1/models/{model}/predict", "Score rows or named tensors with a model"],
  ["post", "/v1/models/{model}/versions/{version}/predict", "Score with one version of a model"],
  // Jobs (docs/Jobs.md)
  ["post", "/v1/models/{model}/jobs", "Submit a job: 202 with its id (Idempotency-Key, callback_url)"],
  ["get", "/v1/jobs", "List jobs: ?model=&status=&limit=&cursor="],
  ["get", "/v1/jobs/ws", "WebSocket: follow jobs' events (subscribe / unsubscribe messages)"],
  ["get", "/v1/jobs/{id}", "A job's status (?wait=N long-polls until it ends)"],
  ["delete", "/v1/jobs/{id}", "Cancel a queued or running job"],
  ["get", "/v1/jobs/{id}/result", "A succeeded job's result (or a redirect to its blob)"],
  ["post", "/v1/jobs/{id}/retry", "Queue a failed or canceled job again (409 for other states)"],
  ["get", "/v1/jobs/{id}/events", "Server-sent events of a job until it ends"],
  // Open Inference Protocol (docs/API.md)
  ["get", "/v2", "Server metadata"],
  ["get", "/v2/health/live", "Liveness"],
  ["get", "/v2/health/ready", "Readiness"],
  ["get", "/v2/models/{model}", "Model metadata"],
  ["get", "/v2/models/{model}/ready", "Model readiness"],
  ["post", "/v2/models/{model}/infer", "Infer"],
  ["get", "/v2/models/{model}/versions/{version}", "Model version metadata"],
  ["get", "/v2/models/{model}/versions/{version}/ready", "Model version readiness"],
  ["post", "/v2/models/{model}/versions/{version}/infer", "Infer on one version"],
  // Shared memory (docs/API.md, "Shared memory"): MP_ERR_SHARED_MEMORY_DISABLED unless it is on
  ["get", "/v2/systemsharedmemory/status", "Registered shared memory regions", "sharedMemory"],
  [
    "post",
    "/v2/systemsharedmemory/unregister",
    "Unregister every region of the caller's key",
    "sharedMemory",
  ],
  ["get", "/v2/systemsharedmemory/region/{region}/status", "One shared memory region", "sharedMemory"],
  [
    "post",
    "/v2/systemsharedmemory/region/{region}/register",
    "Register a shared memory region",
    "sharedMemory",
  ],
  [
    "post",
    "/v2/systemsharedmemory/region/{region}/unregister",
    "Unregister a shared memory region",
    "sharedMemory",
  ],
  // Management (docs/Models-over-time.md)
  ["post", "/v2/repository/index", "Model repository index"],
  ["post", "/v2/repository/models/{model}/load", "Load or reload a model"],
  ["post", "/v2/repository/models/{model}/unload", "Unload a model"],
  ["post", "/v1/models/{model}/promote", "Promote a version"],
  ["post", "/v1/models/{model}/rollback", "Roll back to the previous version"],
  ["post", "/v1/models/{model}/weights", "Set traffic weights between versions"],
  ["post", "/v1/models/{model}/shadow", "Mirror traffic to a shadow version"],
  // OpenAI-compatible (docs/LLM.md)
  ["post", "/v1/chat/completions", "OpenAI chat completions"],
  ["post", "/v1/completions", "OpenAI completions"],
  ["post", "/v1/embeddings", "OpenAI embeddings"],
  // The Responses API (docs/LLM.md#the-responses-api)
  ["post", "/v1/responses", "OpenAI Responses: create a response (stream: true for typed events)"],
  ["get", "/v1/responses/{id}", "A stored response of this key"],
  ["delete", "/v1/responses/{id}", "Delete a stored response"],
  ["get", "/v1/responses/{id}/input_items", "A stored response's input items"],
  // Files and batches (docs/Batch.md)
  ["post", "/v1/files", "Upload a batch input file (multipart/form-data: purpose=batch, file)"],
  ["get", "/v1/files", "List this key's files"],
  ["get", "/v1/files/{id}", "A file's record"],
  ["get", "/v1/files/{id}/content", "A file's bytes (JSONL)"],
  ["delete", "/v1/files/{id}", "Delete a file"],
  ["post", "/v1/batches", "Create a batch: each line of its input file runs as a job"],
  ["get", "/v1/batches", "List this key's batches, newest first: ?after=&limit="],
  ["get", "/v1/batches/{id}", "A batch: status, request counts, output and error files"],
  ["post", "/v1/batches/{id}/cancel", "Cancel a batch"],
];

/** Adds an operation from ROUTES for each route `paths` does not describe yet. */
export function addRouteTable(paths: Record<string, Schema>, on: { sharedMemory: boolean }): void {
  for (const [method, path, summary, needs] of ROUTES) {
    if (needs && !on[needs]) continue;
    paths[path] ??= {};
    const item = paths[path];
    if (item[method]) continue;
    const parameters = [...path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: { type: "string" },
    }));
    item[method] = {
      summary,
      ...(parameters.length ? { parameters } : {}),
      responses: { 200: { description: "OK" } },
    };
  }
}
