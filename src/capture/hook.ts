// Where payload capture meets the routes: one set of Fastify hooks for every captured route.
// A route opts in with its route config `{ capture: "native" | "oip" | "openai" }`. Once the body
// is parsed (preHandler), the hook finds the model (the :model parameter, or the body's `model`
// for OpenAI routes), and, if the model has `capture`, the caller's key may use it and the request
// is sampled, marks the request; an unsampled request costs a lookup and one random number. The
// key is checked here, not left to the route: this hook runs before the access check (an OpenAI
// route finds its model in the body, so checks it in its handler), and a request refused for
// another model must leave nothing in that model's records (a key could otherwise fill another
// tenant's retraining data or its queue). onSend keeps a reference to
// the answer as sent; onResponse hands the pair, still unserialized, to the bounded queue.
// Routes add only what the hooks cannot see: the version that answered (captureVersion) and a
// streamed answer, assembled (captureStreamed), since a stream bypasses onSend.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Catalogue } from "../catalogue/catalogue.js";
import { INFERENCE_HEADER } from "../protocol/headers.js";
import { mayAccess } from "../tenants/tenants.js";
import type { CaptureQueue } from "./queue.js";
import {
  type BinaryHeaders,
  type BodyRef,
  type CapturePolicy,
  type CaptureProtocol,
  capturePolicy,
  describeBinary,
} from "./record.js";

/** What a sampled request carries until its answer is sent. */
interface CaptureSlot {
  readonly model: string;
  readonly protocol: CaptureProtocol;
  readonly policy: CapturePolicy;
  /** Unix ms when the request arrived. */
  readonly time: number;
  /**
   * A binary request body, described when the request is sampled: decoding makes tensors views
   * of the body, and a model on a worker thread is then given its memory
   * (protocol/body-memory.ts), so it cannot be read once the answer is sent.
   */
  readonly binary?: BodyRef;
  version?: string;
  response?: BodyRef;
  error?: { code: string; message: string };
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** The route's pairs are captured for models with `capture` (src/capture/hook.ts). */
    capture?: CaptureProtocol;
  }
  interface FastifyRequest {
    /** Set when this request was sampled for payload capture. */
    capture?: CaptureSlot;
  }
}

/** The model a captured route's request names: the path's :model (without `@version`), or the body's `model`. */
function modelName(req: FastifyRequest): string | undefined {
  const param = (req.params as { model?: unknown } | undefined)?.model;
  if (typeof param === "string") {
    const at = param.indexOf("@");
    return at > 0 ? param.slice(0, at) : param;
  }
  const body = req.body as { model?: unknown } | undefined;
  return body && !Buffer.isBuffer(body) && typeof body.model === "string" ? body.model : undefined;
}

function header(v: string | number | string[] | undefined): string | undefined {
  return v === undefined ? undefined : Array.isArray(v) ? v.join(",") : String(v);
}

/** The headers that describe a binary body, from the request's or the reply's headers. */
function binaryHeaders(get: (name: string) => string | number | string[] | undefined): BinaryHeaders {
  const out: Record<string, string> = {};
  for (const name of [
    INFERENCE_HEADER,
    "content-type",
    "x-tensor-name",
    "x-tensor-shape",
    "x-tensor-datatype",
  ]) {
    const v = header(get(name));
    if (v !== undefined) out[name] = v;
  }
  return out;
}

/** A binary request body as its record will show it (record.ts describeBinary), without its bytes. */
function describedBody(req: FastifyRequest, body: Buffer): BodyRef {
  return {
    kind: "value",
    value: describeBinary(
      body,
      binaryHeaders((n) => req.headers[n]),
    ),
  };
}

function requestBody(req: FastifyRequest, slot: CaptureSlot): BodyRef {
  if (slot.binary) return slot.binary;
  const body = req.body;
  const length = Number(req.headers["content-length"]);
  return {
    kind: "value",
    value: body,
    ...(Number.isSafeInteger(length) && length > 0 ? { bytes: length } : {}),
  };
}

function responseBody(reply: FastifyReply, payload: unknown): BodyRef | undefined {
  const type = header(reply.getHeader("content-type")) ?? "";
  const json = /\bjson\b/i.test(type);
  if (typeof payload === "string") return { kind: "text", text: payload, json };
  if (Buffer.isBuffer(payload)) {
    if (json || type.startsWith("text/")) return { kind: "text", text: payload, json };
    return { kind: "binary", data: payload, headers: binaryHeaders((n) => reply.getHeader(n)) };
  }
  // A stream or nothing: not on the captured routes.
  return undefined;
}

export interface CaptureHookDeps {
  catalogue: Catalogue;
  queue: CaptureQueue;
  /** 0 ≤ x < 1; Math.random unless a test seeds it. */
  random: () => number;
}

/** Adds the capture hooks to `app` (before the route plugins register, so they inherit them). */
export function registerCaptureHooks(app: FastifyInstance, deps: CaptureHookDeps): void {
  const { catalogue, queue, random } = deps;
  app.decorateRequest("capture", undefined);
  app.addHook("preHandler", (req, reply, done) => {
    const protocol = req.routeOptions.config.capture;
    if (protocol !== undefined) {
      const name = modelName(req);
      const config =
        name !== undefined && catalogue.has(name) ? catalogue.get(name).config.capture : undefined;
      // No principal: a request let in without a key check (none reaches a captured route).
      if (name !== undefined && config && req.principal !== undefined && mayAccess(req.principal, name)) {
        const policy = capturePolicy(config);
        // Sampling comes first: an unsampled request is never looked at again.
        if (policy.sampleRate >= 1 || (policy.sampleRate > 0 && random() < policy.sampleRate))
          req.capture = {
            model: name,
            protocol,
            policy,
            time: Date.now() - reply.elapsedTime,
            ...(Buffer.isBuffer(req.body) ? { binary: describedBody(req, req.body) } : {}),
          };
      }
    }
    done();
  });
  app.addHook("onSend", (req, reply, payload, done) => {
    const slot = req.capture;
    if (slot && slot.response === undefined) {
      const body = responseBody(reply, payload);
      if (body) slot.response = body;
    }
    done(null, payload);
  });
  app.addHook("onResponse", (req, reply, done) => {
    const slot = req.capture;
    if (slot) {
      req.capture = undefined;
      const version = slot.version ?? (catalogue.has(slot.model) ? catalogue.get(slot.model).version : null);
      queue.offer({
        time: slot.time,
        model: slot.model,
        version,
        key: req.principal?.name ?? null,
        requestId: req.id,
        // Set on a captured route, which has a path template: the raw URL is never the route.
        route: req.routeOptions.url ?? "",
        protocol: slot.protocol,
        status: reply.statusCode,
        latencyMs: reply.elapsedTime,
        request: requestBody(req, slot),
        response: slot.response,
        ...(slot.error ? { error: slot.error } : {}),
        policy: slot.policy,
      });
    }
    done();
  });
}

/** The version that answered a captured request (a canary or a pinned version may differ from the current one). */
export function captureVersion(req: FastifyRequest, version: string): void {
  if (req.capture) req.capture.version = version;
}

/**
 * A streamed answer, assembled (a stream writes past onSend), or the error that cut it short.
 * Call it before the stream's last write, so it is in place when the response finishes.
 */
export function captureStreamed(
  req: FastifyRequest,
  answer: unknown,
  error?: { code: string; message: string },
): void {
  if (!req.capture) return;
  req.capture.response = { kind: "value", value: answer };
  if (error) req.capture.error = error;
}
