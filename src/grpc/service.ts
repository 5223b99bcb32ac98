// The calls of GRPCInferenceService, each the gRPC twin of an Open Inference Protocol HTTP route
// (src/server/routes/oip.ts, health.ts, shared-memory.ts): the same catalogue look-ups, decoders,
// metadata, shared memory regions and deadline rules, so both surfaces answer alike.

import type { UntypedServiceImplementation } from "@grpc/grpc-js";
import { ModelportError } from "../errors.js";
import {
  decodeGrpcInputs,
  encodeGrpcOutputs,
  type GrpcInferRequest,
  type GrpcInferResponse,
  grpcSharedInputs,
  grpcSharedOutputs,
} from "../protocol/grpc-infer.js";
import { TIMEOUT_HEADER } from "../protocol/headers.js";
import { modelMetadata, serverMetadata } from "../protocol/oip-metadata.js";
import { MAX_REQUEST_TIMEOUT_MS, requestTimeoutMs } from "../protocol/request-timeout.js";
import { requestedOutputs } from "../protocol/requested-outputs.js";
import {
  callerRegions,
  checkSharedOutputs,
  readSharedInputs,
  type SharedMemoryCaller,
  writeSharedOutputs,
} from "../shared-memory/tensors.js";
import { checkAccess } from "../tenants/tenants.js";
import type { ModelSignature } from "../tensor.js";
import { type Call, type CallEnv, metadataText, unary } from "./call.js";

interface ModelRequest {
  name: string;
  version: string;
}

/** Triton's SystemSharedMemory*Request: uint64 fields arrive as decimal strings. */
interface RegionRequest {
  name: string;
  key: string;
  offset: string;
  byte_size: string;
}

/** An empty region name means every region of the caller. */
const regionName = (n: string) => (n === "" ? undefined : n);

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
  const served = (name: string) => catalogue.has(name);
  // Shared memory regions are the caller's key's; without keys, only loopback callers may use them
  // (docs/API.md, "Shared memory").
  const sharedCaller = (call: Call): SharedMemoryCaller => ({
    regions: ctx.sharedMemory,
    owner: call.principal.name,
    admit: () => ctx.tenants.checkSharedMemory(call.principal, call.remoteAddress()),
  });
  return {
    ServerLive: unary(env, "ServerLive", () => ({ live: true }), { open: true }),

    ServerReady: unary(env, "ServerReady", () => ({ ready: !ctx.draining && catalogue.readiness().ready }), {
      open: true,
    }),

    ModelReady: unary(
      env,
      "ModelReady",
      (r: ModelRequest, call) => {
        checkAccess(call.principal, r.name, served);
        const host = catalogue.find(r.name, "predict", version(r.version));
        return { ready: host.ready && !ctx.draining };
      },
      { model: modelName },
    ),

    ServerMetadata: unary(env, "ServerMetadata", () => serverMetadata(ctx.sharedMemory !== undefined)),

    ModelMetadata: unary(
      env,
      "ModelMetadata",
      (r: ModelRequest, call) => {
        checkAccess(call.principal, r.name, served);
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
        checkAccess(call.principal, r.model_name, served);
        const host = await catalogue.acquire(r.model_name, "predict", version(r.model_version), () => ({
          deadline: performance.now() + timeoutMs(call, ctx.config.limits.timeoutMs),
        }));
        const signature = host.signature;
        if (!signature) throw host.notReadyError();
        const caller = sharedCaller(call);
        const shared = await readSharedInputs(
          caller,
          grpcSharedInputs(r),
          ctx.config.limits.maxBodyBytes,
          ctx.bodyBudget,
        );
        try {
          return await inferCall(r, call, host, signature, caller, shared?.bytes);
        } finally {
          shared?.release();
        }
      },
      { model: (r) => r.model_name, body: true },
    ),

    SystemSharedMemoryStatus: unary(env, "SystemSharedMemoryStatus", (r: RegionRequest, call) => {
      const list = callerRegions(sharedCaller(call)).status(call.principal.name, regionName(r.name));
      return { regions: Object.fromEntries(list.map((region) => [region.name, region])) };
    }),

    SystemSharedMemoryRegister: unary(env, "SystemSharedMemoryRegister", async (r: RegionRequest, call) => {
      // uint64 as decimal strings: beyond 2^53 - 1 they are no safe integer, and refused.
      await callerRegions(sharedCaller(call)).register(
        call.principal.name,
        r.name,
        r.key,
        Number(r.offset),
        Number(r.byte_size),
      );
      return {};
    }),

    SystemSharedMemoryUnregister: unary(
      env,
      "SystemSharedMemoryUnregister",
      async (r: RegionRequest, call) => {
        await callerRegions(sharedCaller(call)).unregister(call.principal.name, regionName(r.name));
        return {};
      },
    ),
  };

  /** ModelInfer once its inputs in shared memory (if any) are read. */
  async function inferCall(
    r: GrpcInferRequest,
    call: Call,
    host: Awaited<ReturnType<typeof catalogue.acquire>>,
    signature: ModelSignature,
    caller: SharedMemoryCaller,
    shared: ReadonlyMap<number, Uint8Array> | undefined,
  ): Promise<GrpcInferResponse> {
    const inputs = decodeGrpcInputs(r, signature, host.config.limits, shared);
    // proto3 cannot tell an empty list from none: empty means every output, as an absent one over HTTP.
    const names = requestedOutputs(r.outputs.length > 0 ? r.outputs : undefined, signature);
    const sharedRefs = grpcSharedOutputs(r);
    checkSharedOutputs(caller, sharedRefs);
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
    const written = await writeSharedOutputs(caller, outputs, sharedRefs);
    return encodeGrpcOutputs(meta, outputs, names, written);
  }
}
