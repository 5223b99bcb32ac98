// OpenAI-compatible routes for language models: POST /v1/chat/completions and /v1/completions
// (both with `stream: true` as Server-Sent Events), in the shapes the official clients parse.
// GET /v1/models (routes/native.ts) lists these models too; /v1/embeddings is in
// routes/openai-embeddings.ts.
// Errors use OpenAI's shape {"error": {message, type, param, code}} with code = MP_ERR_*.
//
// Streaming: nothing is sent until the first text exists, so a request refused early (unknown
// model, overloaded, bad prompt) still gets a proper status code; after that, each delta is one
// `data: {chunk}` line written at once (no buffering: TTFT is the point), then a chunk with
// finish_reason, an optional usage chunk and `data: [DONE]`. A client that disconnects aborts
// its generation, which frees the model's sequence for the next request. `Prefer: respond-async`
// makes the request a job (routes/jobs.ts), answered by the same code (openai-answer.ts).

import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { CancelHandle } from "../../cancel.js";
import { captureStreamed } from "../../capture/hook.js";
import type { ServedModel } from "../../catalogue/served-model.js";
import { ModelportError } from "../../errors.js";
import type { LanguageEndpoint } from "../../jobs/language-work.js";
import type { GenerateResult, TokenUsage } from "../../llm/language-model.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { Principal } from "../../tenants/principal.js";
import { checkAccess, mayUse } from "../../tenants/tenants.js";
import { type AppContext, acquire, requestCancel } from "../context.js";
import {
  answerId,
  chatLogprobs,
  completionLogprobs,
  countTokens,
  echoLength,
  generateAnswer,
  generateChoices,
  type GenerationKind as Kind,
  toolCallsJson,
  totalUsage,
  usageJson,
} from "../openai-answer.js";
import { type OpenAiRequest, parseChatRequest, parseCompletionRequest } from "../openai-request.js";
import { errorHandler, openaiError } from "../plugins/errors.js";
import { promptLimits } from "../prompt-limits.js";
import { prefersAsync, submitLanguageJob } from "./jobs.js";

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
  // nginx and similar proxies would otherwise hold chunks back.
  "x-accel-buffering": "no",
};

/** The served language model for a request: ready, and doing what was asked (and streaming, when asked). */
async function pickModel(
  ctx: AppContext,
  req: FastifyRequest,
  reply: FastifyReply,
  name: string,
  kind: Kind,
  stream: boolean,
): Promise<ServedModel> {
  const model = await acquire(ctx, req, reply, name, kind);
  if (stream && !model.capabilities.stream) {
    throw new ModelportError(
      "MP_ERR_LLM_CAPABILITY_UNSUPPORTED",
      `model '${name}' does not stream; send stream: false`,
      {
        param: "stream",
      },
    );
  }
  return model;
}

/** Per-request figures for the LLM metrics. */
class GenerationTimer {
  private firstAt: number | undefined;
  constructor(
    private readonly metrics: Metrics,
    private readonly model: string,
    private readonly reply: FastifyReply,
  ) {}
  first(): void {
    if (this.firstAt !== undefined) return;
    this.firstAt = performance.now();
    this.metrics.llmTimeToFirstToken.observe({ model: this.model }, this.reply.elapsedTime / 1000);
  }
  done(usage: TokenUsage): void {
    const labels = { model: this.model };
    const used = this.reply.request.usage;
    if (used) {
      used.promptTokens += usage.promptTokens;
      used.completionTokens += usage.completionTokens;
      used.computeMs += this.reply.elapsedTime;
    }
    countTokens(this.metrics, this.model, usage);
    if (this.firstAt !== undefined)
      this.metrics.llmGenerationSeconds.inc(labels, (performance.now() - this.firstAt) / 1000);
  }
}

async function answer(
  ctx: AppContext,
  kind: Kind,
  parsed: OpenAiRequest,
  req: FastifyRequest,
  reply: FastifyReply,
) {
  const model = await pickModel(ctx, req, reply, parsed.model, kind, parsed.stream);
  const cancel = requestCancel(req);
  const timer = new GenerationTimer(ctx.metrics, model.name, reply);
  const created = Math.floor(Date.now() / 1000);
  const id = answerId(kind, req.id);
  if (parsed.stream) {
    // A streamed answer is a channel of its key: a revoked key's stops, its last event saying why.
    let revoked: ModelportError | undefined;
    const close = ctx.channels.open(req.principal, (reason) => {
      revoked = reason;
      cancel.cancel();
    });
    try {
      return await stream(model, kind, parsed, reply, cancel, timer, id, created, () => revoked);
    } finally {
      close();
    }
  }
  const { response, usage } = await generateAnswer(model, kind, parsed, {
    id,
    created,
    cancel,
    trace: req.trace,
    onFirst: () => timer.first(),
  });
  timer.done(usage);
  return response;
}

