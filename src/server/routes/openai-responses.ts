// OpenAI's Responses API: POST /v1/responses (streamed as OpenAI streams it, with typed events and
// sequence numbers), GET and DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items.
// A request is translated to the GenerateRequest chat completions use and answered through the
// same path (openai-generation.ts): the same model pick, limits, metrics, capture, key channels
// and cancel on disconnect. Stored responses are succeeded jobs of their model owned by the
// caller's key (responses.ts); another key's id answers the 404 an unknown one does.
//
// Streaming: nothing is sent until the first text (or the finished calls) exists, so a request
// refused early still gets a proper status code; then response.created and response.in_progress
// go out with the first delta, each delta is written at once, and the stream ends with
// response.completed (or response.incomplete). A failure after the first byte ends it with an
// `error` event and response.failed.

import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { captureStreamed } from "../../capture/hook.js";
import type { ServedModel } from "../../catalogue/served-model.js";
import type { ModelportError } from "../../errors.js";
import type { GenerateResult } from "../../llm/language-model.js";
import { checkAccess } from "../../tenants/tenants.js";
import { type AppContext, requestCancel } from "../context.js";
import {
  GenerationTimer,
  generateChoices,
  pickModel,
  promptLimits,
  SSE_HEADERS,
  streamFailure,
} from "../openai-generation.js";
import { invalid } from "../openai-request.js";
import { errorHandler } from "../plugins/errors.js";
import {
  finalState,
  messageItem,
  newId,
  prepare,
  type ResponseState,
  respondParsed,
  responseJson,
  responseNotFound,
  storedInputItems,
  storedResponse,
  storeResponse,
} from "../responses.js";
import { parseResponsesRequest, type ResponsesRequest } from "../responses-request.js";
import { jobScope } from "./jobs.js";

interface IdParams {
  id: string;
}

/** The key name that owns what a request stores (none on a server without keys). */
function ownerOf(ctx: AppContext, req: FastifyRequest): string | undefined {
  return ctx.tenants.required ? req.principal?.name : undefined;
}

/** One server-sent event of the Responses API: `event: <type>` and its JSON with the sequence number. */
class EventWriter {
  private sequence = 0;
  event(type: string, fields: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.sequence++, ...fields })}\n\n`;
  }
}

async function streamResponse(
  ctx: AppContext,
  model: ServedModel,
  parsed: ResponsesRequest,
  req: FastifyRequest,
  reply: FastifyReply,
  timer: GenerationTimer,
): Promise<void> {
  const cancel = requestCancel(req);
  const scope = jobScope(ctx, req);
  // Before the first byte: a bad previous_response_id or an oversized conversation is a status code.
  const prepared = await prepare(ctx, parsed, scope);
  // A streamed answer is a channel of its key: a revoked key's stops, its last event saying why.
  let revoked: ModelportError | undefined;
  const close = ctx.channels.open(req.principal, (reason) => {
    revoked = reason;
    cancel.cancel();
  });
  const res = reply.raw;
  const id = newId("resp");
  const createdAt = Math.floor(Date.now() / 1000);
  const messageId = newId("msg");
  const events = new EventWriter();
  const json = (state: ResponseState) => responseJson(parsed, id, createdAt, model.name, state);
  const at = { item_id: messageId, output_index: 0, content_index: 0 };
  let started = false;
  let messageOpen = false;
  /** Each write is what happened since the last: the head of the stream first, the message's opening before its first delta. */
  const emit = (build: () => string) => {
    let out = "";
    if (!started) {
      started = true;
      reply.hijack();
      res.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), ...SSE_HEADERS });
      const shell = json({ status: "in_progress", output: [] });
      out += events.event("response.created", { response: shell });
      out += events.event("response.in_progress", { response: shell });
    }
    out += build();
    // A client gone mid-stream: its abort is on the way; nothing more to write.
    if (!res.destroyed) res.write(out);
  };
  const openMessage = () => {
    messageOpen = true;
    return (
      events.event("response.output_item.added", {
        output_index: 0,
        item: messageItem(messageId, "", "in_progress"),
      }) +
      events.event("response.content_part.added", {
        ...at,
        part: { type: "output_text", text: "", annotations: [], logprobs: [] },
      })
    );
  };
  const onDelta = (_index: number, delta: string) => {
    timer.first();
    emit(
      () =>
        (messageOpen ? "" : openMessage()) +
        events.event("response.output_text.delta", { ...at, delta, logprobs: [] }),
    );
  };
  try {
    let result: GenerateResult;
    try {
      [result] = (await generateChoices(
        model,
        { model: parsed.model, requests: [prepared.request], stream: true, includeUsage: false, n: 1 },
        cancel,
        onDelta,
        () => {},
        req.trace,
      )) as [GenerateResult];
    } catch (err) {
      if (!started) throw revoked ?? err;
      throw streamFailure(err, revoked);
    }
    timer.done(result.usage);
    const state = finalState(result, messageId, result.usage);
    const response = json(state);
    // Stored before the last event: a client that reads the response id and asks for it finds it.
    if (parsed.store)
      await storeResponse(ctx, parsed, prepared, response, model, {
        owner: ownerOf(ctx, req),
        trace: req.trace,
      });
    if (req.capture) captureStreamed(req, { ...response, streamed: true });
    emit(() => {
      let out = "";
      state.output.forEach((item, index) => {
        if (item.type === "message") {
          const part = (item.content as unknown[])[0];
          const text = (part as { text: string }).text;
          if (!messageOpen) {
            out += openMessage();
            if (text !== "")
              out += events.event("response.output_text.delta", { ...at, delta: text, logprobs: [] });
          }
          out += events.event("response.output_text.done", { ...at, text, logprobs: [] });
          out += events.event("response.content_part.done", { ...at, part });
          out += events.event("response.output_item.done", { output_index: index, item });
          return;
        }
        const call = { item_id: item.id, output_index: index };
        out += events.event("response.output_item.added", {
          output_index: index,
          item: { ...item, arguments: "", status: "in_progress" },
        });
        out += events.event("response.function_call_arguments.delta", { ...call, delta: item.arguments });
        out += events.event("response.function_call_arguments.done", {
          ...call,
          name: item.name,
          arguments: item.arguments,
        });
        out += events.event("response.output_item.done", { output_index: index, item });
      });
      const done = state.status === "incomplete" ? "response.incomplete" : "response.completed";
      return out + events.event(done, { response });
    });
    res.end();
  } catch (err) {
    if (!started) throw err;
    // After the first byte the stream carries the error as its last events, as OpenAI's servers do.
    const mp = streamFailure(err, revoked);
    if (mp.code !== "MP_ERR_REQUEST_CANCELED") reply.log.warn({ code: mp.code }, mp.message);
    captureStreamed(req, null, { code: mp.code, message: mp.message });
    const param = typeof mp.details?.param === "string" ? mp.details.param : null;
    const error = { code: mp.code, message: mp.message };
    if (!res.destroyed)
      res.end(
        events.event("error", { code: mp.code, message: mp.message, param }) +
          events.event("response.failed", { response: json({ status: "failed", output: [], error }) }),
      );
  } finally {
    close();
  }
}

/** GET .../input_items: the stored input items, newest first unless order=asc, `limit` at a time after `after`. */
function itemPage(items: unknown[], query: Record<string, string | undefined>) {
  const order = query.order ?? "desc";
  if (order !== "asc" && order !== "desc") throw invalid("order", "must be 'asc' or 'desc'");
  const limit = query.limit === undefined ? 20 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    throw invalid("limit", "must be an integer from 1 to 100");
  const ordered = order === "asc" ? items : [...items].reverse();
  let start = 0;
  if (query.after !== undefined) {
    start = ordered.findIndex((item) => (item as { id?: unknown }).id === query.after) + 1;
    if (start === 0) throw invalid("after", `no item '${query.after.slice(0, 64)}' in this response's input`);
  }
  const data = ordered.slice(start, start + limit);
  const idOf = (item: unknown) => (item as { id?: string } | undefined)?.id ?? null;
  return {
    object: "list",
    data,
    first_id: idOf(data[0]),
    last_id: idOf(data[data.length - 1]),
    has_more: start + limit < ordered.length,
  };
}

