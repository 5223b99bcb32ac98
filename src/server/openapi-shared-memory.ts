// The shared-memory extension's registry routes in the OpenAPI document, where the server runs
// with it (docs/API.md#shared-memory).
type Schema = Record<string, unknown>;

const region = { name: "region", in: "path", required: true, schema: { type: "string", maxLength: 100 } };
const refused = {
  400: { description: "MP_ERR_SHARED_MEMORY_* or MP_ERR_REQUEST_INVALID" },
  401: { description: "no API key" },
};

function status(summary: string, parameters: Schema[]): Schema {
  return {
    get: {
      summary,
      tags: ["shared memory"],
      parameters,
      responses: { 200: { description: '[{"name", "key", "offset", "byte_size"}]' }, ...refused },
    },
  };
}

function unregister(summary: string, parameters: Schema[]): Schema {
  return {
    post: {
      summary,
      tags: ["shared memory"],
      parameters,
      responses: { 200: { description: "empty" }, ...refused },
    },
  };
}

export function sharedMemoryPaths(): Record<string, Schema> {
  return {
    "/v2/systemsharedmemory/status": status("The caller's shared memory regions", []),
    "/v2/systemsharedmemory/region/{region}/status": status("One of the caller's regions", [region]),
    "/v2/systemsharedmemory/region/{region}/register": {
      post: {
        summary: "Register byte_size bytes at offset of /dev/shm/KEY as region {region}",
        tags: ["shared memory"],
        parameters: [region],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: ["key", "byte_size"],
                properties: {
                  key: { type: "string", description: "'/' then the object's name in /dev/shm" },
                  offset: { type: "integer", minimum: 0 },
                  byte_size: { type: "integer", minimum: 1 },
                },
              },
            },
          },
        },
        responses: {
          200: { description: "empty" },
          ...refused,
          409: { description: "MP_ERR_SHARED_MEMORY_REGION_EXISTS or MP_ERR_SHARED_MEMORY_LIMIT" },
        },
      },
    },
    "/v2/systemsharedmemory/unregister": unregister("Unregister every region of the caller", []),
    "/v2/systemsharedmemory/region/{region}/unregister": unregister(
      "Unregister one of the caller's regions",
      [region],
    ),
  };
}
