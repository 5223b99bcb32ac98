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
// its generation, which frees the model's sequence for the next request.
//
// The generation path (model pick, limits, choices, usage, metrics) is openai-generation.ts,
// shared with the Responses API (routes/openai-responses.ts).

import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { CancelHandle } from "../../cancel.js";
import { captureStreamed } from "../../capture/hook.js";
import type { ServedModel } from "../../catalogue/served-model.js";
import type { ModelportError } from "../../errors.js";
import type { GenerateResult, TokenUsage, ToolCall } from "../../llm/language-model.js";
import type { Principal } from "../../tenants/principal.js";
import { checkAccess, mayUse } from "../../tenants/tenants.js";
import { type AppContext, requestCancel } from "../context.js";
import {
  GenerationTimer,
  generateChoices,
  pickModel,
  promptLimits,
  SSE_HEADERS,
  streamFailure,
  totalUsage,
  usageJson,
} from "../openai-generation.js";
import { type OpenAiRequest, parseChatRequest, parseCompletionRequest } from "../openai-request.js";
import { errorHandler, openaiError } from "../plugins/errors.js";

type Kind = "chat" | "completion";

/** A chat choice's logprobs in OpenAI's shape: {content: [{token, logprob, bytes, top_logprobs}]}. */
function chatLogprobs(result: GenerateResult) {
  if (!result.logprobs) return null;
  return {
    content: result.logprobs.map((l) => ({
      token: l.token,
      logprob: l.logprob,
      bytes: l.bytes,
      top_logprobs: l.top.map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes })),
    })),
    refusal: null,
  };
}

/** The length of the prompt echoed in front of choice `index` (0 without echo). */
function echoLength(parsed: OpenAiRequest, index: number): number {
  return parsed.echo?.[Math.floor(index / parsed.n)]?.length ?? 0;
}

/** A completion choice's logprobs in OpenAI's legacy shape; text offsets after an echoed prompt. */
function completionLogprobs(result: GenerateResult, offset: number) {
  if (!result.logprobs) return null;
  const text_offset: number[] = [];
  let at = offset;
  for (const l of result.logprobs) {
    text_offset.push(at);
    at += l.token.length;
  }
  return {
    tokens: result.logprobs.map((l) => l.token),
    token_logprobs: result.logprobs.map((l) => l.logprob),
    top_logprobs: result.logprobs.map((l) => Object.fromEntries(l.top.map((t) => [t.token, t.logprob]))),
    text_offset,
  };
}

/** Tool calls in OpenAI's message shape. */
function toolCallsJson(calls: readonly ToolCall[]) {
  return calls.map((c) => ({
    id: c.id,
    type: "function",
    function: { name: c.name, arguments: c.arguments },
  }));
}

function completionId(kind: Kind, req: FastifyRequest): string {
  return `${kind === "chat" ? "chatcmpl" : "cmpl"}-${req.id}`;
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
  const id = completionId(kind, req);
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
  const results = await generateChoices(
    model,
    parsed,
    cancel,
    () => timer.first(),
    () => {},
    req.trace,
  );
  const usage = totalUsage(results, parsed.n);
  timer.done(usage);
  if (kind === "chat") {
    return {
      id,
      object: "chat.completion",
      created,
      model: model.name,
      choices: results.map((result, index) => ({
        index,
        message: {
          role: "assistant",
          content: result.toolCalls ? null : result.text,
          refusal: null,
          ...(result.toolCalls ? { tool_calls: toolCallsJson(result.toolCalls) } : {}),
        },
        logprobs: chatLogprobs(result),
        finish_reason: result.finishReason,
      })),
      usage: usageJson(usage),
    };
  }
  return {
    id,
    object: "text_completion",
    created,
    model: model.name,
    choices: results.map((result, index) => ({
      index,
      text: result.text,
      logprobs: completionLogprobs(result, echoLength(parsed, index)),
      finish_reason: result.finishReason,
    })),
    usage: usageJson(usage),
  };
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
    const mp = streamFailure(err, revoked());
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
  app.post("/v1/chat/completions", { config: { capture: "openai", language: true } }, (req, reply) =>
    answer(ctx, "chat", parseChatRequest(req.body, limitsFor(req)), req, reply),
  );
  app.post("/v1/completions", { config: { capture: "openai", language: true } }, (req, reply) =>
    answer(ctx, "completion", parseCompletionRequest(req.body, limitsFor(req)), req, reply),
  );
  // POST /v1/embeddings lives in routes/openai-embeddings.ts (registered in app.ts).
};
