// The bodies of the OpenAI-compatible routes (chat, completions, embeddings), one zod schema each: what every field may be. The
// schema validates a request (a wrong field is a 400 MP_ERR_REQUEST_INVALID naming it as
// `param`, as OpenAI does), types what the route reads, and is the route's request body in
// /openapi.json (z.toJSONSchema). Limits that depend on the model (llm.maxStops, maxMessages,
// maxChoices, the prompt's byte bound) and what only a backend can judge (whether a JSON Schema
// can be enforced) are checked after it, in openai-request.ts. Unknown fields are accepted (clients
// send `user`, `metadata`, `store`…).
import { type ZodType, z } from "zod";
import { ModelportError } from "../errors.js";

/** Model names are at most 128 characters (config); a longer one names nothing and is not echoed. */
const MAX_MODEL_NAME = 256;
/** Most tools one request may offer, and calls one message may carry. */
export const MAX_TOOLS = 128;
/** Most tokens one logit_bias may name. */
const MAX_BIASED_TOKENS = 1024;
/** Most token ids in one token-array prompt (far above any context; the model's check follows). */
const MAX_PROMPT_TOKENS = 1 << 20;

export const range = (min: number, max: number) =>
  z
    .number({ error: `must be a number from ${min} to ${max}` })
    .min(min, `must be a number from ${min} to ${max}`)
    .max(max, `must be a number from ${min} to ${max}`)
    .nullish();
export const count = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .int({ error: `must be an integer of at least ${min}` })
    .min(min, `must be an integer of at least ${min}`)
    .max(max, `must be at most ${max}`)
    .nullish();
export const flag = z.boolean({ error: "must be true or false" }).nullish();
export const functionName = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1 to 64 letters, digits, '_' or '-'");
/** A JSON Schema, as the client wrote it (a backend says whether it can enforce it). */
export const jsonSchema = z.record(z.string(), z.unknown(), { error: "must be a JSON Schema object" });

const textPart = z.looseObject({ type: z.literal("text"), text: z.string() });

const toolCall = z.looseObject(
  {
    id: z.string(),
    type: z.literal("function").optional(),
    function: z.looseObject({ name: z.string(), arguments: z.string() }),
  },
  { error: "must be {id, type: 'function', function: {name, arguments: JSON text}}" },
);

const message = z.looseObject({
  role: z.enum(["system", "user", "assistant", "developer", "tool"], {
    error: "must be one of system, user, assistant, developer, tool",
  }),
  content: z
    .union([z.string(), z.array(textPart)], {
      error: "must be a string or an array of text parts ({type: 'text', text})",
    })
    .nullish(),
  tool_calls: z.array(toolCall).max(MAX_TOOLS).nullish(),
  tool_call_id: z.string().optional(),
});

const tool = z.looseObject(
  {
    type: z.literal("function"),
    function: z.looseObject({
      name: functionName,
      description: z.string().optional(),
      parameters: jsonSchema.optional(),
    }),
  },
  { error: "must be {type: 'function', function: {name, description?, parameters?}}" },
);

const toolChoice = z.union(
  [
    z.enum(["auto", "none", "required"]),
    z.looseObject({ type: z.literal("function"), function: z.looseObject({ name: z.string() }) }),
  ],
  { error: "must be 'auto', 'none', 'required' or {type: 'function', function: {name}}" },
);

const responseFormat = z.discriminatedUnion(
  "type",
  [
    z.looseObject({ type: z.literal("text") }),
    z.looseObject({ type: z.literal("json_object") }),
    z.looseObject({
      type: z.literal("json_schema"),
      json_schema: z.looseObject(
        {
          name: z.string().min(1),
          schema: jsonSchema.optional(),
          strict: flag,
          description: z.string().optional(),
        },
        { error: "must be {name, schema, strict?}" },
      ),
    }),
  ],
  { error: "must be {type: 'text' | 'json_object' | 'json_schema', json_schema?}" },
);

