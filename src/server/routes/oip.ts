// The Open Inference Protocol (KServe V2; also spoken by Triton and MLServer): server and
// model metadata, model readiness and infer, with and without /versions/{v}.
import type { FastifyPluginAsync, onRequestHookHandler } from "fastify";
import { captureVersion } from "../../capture/hook.js";
import { binaryOutputs, encodeOipBinary, splitOipBody } from "../../protocol/binary-body.js";
import { INFERENCE_HEADER, OCTET_STREAM } from "../../protocol/headers.js";
import { decodeOip, jsonOutputs, oipAnswer } from "../../protocol/oip-body.js";
import { modelMetadata, serverMetadata } from "../../protocol/oip-metadata.js";
import { requestedOutputs } from "../../protocol/requested-outputs.js";
import { sharedInputs, sharedOutputs } from "../../protocol/shared-memory-params.js";
import { checkSharedOutputs, readSharedInputs, writeSharedOutputs } from "../../shared-memory/tensors.js";
import { ATTR, SPAN, stage, tracing } from "../../telemetry/spans.js";
import type { TensorMap } from "../../tensor.js";
import { acquire, encodeStage, infer } from "../context.js";
import { jsonPayload } from "../json-answer.js";
import { errorHandler } from "../plugins/errors.js";
import { sharedMemoryCaller } from "./shared-memory.js";

interface Params {
  model: string;
  version?: string;
}

// Like Triton, a body with Inference-Header-Content-Length is binary whatever its Content-Type
// (Triton's clients often send none): it goes to the octet-stream parser as a Buffer.
const binaryBody: onRequestHookHandler = (req, _reply, done) => {
  if (req.headers[INFERENCE_HEADER] !== undefined) req.headers["content-type"] = OCTET_STREAM;
  done();
};

export const oipRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  // Every error in this scope (auth, drain, body parsing included) in the OIP shape.
  app.setErrorHandler(errorHandler("oip", ctx.config.limits.maxBodyBytes));

  app.get("/v2", async () => serverMetadata(ctx.sharedMemory !== undefined));

  for (const prefix of ["/v2/models/:model", "/v2/models/:model/versions/:version"]) {
    app.get<{ Params: Params }>(prefix, async (req) => {
      const host = ctx.catalogue.find(req.params.model, "predict", req.params.version);
      return modelMetadata(host, ctx.catalogue.versions(host.name));
    });

    app.get<{ Params: Params }>(`${prefix}/ready`, async (req, reply) => {
      const host = ctx.catalogue.find(req.params.model, "predict", req.params.version);
      const ready = host.ready && !ctx.draining;
      reply.code(ready ? 200 : 503);
      return { name: host.config.name, ready };
    });

    app.post<{ Params: Params }>(
      `${prefix}/infer`,
      { onRequest: binaryBody, config: { capture: "oip" } },
      async (req, reply) => {
        // Awaited only when it is a promise (a model loading on demand): awaiting a ready model would
        // cost every request a promise and a microtask turn.
        const acquired = acquire(ctx, req, reply, req.params.model, "predict", req.params.version);
        const host = acquired instanceof Promise ? await acquired : acquired;
        const signature = host.signature;
        if (!signature) throw host.notReadyError();
        // Shared memory regions are kept per key (docs/API.md, "Shared memory").
        const caller = sharedMemoryCaller(ctx, req);
        const decodeAt = tracing.on ? performance.now() : 0;
        let decoded: { body: ReturnType<typeof splitOipBody>["body"]; inputs: TensorMap };
        try {
          const { body, binary } = splitOipBody(
            req.body,
            req.headers[INFERENCE_HEADER],
            ctx.config.limits.maxJsonDepth,
          );
          const shared = await readSharedInputs(
            caller,
            sharedInputs(body?.inputs),
            ctx.config.limits.maxBodyBytes,
            ctx.bodyBudget,
          );
          if (shared) reply.raw.once("close", shared.release);
          decoded = { body, inputs: decodeOip(body, signature, host.config.limits, binary, shared?.bytes) };
        } catch (err) {
          if (tracing.on)
            stage(SPAN.decode, ATTR.decodeMs, req.trace, decodeAt, () => ({ [ATTR.model]: host.name }), err);
          throw err;
        }
        if (tracing.on)
          stage(SPAN.decode, ATTR.decodeMs, req.trace, decodeAt, () => ({ [ATTR.model]: host.name }));
        const { body, inputs } = decoded;
        const names = requestedOutputs(body?.outputs, signature);
        const binaryNames = binaryOutputs(body, signature);
        const sharedRefs = sharedOutputs(body?.outputs);
        checkSharedOutputs(caller, sharedRefs);
        let answered = host.config.version;
        const outputs = await infer(host, inputs, req, (v) => {
          answered = v;
        });
        captureVersion(req, answered);
        const encoded = encodeStage(req, host);
        const meta = {
          model_name: host.config.name,
          model_version: answered,
          id: typeof body?.id === "string" ? body.id : req.id,
        };
        let answer = jsonOutputs(outputs, names);
        if (sharedRefs.size > 0) {
          const written = await writeSharedOutputs(caller, outputs, sharedRefs);
          answer = answer.map((o) => {
            const parameters = written.get(o.name);
            return parameters ? { ...o, parameters } : o;
          });
        }
        if (!binaryNames) {
          return jsonPayload(req, reply, oipAnswer(meta, answer), encoded);
        }
        const res = encodeOipBinary(meta, answer, binaryNames);
        encoded();
        return reply.headers(res.headers).send(res.body);
      },
    );
  }
};
