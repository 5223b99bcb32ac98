// The shared-memory extension's registry routes in the OpenAPI document, where the server runs
// with it (docs/API.md#shared-memory).
type Schema = Record<string, unknown>;

const region = { name: "region", in: "path", required: true, schema: { type: "string", maxLength: 100 } };
const refused = {
  400: { description: "MP_ERR_SHARED_MEMORY_* or MP_ERR_REQUEST_INVALID" },
  401: { description: "no API key" },
};

/** One operation of the registry: `ok` describes its 200 answer; `body` is its JSON body's schema. */
function op(
  method: "get" | "post",
  summary: string,
  parameters: Schema[],
  ok: string,
  body?: Schema,
  responses: Schema = {},
): Schema {
  return {
    [method]: {
      summary,
      tags: ["shared memory"],
      parameters,
      ...(body ? { requestBody: { required: true, content: { "application/json": { schema: body } } } } : {}),
      responses: { 200: { description: ok }, ...refused, ...responses },
    },
  };
}

const LIST = '[{"name", "key", "offset", "byte_size"}]';

export function sharedMemoryPaths(): Record<string, Schema> {
  return {
    "/v2/systemsharedmemory/status": op("get", "The caller's shared memory regions", [], LIST),
    "/v2/systemsharedmemory/region/{region}/status": op("get", "One of the caller's regions", [region], LIST),
    "/v2/systemsharedmemory/region/{region}/register": op(
      "post",
      "Register byte_size bytes at offset of /dev/shm/KEY as region {region}",
      [region],
      "empty",
      {
        type: "object",
        required: ["key", "byte_size"],
        properties: {
          key: { type: "string", description: "'/' then the object's name in /dev/shm" },
          offset: { type: "integer", minimum: 0 },
          byte_size: { type: "integer", minimum: 1 },
        },
      },
      { 409: { description: "MP_ERR_SHARED_MEMORY_REGION_EXISTS or MP_ERR_SHARED_MEMORY_LIMIT" } },
    ),
    "/v2/systemsharedmemory/unregister": op("post", "Unregister every region of the caller", [], "empty"),
    "/v2/systemsharedmemory/region/{region}/unregister": op(
      "post",
      "Unregister one of the caller's regions",
      [region],
      "empty",
    ),
  };
}
