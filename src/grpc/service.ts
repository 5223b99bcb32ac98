// The six calls of GRPCInferenceService, each the gRPC twin of an Open Inference Protocol HTTP
// route (src/server/routes/oip.ts, health.ts): the same catalogue look-ups, decoders, metadata
// and deadline rules, so both surfaces answer alike.

import type { UntypedServiceImplementation } from "@grpc/grpc-js";
import { ModelportError } from "../errors.js";
import {
  decodeGrpcInputs,
  encodeGrpcOutputs,
  type GrpcInferRequest,
  type GrpcInferResponse,
} from "../protocol/grpc-infer.js";
import { TIMEOUT_HEADER } from "../protocol/headers.js";
import { modelMetadata, serverMetadata } from "../protocol/oip-metadata.js";
import { MAX_REQUEST_TIMEOUT_MS, requestTimeoutMs } from "../protocol/request-timeout.js";
import { requestedOutputs } from "../protocol/requested-outputs.js";
import { checkAccess } from "../tenants/tenants.js";
import { type Call, type CallEnv, metadataText, unary } from "./call.js";

interface ModelRequest {
  name: string;
  version: string;
}

/** An empty version field means "whichever is served", as a path without /versions/{v}. */
const version = (v: string) => (v === "" ? undefined : v);

/**
 * How long the model may take, in ms: x-request-timeout-ms or the model's limits.timeoutMs, as over
 * HTTP. The call's gRPC deadline is the client's own timeout, so it stands in for limits.timeoutMs
 * as the header does (up to the header's hour), and for the header when it comes sooner.
 */
function timeoutMs(call: Call, modelTimeoutMs: number): number {
  const asked = requestTimeoutMs(metadataText(call.metadata, TIMEOUT_HEADER));
  if (!Number.isFinite(call.deadline)) return asked ?? modelTimeoutMs;
  const left = call.deadline - Date.now();
  if (left <= 0) {
    throw new ModelportError(
      "MP_ERR_DEADLINE_EXCEEDED",
      "the call's deadline passed before its inputs reached the model",
    );
  }
  return Math.min(asked ?? MAX_REQUEST_TIMEOUT_MS, left);
}

export function inferenceHandlers(env: CallEnv): UntypedServiceImplementation {
  const ctx = env.context;
  const { catalogue } = ctx;
  const modelName = (r: ModelRequest) => r.name;
  return {
    ServerLive: unary(env, "ServerLive", () => ({ live: true }), { open: true }),

    ServerReady: unary(env, "ServerReady", () => ({ ready: !ctx.draining && catalogue.readiness().ready }), {
      open: true,
    }),

    ModelReady: unary(
      env,
      "ModelReady",
      (r: ModelRequest, call) => {
        checkAccess(call.principal, r.name);
        const host = catalogue.find(r.name, "predict", version(r.version));
        return { ready: host.ready && !ctx.draining };
      },
      { model: modelName },
    ),

    ServerMetadata: unary(env, "ServerMetadata", () => serverMetadata()),

    ModelMetadata: unary(
      env,
      "ModelMetadata",
      (r: ModelRequest, call) => {
        checkAccess(call.principal, r.name);
        const host = catalogue.find(r.name, "predict", version(r.version));
        return modelMetadata(host, catalogue.versions(host.name));
      },
      { model: modelName },
    ),

    ModelInfer: unary(
      env,
      "ModelInfer",
      async (r: GrpcInferRequest, call): Promise<GrpcInferResponse> => {
        // A model that loads on demand is loaded first, within the call's deadline.
        checkAccess(call.principal, r.model_name);
        const host = await catalogue.acquire(r.model_name, "predict", version(r.model_version), {
          deadline: performance.now() + timeoutMs(call, ctx.config.limits.timeoutMs),
        });
        const signature = host.signature;
        if (!signature) throw host.notReadyError();
        const inputs = decodeGrpcInputs(r, signature, host.config.limits);
        // proto3 cannot tell an empty list from none: empty means every output, as an absent one over HTTP.
        const names = requestedOutputs(r.outputs.length > 0 ? r.outputs : undefined, signature);
        let answered = host.config.version;
        let computeMs = 0;
        const outputs = await host.predict!(inputs, {
          deadline: performance.now() + timeoutMs(call, host.config.limits.timeoutMs),
          cancel: call.cancel,
          requestId: call.requestId,
          trace: call.trace,
          onVersion: (v) => {
            answered = v;
          },
          onCompute: (ms) => {
            computeMs += ms;
          },
        });
        // Usage per key, as the HTTP routes count it (where the server records usage).
        const rows = Object.values(inputs)[0]?.shape[0] ?? 0;
        ctx.recordUsage?.(call.principal.name, host.name, {
          rows,
          computeMs,
          promptTokens: 0,
          completionTokens: 0,
        });
        const meta = {
          model_name: host.config.name,
          model_version: answered,
          id: r.id === "" ? call.requestId : r.id,
        };
        return encodeGrpcOutputs(meta, outputs, names);
      },
      { model: (r) => r.model_name, body: true },
    ),
  };
}
