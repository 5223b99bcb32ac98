// The OpenAI-compatible routes in the OpenAPI document and on /docs: which language models each
// route takes (by capability), the request fields modelport reads, and a curl example per model.

import type { ServedModel } from "../catalogue/served-model.js";

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

const sampling = {
  max_tokens: { type: "integer", minimum: 1 },
  max_completion_tokens: { type: "integer", minimum: 1, description: "max_tokens' newer name; wins over it" },
  temperature: { type: "number", minimum: 0, maximum: 2, description: "0 (default): greedy, deterministic" },
  top_p: { type: "number", minimum: 0, maximum: 1 },
  seed: { type: "integer" },
  logit_bias: { type: "object", additionalProperties: { type: "number", minimum: -100, maximum: 100 } },
  frequency_penalty: { type: "number", minimum: -2, maximum: 2 },
  presence_penalty: { type: "number", minimum: -2, maximum: 2 },
  stop: {
    oneOf: [{ type: "string" }, { type: "array", items: { type: "string" }, maxItems: 16 }],
    description: "at most llm.maxStops (default 16) strings",
  },
  stream: { type: "boolean", description: "Server-Sent Events: data: {chunk} lines, then data: [DONE]" },
  stream_options: { type: "object", properties: { include_usage: { type: "boolean" } } },
};

const tool = {
  type: "object",
  required: ["type", "function"],
  properties: {
    type: { const: "function" },
    function: {
      type: "object",
      required: ["name"],
      properties: {
        name: { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" },
        description: { type: "string" },
        parameters: { type: "object", description: "a JSON Schema (docs/LLM.md: what a grammar enforces)" },
      },
    },
  },
};

const toolCall = {
  type: "object",
  required: ["id", "function"],
  properties: {
    id: { type: "string" },
    type: { const: "function" },
    function: {
      type: "object",
      properties: { name: { type: "string" }, arguments: { type: "string", description: "JSON text" } },
    },
  },
};

function route(summary: string, models: string[], properties: Schema, required: string[]): Schema {
  return {
    post: {
      summary,
      requestBody: {
        required: true,
        content: {
          "application/json": {
            schema: {
              type: "object",
              required: ["model", ...required],
              properties: { model: { type: "string", enum: models }, ...properties },
            },
          },
        },
      },
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

/** OpenAPI paths for the OpenAI routes; a route no served model can answer is left out. */
export function openaiPaths(models: readonly ServedModel[]): Record<string, Schema> {
  const names = (cap: "chat" | "completion" | "embeddings") =>
    models.filter((m) => m.capabilities[cap]).map((m) => m.name);
  const paths: Record<string, Schema> = {};
  const chat = names("chat");
  if (chat.length) {
    paths["/v1/chat/completions"] = route(
      "OpenAI-compatible chat",
      chat,
      {
        messages: {
          type: "array",
          minItems: 1,
          items: {
            type: "object",
            required: ["role"],
            properties: {
              role: { enum: ["system", "developer", "user", "assistant", "tool"] },
              content: {
                oneOf: [
                  { type: "string" },
                  { type: "null" },
                  {
                    type: "array",
                    items: {
                      type: "object",
                      properties: { type: { const: "text" }, text: { type: "string" } },
                    },
                  },
                ],
              },
              tool_calls: { type: "array", items: toolCall, description: "assistant: the calls it made" },
              tool_call_id: { type: "string", description: "tool: the call this message answers" },
            },
          },
        },
        ...sampling,
        tools: { type: "array", maxItems: 128, items: tool },
        tool_choice: {
          oneOf: [
            { enum: ["auto", "none", "required"] },
            {
              type: "object",
              properties: {
                type: { const: "function" },
                function: { type: "object", properties: { name: { type: "string" } } },
              },
            },
          ],
        },
        parallel_tool_calls: { type: "boolean" },
        n: { type: "integer", minimum: 1, description: "choices; at most llm.maxChoices (8)" },
        logprobs: { type: "boolean" },
        top_logprobs: { type: "integer", minimum: 0, maximum: 20 },
        response_format: {
          type: "object",
          description: "json_object / json_schema answers are generated under a grammar (docs/LLM.md)",
          properties: {
            type: { enum: ["text", "json_object", "json_schema"] },
            json_schema: {
              type: "object",
              required: ["name"],
              properties: {
                name: { type: "string" },
                schema: { type: "object" },
                strict: { type: "boolean" },
              },
            },
          },
        },
      },
      ["messages"],
    );
  }
  const completion = names("completion");
  if (completion.length) {
    paths["/v1/completions"] = route(
      "OpenAI-compatible completion",
      completion,
      {
        prompt: {
          oneOf: [
            { type: "string" },
            { type: "array", items: { type: "string" } },
            { type: "array", items: { type: "integer", minimum: 0 } },
            { type: "array", items: { type: "array", items: { type: "integer", minimum: 0 } } },
          ],
        },
        n: {
          type: "integer",
          minimum: 1,
          description: "choices per prompt; prompts × n at most llm.maxChoices (8)",
        },
        echo: { type: "boolean" },
        logprobs: { type: "integer", minimum: 0, maximum: 5 },
        ...sampling,
      },
      ["prompt"],
    );
  }
  const embeddings = names("embeddings");
  if (embeddings.length) {
    paths["/v1/embeddings"] = route(
      "OpenAI-compatible embeddings",
      embeddings,
      {
        input: { oneOf: [{ type: "string" }, { type: "array", items: { type: "string" }, minItems: 1 }] },
        encoding_format: { enum: ["float", "base64"] },
      },
      ["input"],
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
