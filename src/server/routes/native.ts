// The native API: list and describe models, and POST /v1/models/{model}/predict with rows or
// named tensors in and named outputs out.

import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { captureVersion } from "../../capture/hook.js";
import type { ServedModel } from "../../catalogue/served-model.js";
import { decodeNative, nativeAnswer } from "../../protocol/native-body.js";
import {
  decodeRawTensor,
  encodeRawTensor,
  rawOutputName,
  wantsOctetStream,
} from "../../protocol/raw-tensor.js";
import { requestedOutputs } from "../../protocol/requested-outputs.js";
import { ATTR, SPAN, stage, tracing } from "../../telemetry/spans.js";
import { mayUse } from "../../tenants/tenants.js";
import type { TensorMap } from "../../tensor.js";
import { acquire, encodeStage, infer } from "../context.js";
import { jsonPayload } from "../json-answer.js";
import { prefersAsync, submitJob } from "./jobs.js";
import { describeLanguageModel, openaiModelList } from "./openai.js";

interface ModelParams {
  model: string;
}

/** What GET /v1/models/{model} returns: status plus the signature once loaded. */
export function describeModel(host: ServedModel): Record<string, unknown> {
  const s = host.status();
  const sig = host.signature;
  return {
    name: s.name,
    version: s.version,
    versions: s.versions?.map((v) => v.version) ?? [s.version],
    // Every loaded version with its state and role, and the versions refused (docs/Models-over-time.md).
    version_status: s.versions,
    refused_versions: s.refused,
    // A canary split and a shadow version with its comparison so far (docs/Models-over-time.md).
    traffic: s.traffic,
    backend: s.backend,
    description: host.config.description,
    status: {
      state: s.state,
      ready: s.ready,
      reason: s.reason,
      code: s.code,
      golden: s.golden,
      golden_diff: s.goldenDiff,
      restarts: s.restarts,
      recycles: s.recycles,
      runner: s.runner,
      ...(s.loadable ? { loadable: true } : {}),
    },
    batching: s.batching,
    inputs: sig?.inputs ?? [],
    outputs: sig?.outputs ?? [],
    batchable: sig?.batchable ?? false,
    threads: s.threads ?? host.config.threads,
    limits: host.config.limits,
    file: { path: s.path, bytes: s.bytes, sha256: s.sha256 },
    load_ms: s.loadMs,
    memory_bytes: s.memoryBytes,
    // Requests, compute ms and estimated dollars so far (docs/Cost.md).
    cost: s.cost,
  };
}

/** GET /v1/models/{model}: the native description of a tensor model, OpenAI's shape for a language model. */
export function describeAny(model: ServedModel): Record<string, unknown> {
  return model.kind === "language" ? describeLanguageModel(model) : describeModel(model);
}

/**
 * `?outputs=a,b`: the outputs to return, for bodies that cannot say so themselves (given once:
 * plugins/query.ts refuses a repeated parameter on every route).
 */
function outputsQuery(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  return value.split(",").filter((v) => v !== "");
}

export const nativeRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  // `models`: the native description of each tensor model (as before); `object` and `data`: every
  // served model, tensor and language, in OpenAI's list shape, so OpenAI clients can list them too.
  const created = Math.floor(Date.now() / 1000);
  // A tensor model's `data` entry also carries what README promises of every listed model: its
  // inputs, outputs, file sha256, load time and memory, as in its `models` entry.
  app.get("/v1/models", async (req) => {
    const models = ctx.catalogue
      .all()
      .filter((m) => m.kind === "tensor" && (!req.principal || mayUse(req.principal, m.name)))
      .map(describeModel);
    const native = new Map(models.map((m) => [m.name, m]));
    const data = openaiModelList(ctx, created, req.principal).map((entry) => {
      const m = native.get(entry.id as string);
      if (!m) return entry;
      const file = m.file as { sha256?: string };
      return {
        ...entry,
        inputs: m.inputs,
        outputs: m.outputs,
        sha256: file.sha256,
        load_ms: m.load_ms,
        memory_bytes: m.memory_bytes,
      };
    });
    return { object: "list", data, models };
  });

  app.get<{ Params: ModelParams }>("/v1/models/:model", async (req) => {
    const model = ctx.catalogue.get(req.params.model);
    return describeAny(model);
  });

  // The version: from the path (/versions/{v}/predict), ?version=, or `model@v`; else the current one.
  // Not an async function: an async handler allocates its whole suspended frame on every call,
  // and awaiting a model that is already loaded costs a promise and a microtask turn
  // (docs/PERFORMANCE.md, the single-row bar at concurrency 64).
  for (const path of ["/v1/models/:model/predict", "/v1/models/:model/versions/:version/predict"])
    app.post<{
      Params: ModelParams & { version?: string };
      Querystring: { version?: string; outputs?: string };
    }>(path, { config: { capture: "native" } }, (req, reply) => {
      const version = req.params.version ?? req.query.version;
      // Prefer: respond-async (RFC 7240) turns the request into a job: 202 with its id at once.
      if (prefersAsync(req) && !Buffer.isBuffer(req.body)) {
        ctx.catalogue.find(req.params.model, "predict", version);
        reply.header("preference-applied", "respond-async");
        // The job is pinned to the version the request names, as the synchronous answer would be.
        return submitJob(ctx, req.params.model, req, reply, version);
      }
      const acquired = acquire(ctx, req, reply, req.params.model, "predict", version);
      return acquired instanceof Promise
        ? acquired.then((host) => predict(host, req, reply))
        : predict(acquired, req, reply);
    });
};

type PredictRequest = FastifyRequest<{ Querystring: { outputs?: string } }>;

/** Decodes the request's inputs, scores them and resolves to the answer's payload. */
function predict(host: ServedModel, req: PredictRequest, reply: FastifyReply): Promise<unknown> {
  const signature = host.signature;
  if (!signature) throw host.notReadyError();
  // A Buffer is a raw application/octet-stream tensor (protocol/raw-tensor.ts); anything else is JSON.
  const raw = Buffer.isBuffer(req.body) ? req.body : undefined;
  const body = raw ? undefined : (req.body as Record<string, unknown> | undefined);
  const decodeAt = tracing.on ? performance.now() : 0;
  let inputs: TensorMap;
  try {
    inputs = raw
      ? decodeRawTensor(raw, req.headers, signature, host.config.limits)
      : decodeNative(body, signature, host.config.limits);
  } catch (err) {
    if (tracing.on)
      stage(SPAN.decode, ATTR.decodeMs, req.trace, decodeAt, () => ({ [ATTR.model]: host.name }), err);
    throw err;
  }
  if (tracing.on) stage(SPAN.decode, ATTR.decodeMs, req.trace, decodeAt, () => ({ [ATTR.model]: host.name }));
  const names = requestedOutputs(body?.outputs ?? outputsQuery(req.query.outputs), signature);
  const rawOut = wantsOctetStream(req.headers.accept) ? rawOutputName(names, signature) : undefined;
  let answered = host.config.version;
  return infer(host, inputs, req, (v) => {
    answered = v;
  }).then((outputs) => {
    captureVersion(req, answered);
    const encoded = encodeStage(req, host);
    if (rawOut) {
      const res = encodeRawTensor(rawOut, outputs[rawOut]!);
      encoded();
      reply.headers(res.headers);
      return res.body;
    }
    const meta: Record<string, unknown> = { model: host.config.name, model_version: answered };
    if (body && "id" in body) meta.id = body.id;
    return jsonPayload(req, reply, nativeAnswer(meta, outputs, names), encoded);
  });
}
