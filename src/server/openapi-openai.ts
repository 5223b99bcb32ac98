// The OpenAI-compatible routes in the OpenAPI document and on /docs: which language models each
// route takes (by capability), the request body (from the zod schema that validates it,
// openai-schemas.ts), and a curl example per model.

import type { ServedModel } from "../catalogue/served-model.js";
import {
  bodyJsonSchema,
  chatRequestSchema,
  completionRequestSchema,
  embeddingsRequestSchema,
} from "./openai-schemas.js";
import { responsesRequestSchema } from "./responses-schema.js";

type Schema = Record<string, unknown>;

const openaiError = {
  type: "object",
  properties: {
    error: {
      type: "object",
      properties: {
        message: { type: "string" },
        type: { type: "string" },
        param: { type: ["string", "null"] },
        code: { type: "string", description: "an MP_ERR_* code (docs/Errors.md)" },
      },
    },
  },
};

/** A route whose body is `body` (a JSON Schema object), its `model` limited to `models`. */
function route(summary: string, models: string[], body: Schema): Schema {
  const properties = body.properties as Record<string, Schema>;
  const schema = { ...body, properties: { ...properties, model: { type: "string", enum: models } } };
  return {
    post: {
      summary,
      requestBody: { required: true, content: { "application/json": { schema } } },
      responses: {
        200: { description: "OpenAI-shaped answer (text/event-stream when stream is true)" },
        400: { description: "bad request", content: { "application/json": { schema: openaiError } } },
        404: { description: "no such model", content: { "application/json": { schema: openaiError } } },
        503: {
          description: "model not ready or overloaded (Retry-After)",
          content: { "application/json": { schema: openaiError } },
        },
      },
    },
  };
}

const notFound = {
  description: "no stored response with that id for this key (MP_ERR_RESPONSE_NOT_FOUND)",
  content: { "application/json": { schema: openaiError } },
};
const idParam = [
  { name: "id", in: "path", required: true, schema: { type: "string", pattern: "^resp_[0-9a-f]{32}$" } },
];

/** GET and DELETE of a stored response. */
const storedResponse: Record<string, Schema> = {
  get: {
    summary: "A stored response, as POST /v1/responses answered it",
    parameters: idParam,
    responses: { 200: { description: "the response object" }, 404: notFound },
  },
  delete: {
    summary: "Deletes a stored response",
    parameters: idParam,
    responses: { 200: { description: '{id, object: "response", deleted: true}' }, 404: notFound },
  },
};

/** OpenAPI paths for the OpenAI routes; a route no served model can answer is left out. */
export function openaiPaths(models: readonly ServedModel[]): Record<string, Schema> {
  const names = (cap: "chat" | "completion" | "embeddings") =>
    models.filter((m) => m.capabilities[cap]).map((m) => m.name);
  const paths: Record<string, Schema> = {};
  const chat = names("chat");
  if (chat.length) {
    paths["/v1/chat/completions"] = route("OpenAI-compatible chat", chat, bodyJsonSchema(chatRequestSchema));
  }
  if (chat.length) {
    paths["/v1/responses"] = route(
      "OpenAI Responses API (stored responses: GET and DELETE /v1/responses/{id})",
      chat,
      bodyJsonSchema(responsesRequestSchema),
    );
    paths["/v1/responses/{id}"] = storedResponse;
    paths["/v1/responses/{id}/input_items"] = {
      get: { ...storedResponse.get, summary: "The input items of a stored response (OpenAI's list)" },
    };
  }
  const completion = names("completion");
  if (completion.length) {
    paths["/v1/completions"] = route(
      "OpenAI-compatible completion",
      completion,
      bodyJsonSchema(completionRequestSchema),
    );
  }
  const embeddings = names("embeddings");
  if (embeddings.length) {
    paths["/v1/embeddings"] = route(
      "OpenAI-compatible embeddings",
      embeddings,
      bodyJsonSchema(embeddingsRequestSchema),
    );
  }
  return paths;
}

/** A curl command for the first route the model answers. */
export function openaiExample(model: ServedModel, origin: string): string {
  const c = model.capabilities;
  const [path, body] = c.chat
    ? [
        "/v1/chat/completions",
        { model: model.name, messages: [{ role: "user", content: "Hello" }], max_tokens: 16, stream: true },
      ]
    : c.embeddings
      ? ["/v1/embeddings", { model: model.name, input: ["a text to embed"] }]
      : ["/v1/completions", { model: model.name, prompt: "Once upon a time", max_tokens: 16 }];
  return `curl -sN ${origin}${path} \\\n  -H 'content-type: application/json' \\\n  -d '${JSON.stringify(body)}'`;
}
