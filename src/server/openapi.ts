// Builds the OpenAPI 3.1 document from the models actually served, so each model's predict
// and infer operations show its real input names, datatypes and shapes; every other route comes
// from the one-line-per-route table in openapi-routes.ts.
import type { ServedModel } from "../catalogue/served-model.js";
import type { Datatype, TensorSpec } from "../tensor.js";
import { managementPaths } from "./openapi-management.js";
import { openaiPaths } from "./openapi-openai.js";
import { addRouteTable } from "./openapi-routes.js";
import { sharedMemoryPaths } from "./openapi-shared-memory.js";

type Schema = Record<string, unknown>;

function elementSchema(datatype: Datatype): Schema {
  switch (datatype) {
    case "BOOL":
      return { type: "boolean" };
    case "BYTES":
      return { type: "string" };
    case "FP16":
    case "FP32":
    case "FP64":
      return { type: "number" };
    default:
      return { type: "integer" };
  }
}

/** Nested-array schema for a tensor of `shape` (dims after `from`); -1 dims are unbounded. */
function nestedSchema(spec: TensorSpec, from: number): Schema {
  const shape = spec.shape ?? [];
  let schema: Schema = elementSchema(spec.datatype);
  for (let i = shape.length - 1; i >= from; i--) {
    const d = shape[i]!;
    schema = { type: "array", items: schema, ...(d >= 0 ? { minItems: d, maxItems: d } : {}) };
  }
  return schema;
}

function describeSpec(s: TensorSpec): string {
  return `${s.datatype} [${(s.shape ?? []).join(", ")}]${s.description ? ` — ${s.description}` : ""}`;
}

function predictRequest(host: ServedModel): Schema {
  const sig = host.signature;
  if (!sig) return { type: "object", description: "model not loaded; its schema is unknown" };
  const inputs: Schema = {
    type: "object",
    required: sig.inputs.map((s) => s.name),
    additionalProperties: false,
    properties: Object.fromEntries(
      sig.inputs.map((s) => [s.name, { ...nestedSchema(s, 0), description: describeSpec(s) }]),
    ),
  };
  const variants: Schema[] = [
    {
      type: "object",
      required: ["inputs"],
      properties: { inputs, outputs: { type: "array", items: { type: "string" } } },
    },
  ];
  if (sig.batchable) {
    const row =
      sig.inputs.length === 1
        ? nestedSchema(sig.inputs[0]!, 1)
        : {
            type: "object",
            required: sig.inputs.map((s) => s.name),
            properties: Object.fromEntries(sig.inputs.map((s) => [s.name, nestedSchema(s, 1)])),
          };
    variants.unshift({
      type: "object",
      required: ["rows"],
      properties: {
        rows: { type: "array", minItems: 1, maxItems: host.config.limits.maxBatchRows, items: row },
      },
    });
  }
  return { oneOf: variants };
}

const errorRef = { $ref: "#/components/schemas/Error" };

/** The OpenAPI document for this server's models (and the shared-memory routes where they are on). */
export function buildOpenApi(
  hosts: ServedModel[],
  version: string,
  languageModels: readonly ServedModel[] = [],
  sharedMemory = false,
): Schema {
  const paths: Record<string, Schema> = {
    ...openaiPaths(languageModels),
    ...managementPaths(),
    ...(sharedMemory ? sharedMemoryPaths() : {}),
  };
  for (const host of hosts) {
    const name = host.config.name;
    const sig = host.signature;
    paths[`/v1/models/${name}/predict`] = {
      post: {
        summary: `Score rows with ${name}`,
        description: [
          host.config.description ?? "",
          `Inputs: ${(sig?.inputs ?? []).map((s) => `${s.name} ${describeSpec(s)}`).join("; ") || "unknown until loaded"}.`,
          `Outputs: ${(sig?.outputs ?? []).map((s) => `${s.name} ${describeSpec(s)}`).join("; ") || "unknown until loaded"}.`,
        ].join(" "),
        requestBody: { required: true, content: { "application/json": { schema: predictRequest(host) } } },
        responses: {
          200: {
            description: "named outputs",
            content: { "application/json": { schema: { type: "object" } } },
          },
          400: { description: "bad input", content: { "application/json": { schema: errorRef } } },
          503: { description: "model not ready", content: { "application/json": { schema: errorRef } } },
        },
      },
    };
    paths[`/v2/models/${name}/infer`] = {
      post: {
        summary: `Open Inference Protocol infer on ${name}`,
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: ["inputs"],
                properties: {
                  id: { type: "string" },
                  inputs: {
                    type: "array",
                    items: {
                      oneOf: (sig?.inputs ?? []).map((s) => ({
                        type: "object",
                        required: ["name", "shape", "datatype"],
                        properties: {
                          name: { const: s.name },
                          datatype: { const: s.datatype },
                          shape: {
                            type: "array",
                            items: { type: "integer" },
                            description: `[${(s.shape ?? []).join(", ")}]`,
                          },
                          data: { type: "array" },
                          parameters: {
                            type: "object",
                            description:
                              "instead of data: shared_memory_region and shared_memory_byte_size (+ shared_memory_offset) where the server runs with --shared-memory",
                          },
                        },
                        anyOf: [{ required: ["data"] }, { required: ["parameters"] }],
                      })),
                    },
                  },
                },
              },
            },
          },
        },
        responses: { 200: { description: "outputs" }, 400: { description: "bad input" } },
      },
    };
  }
  addRouteTable(paths, { sharedMemory });
  return {
    openapi: "3.1.0",
    info: { title: "modelport", version, description: "Models served by this modelport instance." },
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      schemas: {
        Error: {
          type: "object",
          properties: {
            error: {
              type: "object",
              properties: {
                code: { type: "string" },
                message: { type: "string" },
                retryable: { type: "boolean" },
              },
            },
          },
        },
      },
    },
    paths,
  };
}