async function stream(
  model: ServedModel,
  kind: Kind,
  parsed: OpenAiRequest,
  reply: FastifyReply,
  cancel: CancelHandle,
  timer: GenerationTimer,
  id: string,
  created: number,
  revoked: () => ModelportError | undefined,
): Promise<void> {
  const res = reply.raw;
  const usageField = parsed.includeUsage ? ',"usage":null' : "";
  const object = kind === "chat" ? "chat.completion.chunk" : "text_completion";
  // Each chunk is a fixed prefix, the choice's index, its delta and a fixed suffix: one
  // stringify per delta.
  const head = `data: {"id":${JSON.stringify(id)},"object":"${object}","created":${created},"model":${JSON.stringify(model.name)},"system_fingerprint":null,"choices":[{"index":`;
  const chunk = (index: number, body: string, finish = "null", logprobs = "null") =>
    `${head}${index},${body},"logprobs":${logprobs},"finish_reason":${finish}}]${usageField}}\n\n`;
  const textBody = kind === "chat" ? (t: string) => `"delta":{"content":${t}}` : (t: string) => `"text":${t}`;
  let started = false;
  /** Headers, then (chat) each choice's role chunk and `first`, in one write: one packet for the first token. */
  const start = (first = "") => {
    started = true;
    reply.hijack();
    res.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), ...SSE_HEADERS });
    let roles = "";
    if (kind === "chat")
      for (let i = 0; i < parsed.n * parsed.requests.length; i++)
        roles += chunk(i, `"delta":{"role":"assistant","content":""}`);
    res.write(roles + first);
  };
  const write = (text: string) => {
    if (!started) {
      start(text);
      return;
    }
    // A client gone mid-stream: its abort is on the way; nothing more to write.
    if (!res.destroyed) res.write(text);
  };
  const onDelta = (index: number, text: string) => {
    timer.first();
    write(chunk(index, textBody(JSON.stringify(text))));
  };
  // Tool calls come whole once generated: one chunk per call (id, name and all its arguments),
  // which OpenAI's clients accumulate as they do its fragments; then the choice's last chunk.
  const onDone = (index: number, result: GenerateResult) => {
    let out = "";
    (result.toolCalls ?? []).forEach((call, i) => {
      const delta = { tool_calls: [{ index: i, ...toolCallsJson([call])[0] }] };
      out += chunk(index, `"delta":${JSON.stringify(delta)}`);
    });
    // The answer's logprobs come with its last chunk (OpenAI's clients append them as they come).
    const logprobs = JSON.stringify(
      kind === "chat" ? chatLogprobs(result) : completionLogprobs(result, echoLength(parsed, index)),
    );
    out += chunk(index, kind === "chat" ? `"delta":{}` : `"text":""`, `"${result.finishReason}"`, logprobs);
    write(out);
  };
  let results: GenerateResult[];
  try {
    results = await generateChoices(model, parsed, cancel, onDelta, onDone, reply.request.trace);
  } catch (err) {
    // Before the first byte the error handler answers with a status; after it, the stream
    // carries the error as its last event, as OpenAI's servers do. A revoked key's generation was
    // canceled: its answer says the key was revoked, not that the request was canceled.
    const mp =
      revoked() ??
      (err instanceof ModelportError
        ? err
        : new ModelportError(
            "MP_ERR_SERVER_INTERNAL",
            "internal error; the server log has details under this request id",
          ));
    if (!started) throw revoked() ?? err;
    if (mp.code !== "MP_ERR_REQUEST_CANCELED") reply.log.warn({ code: mp.code }, mp.message);
    captureStreamed(reply.request, null, { code: mp.code, message: mp.message });
    if (!res.destroyed) res.end(`data: ${JSON.stringify(openaiError(mp))}\n\n`);
    return;
  }
  const usage = totalUsage(results, parsed.n);
  timer.done(usage);
  let tail = "";
  if (parsed.includeUsage)
    tail += `data: {"id":${JSON.stringify(id)},"object":"${object}","created":${created},"model":${JSON.stringify(model.name)},"system_fingerprint":null,"choices":[],"usage":${JSON.stringify(usageJson(usage))}}\n\n`;
  // Payload capture gets the assembled answer, as the same request without `stream` would have it.
  if (reply.request.capture)
    captureStreamed(reply.request, assembled(kind, id, created, model.name, results, usage));
  // Fastify still logs the request and counts it in the metrics once the raw response ends.
  res.end(`${tail}data: [DONE]\n\n`);
}

