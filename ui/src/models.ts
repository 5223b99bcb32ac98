// The model table: GET /v1/models (every model in OpenAI's list shape, tensor models also in
// their native shape) and GET /v1/models/{m} for each language model's details, polled every 5 s.
import type { TensorSpec } from "./forms.js";
import { fmt, fmtBytes, fmtMs, html } from "./html.js";

export interface ListEntry {
  id: string;
  backend?: string;
  kind?: "tensor" | "language";
  ready?: boolean;
  state?: string;
  version?: string;
  capabilities?: { chat?: boolean; completion?: boolean; embeddings?: boolean };
}

export interface ModelDetail {
  name: string;
  version?: string;
  backend?: string;
  description?: string;
  status?: { state?: string; ready?: boolean; golden?: string; reason?: string };
  batching?: { enabled?: boolean; maxBatchRows?: number; maxDelayMs?: number; queuedRows?: number };
  concurrency?: { active?: number; waiting?: number; limit?: number };
  inputs?: TensorSpec[];
  outputs?: TensorSpec[];
  threads?: number;
  load_ms?: number;
  memory_bytes?: number;
  context_length?: number;
}

export interface Served {
  entry: ListEntry;
  detail: ModelDetail | undefined;
}

function batching(d: ModelDetail | undefined): string {
  if (d?.batching) {
    const b = d.batching;
    if (!b.enabled) return `off · queued ${b.queuedRows ?? 0}`;
    return `≤ ${b.maxBatchRows} rows / ${b.maxDelayMs} ms · queued ${b.queuedRows ?? 0}`;
  }
  if (d?.concurrency) {
    const c = d.concurrency;
    return `${c.active ?? 0}/${c.limit ?? "?"} sequences · ${c.waiting ?? 0} waiting`;
  }
  return "–";
}

export function ModelTable({ models, error }: { models: Served[]; error: string | undefined }) {
  return html`<section class="card wide">
    <h2>Models</h2>
    ${error ? html`<p class="error">${error}</p>` : null}
    <table data-test="models">
      <thead>
        <tr>
          <th>model</th><th>kind</th><th>state</th><th>version</th><th>golden</th>
          <th>load time</th><th>memory</th><th>threads</th><th>batching</th>
        </tr>
      </thead>
      <tbody>
        ${models.map(({ entry, detail }) => {
          const state = detail?.status?.state ?? entry.state ?? "?";
          return html`<tr data-model=${entry.id}>
            <td title=${detail?.description ?? ""}><b>${entry.id}</b></td>
            <td>${entry.kind ?? "?"} · ${entry.backend ?? detail?.backend ?? "?"}</td>
            <td><span class=${`state ${state}`} title=${detail?.status?.reason ?? ""}>${state}</span></td>
            <td>${detail?.version ?? entry.version ?? "–"}</td>
            <td>${detail?.status?.golden ?? "–"}</td>
            <td>${fmtMs(detail?.load_ms)}</td>
            <td>${fmtBytes(detail?.memory_bytes)}</td>
            <td>${detail?.threads === undefined ? "–" : fmt(detail.threads, 0)}</td>
            <td>${batching(detail)}</td>
          </tr>`;
        })}
      </tbody>
    </table>
  </section>`;
}