export const openaiResponsesRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  // Every error in this scope (auth, drain, body parsing included) in OpenAI's shape.
  app.setErrorHandler(errorHandler("openai", ctx.config.limits.maxBodyBytes));
  const served = (name: string) => ctx.catalogue.has(name);
  app.post("/v1/responses", { config: { capture: "openai", language: true } }, async (req, reply) => {
    // A model the key may not use answers the no-model 404 before any check its limits make.
    const parsed = parseResponsesRequest(req.body, (name) => {
      checkAccess(req.principal, name, served);
      return promptLimits(ctx, name);
    });
    const model = await pickModel(ctx, req, reply, parsed.model, "chat", parsed.stream);
    const timer = new GenerationTimer(ctx.metrics, model.name, reply);
    if (parsed.stream) return streamResponse(ctx, model, parsed, req, reply, timer);
    return respondParsed(ctx, model, parsed, {
      cancel: requestCancel(req),
      trace: req.trace,
      principal: req.principal,
      owner: ownerOf(ctx, req),
      scope: jobScope(ctx, req),
      hooks: timer,
    });
  });
  app.get<{ Params: IdParams }>("/v1/responses/:id", async (req, reply) => {
    const job = await storedResponse(ctx.jobs, req.params.id, jobScope(ctx, req));
    return reply.type("application/json; charset=utf-8").send(job.result);
  });
  app.delete<{ Params: IdParams }>("/v1/responses/:id", async (req) => {
    const job = await storedResponse(ctx.jobs, req.params.id, jobScope(ctx, req));
    // Gone between the read and the delete (another DELETE, a purge): as if never there.
    if (!(await ctx.jobs.remove(job.id))) throw responseNotFound(job.id);
    return { id: job.id, object: "response", deleted: true };
  });
  app.get<{ Params: IdParams; Querystring: Record<string, string | undefined> }>(
    "/v1/responses/:id/input_items",
    async (req) =>
      itemPage(
        storedInputItems(await storedResponse(ctx.jobs, req.params.id, jobScope(ctx, req))),
        req.query,
      ),
  );
};