/** A streamed answer put together (texts and tool calls, without logprobs), for payload capture. */
function assembled(
  kind: Kind,
  id: string,
  created: number,
  model: string,
  results: readonly GenerateResult[],
  usage: TokenUsage,
): Record<string, unknown> {
  return {
    id,
    object: kind === "chat" ? "chat.completion" : "text_completion",
    created,
    model,
    streamed: true,
    choices: results.map((result, index) =>
      kind === "chat"
        ? {
            index,
            message: {
              role: "assistant",
              content: result.toolCalls ? null : result.text,
              ...(result.toolCalls ? { tool_calls: toolCallsJson(result.toolCalls) } : {}),
            },
            finish_reason: result.finishReason,
          }
        : { index, text: result.text, finish_reason: result.finishReason },
    ),
    usage: usageJson(usage),
  };
}

/** Every served model in OpenAI's list shape; only those `principal`'s key may use, when given. */
export function openaiModelList(
  ctx: AppContext,
  created: number,
  principal?: Principal,
): Record<string, unknown>[] {
  const models = ctx.catalogue.all();
  return (principal ? models.filter((m) => mayUse(principal, m.name)) : models).map((m) => {
    const s = m.status();
    // modelport's fields: state and versions (an API tier routes by them), loadable on next call.
    const state = {
      ready: s.ready,
      state: s.state,
      ...(s.loadable ? { loadable: true } : {}),
      version: s.version,
    };
    if (m.kind === "tensor") {
      return {
        id: s.name,
        object: "model",
        created,
        owned_by: "modelport",
        backend: s.backend,
        ...state,
        kind: "tensor",
      };
    }
    return {
      id: m.name,
      object: "model",
      created: m.created,
      owned_by: "modelport",
      backend: m.backend,
      ...state,
      version_status: s.versions,
      kind: "language",
      capabilities: languageCapabilities(m),
      ...(s.contextSize ? { context_length: s.contextSize } : {}),
    };
  });
}

/** A language model's capabilities as the model list has always shown them. */
function languageCapabilities(m: ServedModel): { chat: boolean; completion: boolean; embeddings: boolean } {
  const c = m.capabilities;
  return { chat: c.chat, completion: c.completion, embeddings: c.embeddings };
}

/** What GET /v1/models/{model} returns for a language model. */
export function describeLanguageModel(m: ServedModel): Record<string, unknown> {
  const s = m.status();
  return {
    name: m.name,
    id: m.name,
    object: "model",
    created: m.created,
    owned_by: "modelport",
    backend: m.backend,
    kind: "language",
    capabilities: languageCapabilities(m),
    status: {
      state: s.state,
      ready: s.ready,
      reason: s.reason,
      code: s.code,
      golden: s.golden,
      ...(s.loadable ? { loadable: true } : {}),
    },
    version: s.version,
    version_status: s.versions,
    refused_versions: s.refused,
    // A canary split and a shadow version with its comparison so far (docs/Models-over-time.md).
    traffic: s.traffic,
    concurrency: s.concurrency,
    context_length: s.contextSize,
    batch_size: s.batchSize,
    file: { path: s.path, bytes: s.bytes, sha256: s.sha256 },
    load_ms: s.loadMs,
    // Requests, compute ms, tokens and estimated dollars so far (docs/Cost.md).
    cost: s.cost,
  };
}

export const openaiRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  // Every error in this scope (auth, drain, body parsing included) in OpenAI's shape.
  app.setErrorHandler(errorHandler("openai", ctx.config.limits.maxBodyBytes));
  // The model's limits are looked up once the body names it, and only for a caller who may use
  // it: a model the key may not use answers the 404 of no model before any check its limits make
  // (a prompt over its context would otherwise tell that it exists).
  const served = (name: string) => ctx.catalogue.has(name);
  const limitsFor = (req: FastifyRequest) => (name: string) => {
    checkAccess(req.principal, name, served);
    return promptLimits(ctx, name);
  };
  // Prefer: respond-async (RFC 7240) makes the request a job, validated as the request would be:
  // 202 with the job at once, its result the answer this route would have given.
  const route = (kind: Kind, endpoint: LanguageEndpoint, parse: typeof parseChatRequest) =>
    app.post(endpoint, { config: { capture: "openai", language: true } }, (req, reply) => {
      const parsed = parse(req.body, limitsFor(req));
      if (!prefersAsync(req)) return answer(ctx, kind, parsed, req, reply);
      reply.header("preference-applied", "respond-async");
      const body = req.body as Record<string, unknown>;
      return submitLanguageJob(ctx, parsed.model, { endpoint, body }, req, reply);
    });
  route("chat", "/v1/chat/completions", parseChatRequest);
  route("completion", "/v1/completions", parseCompletionRequest);
  // POST /v1/embeddings lives in routes/openai-embeddings.ts (registered in app.ts).
};
