// The body of POST /v1/responses (OpenAI's Responses API) as a zod schema: what each field may
// be, and the route's request body in /openapi.json. Fields whose values modelport serves only
// in part (input items, tools, tool_choice, text.format) are typed loosely here and checked one
// by one in responses-request.ts, so a refusal names the exact item and says why (a built-in
// tool, an image part, reasoning effort). Unknown fields are accepted, as on chat.
import { z } from "zod";
import { count, flag, functionName, jsonSchema, MAX_TOOLS, modelName, range } from "./openai-schemas.js";

/** Most metadata pairs, and each key's and value's length (OpenAI's bounds). */
const MAX_METADATA_PAIRS = 16;
const MAX_METADATA_KEY = 64;
const MAX_METADATA_VALUE = 512;
/** Longest response id accepted (ours are 37 characters). */
const MAX_RESPONSE_ID = 128;

/** Something with a `type`: a tool, an item or a format, checked by type in responses-request.ts. */
const typed = (what: string) => z.looseObject({ type: z.string() }, { error: `must be ${what} with a type` });

export const responsesRequestSchema = z.looseObject({
  model: modelName,
  input: z
    .union([z.string(), z.array(z.unknown())], {
      error: "must be a string or an array of input items (message, function_call, function_call_output)",
    })
    .optional(),
  instructions: z.string({ error: "must be a string" }).nullish(),
  max_output_tokens: count(1),
  temperature: range(0, 2),
  top_p: range(0, 1),
  seed: z.int({ error: "must be an integer" }).nullish(),
  tools: z.array(typed("a tool object")).max(MAX_TOOLS, `offers more than ${MAX_TOOLS} tools`).nullish(),
  tool_choice: z
    .union([z.enum(["auto", "none", "required"]), typed("an object")], {
      error: "must be 'auto', 'none', 'required' or {type: 'function', name}",
    })
    .nullish(),
  parallel_tool_calls: flag,
  text: z
    .looseObject(
      {
        format: typed("an object").nullish(),
        verbosity: z.enum(["medium"], { error: "only 'medium' is served" }).nullish(),
      },
      { error: "must be an object {format}" },
    )
    .nullish(),
  stream: flag,
  stream_options: z.looseObject({}, { error: "must be an object" }).nullish(),
  store: flag,
  previous_response_id: z
    .string({ error: "must be the id of a stored response" })
    .min(1, "must be the id of a stored response")
    .max(MAX_RESPONSE_ID, "is not a response id")
    .nullish(),
  metadata: z
    .record(
      z.string().max(MAX_METADATA_KEY, `keys are at most ${MAX_METADATA_KEY} characters`),
      z
        .string({ error: "values must be strings" })
        .max(MAX_METADATA_VALUE, `values are at most ${MAX_METADATA_VALUE} characters`),
      { error: "must be an object of string values" },
    )
    .refine((m) => Object.keys(m).length <= MAX_METADATA_PAIRS, `holds more than ${MAX_METADATA_PAIRS} pairs`)
    .nullish(),
  user: z.string({ error: "must be a string" }).max(256).nullish(),
  background: flag,
  include: z.array(z.string(), { error: "must be an array of strings" }).nullish(),
  truncation: z.enum(["auto", "disabled"], { error: "must be 'auto' or 'disabled'" }).nullish(),
  reasoning: z.looseObject({}, { error: "must be an object or null" }).nullish(),
  top_logprobs: count(0, 20),
  max_tool_calls: count(1),
});

export type ResponsesBody = z.output<typeof responsesRequestSchema>;

/** A function tool as the Responses API writes it: flat, not nested under `function`. */
export const functionToolSchema = z.looseObject({
  type: z.literal("function"),
  name: functionName,
  description: z.string({ error: "must be a string" }).nullish(),
  parameters: jsonSchema.nullish(),
  strict: flag,
});

/** text.format json_schema, flat as the Responses API writes it. */
export const jsonSchemaFormatSchema = z.looseObject({
  type: z.literal("json_schema"),
  name: z
    .string({ error: "is required: a name for the schema" })
    .min(1, "is required: a name for the schema"),
  schema: jsonSchema,
  strict: flag,
  description: z.string().optional(),
});

/** A message item (`type` may be left out). */
export const messageItemSchema = z.looseObject({
  type: z.literal("message").optional(),
  id: z.string().optional(),
  role: z.enum(["user", "assistant", "system", "developer"], {
    error: "must be one of user, assistant, system, developer",
  }),
  content: z.union([z.string(), z.array(typed("a content part"))], {
    error: "must be a string or an array of content parts (input_text, output_text)",
  }),
});

export const functionCallItemSchema = z.looseObject({
  type: z.literal("function_call"),
  id: z.string().optional(),
  call_id: z.string({ error: "is required: the call's id" }).min(1, "is required: the call's id"),
  name: functionName,
  arguments: z.string({ error: "must be the arguments as JSON text" }),
});

export const functionCallOutputItemSchema = z.looseObject({
  type: z.literal("function_call_output"),
  id: z.string().optional(),
  call_id: z
    .string({ error: "is required: the id of the call it answers" })
    .min(1, "is required: the id of the call it answers"),
  output: z.union([z.string(), z.array(typed("a content part"))], {
    error: "must be a string or an array of input_text parts",
  }),
});
