// The size limits an OpenAI request to a language model is checked against (PromptLimits, from
// the model's llm.* settings), for the routes and for jobs that stand for them alike.
import type { Catalogue } from "../catalogue/catalogue.js";
import { type Config, llmSchema } from "../config/schema.js";
import type { PromptLimits } from "./openai-request.js";

const DEFAULT_LLM = llmSchema.parse({});

/**
 * The size limits for a request to `name`: its llm.* settings, and a prompt byte bound of
 * contextSize × llm.maxPromptBytesPerToken for models with a context of their own (llama-cpp:
 * the context it loaded with, or the configured one on the API tier), capped by
 * llm.maxPromptBytes. An upstream model's context is the upstream's: only llm.maxPromptBytes.
 */
export function promptLimits(
  ctx: { readonly config: Config; readonly catalogue: Catalogue },
  name: string,
): PromptLimits {
  const config = ctx.config.languageModels?.find((c) => c.name === name);
  const llm = config?.llm ?? DEFAULT_LLM;
  let fromContext: number | undefined;
  if (config && config.backend !== "upstream") {
    const loaded = ctx.catalogue.has(name) ? ctx.catalogue.get(name).status().contextSize : undefined;
    fromContext = (loaded ?? llm.contextSize) * llm.maxPromptBytesPerToken;
  }
  const capped =
    llm.maxPromptBytes !== undefined && (fromContext === undefined || llm.maxPromptBytes < fromContext);
  const maxPromptBytes = capped ? llm.maxPromptBytes : fromContext;
  return {
    ...(maxPromptBytes !== undefined
      ? {
          maxPromptBytes,
          maxPromptBytesSource: capped
            ? "llm.maxPromptBytes"
            : "the context size × llm.maxPromptBytesPerToken",
        }
      : {}),
    maxMessages: llm.maxMessages,
    maxStops: llm.maxStops,
    maxChoices: llm.maxChoices,
    maxStopChars: llm.maxStopChars,
  };
}
