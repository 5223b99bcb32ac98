// The early context check of a llama.cpp request: a prompt far over the model's context is
// refused before it is templated and tokenized whole (src/backends/llama-cpp/llama-cpp-engine.ts).
import type { LlamaModel } from "node-llama-cpp";
import { ModelportError } from "../../errors.js";
import type { GenerateRequest } from "../../llm/language-model.js";

/** Characters tokenized at a time by the early context check. */
const PRECHECK_SLICE = 4096;

/**
 * Refuses a prompt clearly longer than the context before it is templated and tokenized whole:
 * the texts are tokenized in slices of about PRECHECK_SLICE characters (cut at a space) and
 * counting stops once the count passes the context with a margin. Tokenizing runs on the event
 * loop and grows faster than linearly with the text, so this keeps the work per request near
 * what a prompt of the context's size costs, however large the prompt (within the route's byte
 * bound). Slices can count a few tokens more or fewer than the whole text; the margin keeps
 * prompts that might fit for the exact check. Does nothing before the model is loaded.
 * @throws ModelportError MP_ERR_LLM_CONTEXT_OVERFLOW
 */
export function refuseFarOverContext(
  model: LlamaModel | undefined,
  contextSize: number | undefined,
  name: string,
  request: GenerateRequest,
): void {
  if (!model || !contextSize) return;
  const limit = Math.ceil(contextSize * 1.25) + 64;
  if (request.promptTokens && request.promptTokens.length > limit) {
    throw new ModelportError(
      "MP_ERR_LLM_CONTEXT_OVERFLOW",
      `the prompt is ${request.promptTokens.length} tokens; model '${name}' has a context of ${contextSize} per request (llm.contextSize)`,
      { contextSize },
    );
  }
  const texts = request.messages ? request.messages.map((m) => m.content) : [request.prompt ?? ""];
  let count = 0;
  for (const text of texts) {
    for (let i = 0; i < text.length; ) {
      let end = Math.min(text.length, i + PRECHECK_SLICE);
      if (end < text.length) {
        const space = text.lastIndexOf(" ", end);
        if (space > i) end = space;
      }
      count += model.tokenize(text.slice(i, end), false, "trimLeadingSpace").length;
      if (count > limit) {
        throw new ModelportError(
          "MP_ERR_LLM_CONTEXT_OVERFLOW",
          `the prompt takes more than ${limit} tokens (counting stopped there); model '${name}' has a context of ${contextSize} per request (llm.contextSize)`,
          { contextSize },
        );
      }
      i = end;
    }
  }
}
