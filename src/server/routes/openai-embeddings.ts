// POST /v1/embeddings, as OpenAI serves it (the answer is built in openai-embeddings-answer.ts).
// Any LanguageModel with the embeddings capability answers: a local transformers model (batched
// across concurrent requests) or an upstream one. Errors are OpenAI-shaped: {"error": {"message",
// "type", "param", "code"}} with an MP_ERR_* code (plugins/errors.ts), `param` naming the field at
// fault. `Prefer: respond-async` makes the request a job (202 and the job; docs/Jobs.md).
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { acquire, requestCancel } from "../context.js";
import { embedAnswer, parseEmbeddingsRequest } from "../openai-embeddings-answer.js";
import { errorHandler } from "../plugins/errors.js";
import { prefersAsync, submitLanguageJob } from "./jobs.js";

export const openAiEmbeddingsRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.setErrorHandler(errorHandler("openai", ctx.config.limits.maxBodyBytes));
  // Most inputs in one request: limits.maxBatchRows.
  const maxInputs = ctx.config.limits.maxBatchRows;
  app.post(
    "/v1/embeddings",
    { config: { capture: "openai", language: true } },
    async (req: FastifyRequest, reply: FastifyReply) => {
      const parsed = parseEmbeddingsRequest(req.body, maxInputs);
      if (prefersAsync(req)) {
        reply.header("preference-applied", "respond-async");
        return submitLanguageJob(
          ctx,
          parsed.model,
          { endpoint: "/v1/embeddings", body: req.body as Record<string, unknown> },
          req,
          reply,
        );
      }
      const model = await acquire(ctx, req, reply, parsed.model, "embeddings");
      // The client going away cancels queued work (and an upstream call in flight).
      const usage = req.usage;
      const { response, promptTokens } = await embedAnswer(model, parsed, {
        cancel: requestCancel(req),
        trace: req.trace,
        ...(usage
          ? {
              onCompute: (ms: number) => {
                usage.computeMs += ms;
              },
            }
          : {}),
      });
      if (usage) {
        usage.rows += parsed.inputs.length;
        usage.promptTokens += promptTokens;
      }
      return response;
    },
  );
};
