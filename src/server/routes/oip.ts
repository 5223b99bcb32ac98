// The Open Inference Protocol (KServe V2; also spoken by Triton and MLServer): server and
// model metadata, model readiness and infer, with and without /versions/{v}.
import type { FastifyInstance } from "fastify";
import type { ModelHost } from "../../models/model-host.js";
import { type AppContext, infer } from "../context.js";
import { decodeOip, requestedOutputs } from "../decode.js";
import { encodeOip } from "../encode.js";

interface Params {
  model: string;
  version?: string;
}

const PLATFORM: Record<string, string> = { onnx: "onnxruntime_onnx", custom: "modelport_custom" };

function metadata(host: ModelHost) {
  const sig = host.signature;
  const spec = (s: { name: string; datatype: string; shape?: number[] }) => ({
    name: s.name,
    datatype: s.datatype,
    shape: s.shape ?? [],
  });
  return {
    name: host.config.name,
    versions: [host.config.version],
    platform: PLATFORM[host.config.backend] ?? host.config.backend,
    inputs: (sig?.inputs ?? []).map(spec),
    outputs: (sig?.outputs ?? []).map(spec),
  };
}

export function oipRoutes(app: FastifyInstance, ctx: AppContext, version: string): void {
  const config = { errorStyle: "oip" as const };

  app.get("/v2", { config }, async () => ({ name: "modelport", version, extensions: [] }));

  for (const prefix of ["/v2/models/:model", "/v2/models/:model/versions/:version"]) {
    app.get<{ Params: Params }>(prefix, { config }, async (req) =>
      metadata(ctx.registry.getVersion(req.params.model, req.params.version)),
    );

    app.get<{ Params: Params }>(`${prefix}/ready`, { config }, async (req, reply) => {
      const host = ctx.registry.getVersion(req.params.model, req.params.version);
      const ready = host.ready && !ctx.draining;
      reply.code(ready ? 200 : 503);
      return { name: host.config.name, ready };
    });

    app.post<{ Params: Params }>(`${prefix}/infer`, { config }, async (req, reply) => {
      const host = ctx.registry.getVersion(req.params.model, req.params.version);
      const signature = host.signature;
      if (!host.ready || !signature) throw host.notReadyError();
      const body = req.body as Record<string, unknown> | undefined;
      const inputs = decodeOip(body, signature, host.config.limits);
      const names = requestedOutputs(body?.outputs, signature);
      const outputs = await infer(host, inputs, req, reply);
      return {
        model_name: host.config.name,
        model_version: host.config.version,
        id: typeof body?.id === "string" ? body.id : req.id,
        outputs: encodeOip(outputs, names),
      };
    });
  }
}
