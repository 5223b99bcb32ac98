// GET /openapi.json and GET /docs: the API as served right now, with each model's inputs,
// outputs and a ready-to-paste curl example (language models: the OpenAI route they answer);
// for a client key limited to some models, only those.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { ServedModel } from "../../catalogue/served-model.js";
import { visibleModels } from "../../tenants/visibility.js";
import type { TensorSpec } from "../../tensor.js";
import { VERSION } from "../../version.js";
import type { AppContext } from "../context.js";
import { buildOpenApi } from "../openapi.js";
import { openaiExample } from "../openapi-openai.js";

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function exampleValue(spec: TensorSpec): unknown {
  const v = spec.datatype === "BOOL" ? false : spec.datatype === "BYTES" ? "text" : 0;
  const dims = (spec.shape ?? []).slice(1).map((d) => (d > 0 ? d : 1));
  let value: unknown = v;
  for (let i = dims.length - 1; i >= 0; i--) value = new Array(dims[i]).fill(value);
  return value;
}

function exampleBody(host: ServedModel): string {
  const sig = host.signature;
  if (!sig) return "{}";
  if (sig.inputs.length === 1 && sig.batchable)
    return JSON.stringify({ rows: [exampleValue(sig.inputs[0]!)] });
  return JSON.stringify({ rows: [Object.fromEntries(sig.inputs.map((s) => [s.name, exampleValue(s)]))] });
}

function table(specs: readonly TensorSpec[]): string {
  const rows = specs
    .map(
      (s) =>
        `<tr><td><code>${escapeHtml(s.name)}</code></td><td>${s.datatype}</td><td>[${(s.shape ?? []).join(", ")}]</td><td>${escapeHtml(s.description ?? "")}</td></tr>`,
    )
    .join("");
  return `<table><tr><th>name</th><th>datatype</th><th>shape (-1 = any)</th><th></th></tr>${rows}</table>`;
}

function languageSection(m: ServedModel, origin: string): string {
  const s = m.status();
  // The OpenAI families the model answers (streaming is a mode of chat and completion).
  const can = (["chat", "completion", "embeddings"] as const)
    .filter((what) => m.capabilities[what])
    .join(", ");
  return `<section><h2>${escapeHtml(m.name)} <small>${m.backend} · ${escapeHtml(can)} · ${s.ready ? "ready" : `not ready: ${escapeHtml(s.reason ?? s.state)}`}</small></h2>
<h3>Try it</h3><pre>${escapeHtml(openaiExample(m, origin))}</pre></section>`;
}

function page(hosts: ServedModel[], languageModels: readonly ServedModel[], origin: string): string {
  const sections = hosts
    .map((h) => {
      const s = h.status();
      const sig = h.signature;
      return `<section><h2>${escapeHtml(s.name)} <small>v${escapeHtml(s.version)} · ${s.backend} · ${s.ready ? "ready" : `not ready: ${escapeHtml(s.reason ?? s.state)}`}</small></h2>
${h.config.description ? `<p>${escapeHtml(h.config.description)}</p>` : ""}
<h3>Inputs</h3>${sig ? table(sig.inputs) : "<p>unknown until loaded</p>"}
<h3>Outputs</h3>${sig ? table(sig.outputs) : "<p>unknown until loaded</p>"}
<h3>Try it</h3><pre>curl -s ${escapeHtml(origin)}/v1/models/${escapeHtml(s.name)}/predict \\
  -H 'content-type: application/json' \\
  -d '${escapeHtml(exampleBody(h))}'</pre></section>`;
    })
    .join("\n");
  const language = languageModels.map((m) => languageSection(m, origin)).join("\n");
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>modelport API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25rem .6rem;text-align:left}
pre{background:#f4f4f4;padding:.75rem;overflow:auto}small{color:#666;font-weight:normal}</style></head>
<body><h1>modelport</h1><p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).
Probes: <a href="/livez">/livez</a>, <a href="/readyz">/readyz</a>. Metrics: <a href="/metrics">/metrics</a>.
Open Inference Protocol: <code>POST /v2/models/{name}/infer</code>. OpenAI-compatible:
<code>POST /v1/chat/completions</code>, <code>/v1/completions</code>, <code>/v1/responses</code>, <code>/v1/embeddings</code>.</p>${sections}
${language}</body></html>`;
}

/** The models of `kind` the caller may hear of (tenants/visibility.ts): a client key's own only. */
function modelsFor(ctx: AppContext, req: FastifyRequest, kind: "tensor" | "language"): ServedModel[] {
  const visible = visibleModels(req.principal, ctx.tenants.required);
  return ctx.catalogue.all().filter((m) => m.kind === kind && (visible === undefined || visible(m.name)));
}

export const docsRoutes: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  app.get("/openapi.json", async (req) =>
    buildOpenApi(
      modelsFor(ctx, req, "tensor"),
      VERSION,
      modelsFor(ctx, req, "language"),
      ctx.sharedMemory !== undefined,
    ),
  );
  app.get("/docs", async (req, reply) => {
    reply.type("text/html; charset=utf-8");
    return page(
      modelsFor(ctx, req, "tensor"),
      modelsFor(ctx, req, "language"),
      `${req.protocol}://${req.host}`,
    );
  });
};