/** A request's `model`: a served model's name. */
export const modelName = z
  .string({ error: "is required: the name of a served model (GET /v1/models)" })
  .min(1, "is required: the name of a served model (GET /v1/models)")
  .max(MAX_MODEL_NAME, "names a model of more than 128 characters; none has such a name");

/** Fields both routes take. */
const common = {
  model: modelName,
  stream: flag,
  stream_options: z.looseObject({ include_usage: flag }, { error: "must be an object" }).nullish(),
  n: count(1),
  max_tokens: count(1),
  max_completion_tokens: count(1),
  temperature: range(0, 2),
  top_p: range(0, 1),
  seed: z.int({ error: "must be an integer" }).nullish(),
  frequency_penalty: range(-2, 2),
  presence_penalty: range(-2, 2),
  logit_bias: z
    .record(z.string().regex(/^\d{1,9}$/, "keys must be token ids"), z.number().min(-100).max(100), {
      error: "must be an object of token id → bias (-100 to 100)",
    })
    .refine((b) => Object.keys(b).length <= MAX_BIASED_TOKENS, `names more than ${MAX_BIASED_TOKENS} tokens`)
    .nullish(),
  stop: z
    .union([z.string(), z.array(z.string())], { error: "must be a string or an array of strings" })
    .nullish(),
};

export const chatRequestSchema = z.looseObject({
  ...common,
  messages: z
    .array(message, { error: "must be a non-empty array of {role, content}" })
    .min(1, "must be a non-empty array of {role, content}"),
  tools: z.array(tool).max(MAX_TOOLS, `offers more than ${MAX_TOOLS} tools`).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: flag,
  response_format: responseFormat.nullish(),
  logprobs: flag,
  top_logprobs: count(0, 20),
});

const tokenIds = z
  .array(z.int().min(0, "token ids are integers ≥ 0"))
  .min(1, "an empty token array")
  .max(MAX_PROMPT_TOKENS, `holds more than ${MAX_PROMPT_TOKENS} tokens`);

export const completionRequestSchema = z.looseObject({
  ...common,
  prompt: z.union([z.string(), z.array(z.string()).min(1), tokenIds, z.array(tokenIds).min(1)], {
    error: "must be a string, an array of strings, an array of token ids or an array of token-id arrays",
  }),
  echo: flag,
  logprobs: count(0, 5),
  suffix: z.string().nullish(),
  best_of: count(1),
});

export const embeddingsRequestSchema = z.looseObject({
  model: common.model,
  // Token ids: passed on by upstream models, embedded as given by local ones.
  input: z.union([z.string(), z.array(z.string()), tokenIds, z.array(tokenIds)], {
    error:
      "'input' is required: a string, an array of strings, an array of token ids or an array of such arrays",
  }),
  encoding_format: z.enum(["float", "base64"], { error: 'must be "float" or "base64"' }).nullish(),
  dimensions: count(1),
});

export type ChatBody = z.output<typeof chatRequestSchema>;
export type CompletionBody = z.output<typeof completionRequestSchema>;

/** messages.3.tool_call_id → messages[3].tool_call_id (under `at`, when given: input[2].content) */
function paramOf(path: readonly PropertyKey[], at = ""): string {
  return path.reduce<string>(
    (out, key) => (typeof key === "number" ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)),
    at,
  );
}

/**
 * `raw` validated by `schema`; `at` is where `raw` sits in the body (a nested object's path).
 * @throws ModelportError MP_ERR_REQUEST_INVALID naming the first field at fault (`param`).
 */
export function parseBody<T>(schema: ZodType<T>, raw: unknown, at = ""): T {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      at ? `${at}: must be a JSON object` : "the body must be a JSON object",
      at ? { param: at } : undefined,
    );
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const param = paramOf(issue.path, at);
  throw new ModelportError("MP_ERR_REQUEST_INVALID", `${param}: ${issue.message}`, { param });
}

/** A route's request body as JSON Schema, for /openapi.json. */
export function bodyJsonSchema(schema: ZodType): Record<string, unknown> {
  const { $schema: _, ...out } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<
    string,
    unknown
  >;
  return out;
}
