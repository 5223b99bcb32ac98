// The jobs browser (docs/Jobs.md): GET /v1/jobs filtered by status and model, page by page
// (next_cursor), refreshed every 3 s; a job's detail, its result, cancel (DELETE /v1/jobs/{id})
// and retry (POST /v1/jobs/{id}/retry). A client key sees only its own jobs.
import { call, callJson } from "./api.js";
import { html, usePoll, useState } from "./html.js";
import type { Served } from "./models.js";

interface Job {
  id: string;
  model: string;
  status: string;
  created_at?: string;
  updated_at?: string;
  attempts?: number;
  max_attempts?: number;
  cancel_requested?: boolean;
  last_error?: { code?: string; message?: string };
}

const STATUSES = ["", "queued", "running", "succeeded", "failed", "canceled"];
const FINAL = new Set(["succeeded", "failed", "canceled"]);

const time = (iso: string | undefined) => (iso ? new Date(iso).toLocaleTimeString() : "–");

export function Jobs({ models }: { models: Served[] }) {
  const [status, setStatus] = useState("");
  const [model, setModel] = useState("");
  /** Cursors of the pages before this one; the last is this page's ("" for the first). */
  const [cursors, setCursors] = useState<string[]>([""]);
  const [page, setPage] = useState<{ jobs: Job[]; next?: string }>({ jobs: [] });
  const [selected, setSelected] = useState<Job | undefined>();
  const [result, setResult] = useState<string | undefined>();
  const [message, setMessage] = useState<string | undefined>();
  const [tick, setTick] = useState(0);
  const cursor = cursors[cursors.length - 1] ?? "";

  usePoll(
    async () => {
      const q = new URLSearchParams({ limit: "20" });
      if (status) q.set("status", status);
      if (model) q.set("model", model);
      if (cursor) q.set("cursor", cursor);
      try {
        const body = await callJson<{ jobs: Job[]; next_cursor?: string }>(`v1/jobs?${q}`, { poll: true });
        setPage({ jobs: body.jobs, ...(body.next_cursor ? { next: body.next_cursor } : {}) });
        if (selected) {
          const fresh = body.jobs.find((j) => j.id === selected.id);
          if (fresh) setSelected(fresh);
        }
      } catch (e) {
        setMessage((e as Error).message);
      }
    },
    3000,
    [status, model, cursor, tick],
  );

  const refresh = () => setTick((n) => n + 1);
  const act = async (what: string, f: () => Promise<Response>) => {
    try {
      const res = await f();
      const job = (await res.json()) as Job;
      setSelected(job);
      setMessage(`${what}: ${job.status}`);
    } catch (e) {
      setMessage(`${what}: ${(e as Error).message}`);
    }
    refresh();
  };
  const open = async (job: Job) => {
    setResult(undefined);
    setMessage(undefined);
    setSelected(await callJson<Job>(`v1/jobs/${job.id}`).catch(() => job));
  };
  const showResult = async (job: Job) => {
    try {
      const body = await callJson<unknown>(`v1/jobs/${job.id}/result`);
      setResult(JSON.stringify(body, null, 1));
    } catch (e) {
      setResult((e as Error).message);
    }
  };
  const filter = (set: (v: string) => void) => (e: Event) => {
    set((e.target as HTMLSelectElement).value);
    setCursors([""]);
  };

  return html`<section class="card wide" data-test="jobs">
    <h2>Jobs</h2>
    <div class="row">
      <label>status <select data-test="jobs-status" value=${status} onChange=${filter(setStatus)}>
        ${STATUSES.map((s) => html`<option value=${s}>${s || "any"}</option>`)}
      </select></label>
      <label>model <select data-test="jobs-model" value=${model} onChange=${filter(setModel)}>
        <option value="">any</option>
        ${models.filter((m) => m.entry.kind === "tensor").map((m) => html`<option value=${m.entry.id}>${m.entry.id}</option>`)}
      </select></label>
      <button type="button" onClick=${refresh}>Refresh</button>
      <button type="button" disabled=${cursors.length <= 1} onClick=${() => setCursors(cursors.slice(0, -1))}>Newer</button>
      <button type="button" disabled=${!page.next} onClick=${() => page.next && setCursors([...cursors, page.next])}>Older</button>
    </div>
    <table data-test="jobs-list">
      <thead><tr><th>id</th><th>model</th><th>status</th><th>created</th><th>attempts</th></tr></thead>
      <tbody>
        ${page.jobs.map(
          (
            j,
          ) => html`<tr data-job=${j.id} class=${selected?.id === j.id ? "selected" : ""} onClick=${() => open(j)}>
            <td><code>${j.id.slice(0, 8)}</code></td><td>${j.model}</td>
            <td><span class=${`status ${j.status}`} data-test="job-status">${j.status}</span></td>
            <td>${time(j.created_at)}</td><td>${j.attempts ?? 0}/${j.max_attempts ?? "?"}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${page.jobs.length === 0 ? html`<p class="muted">no jobs</p>` : null}
    ${message ? html`<p class="muted" data-test="jobs-message">${message}</p>` : null}
    ${
      selected
        ? html`<div class="detail" data-test="job-detail" data-job=${selected.id}>
          <div class="row">
            <b>${selected.id}</b>
            <span class=${`status ${selected.status}`} data-test="detail-status">${selected.status}</span>
            <button type="button" data-test="job-result" disabled=${selected.status !== "succeeded"}
              onClick=${() => showResult(selected)}>Result</button>
            <button type="button" data-test="job-cancel" disabled=${FINAL.has(selected.status)}
              onClick=${() => act("cancel", () => call(`v1/jobs/${selected.id}`, { method: "DELETE" }))}>Cancel</button>
            <button type="button" data-test="job-retry" disabled=${selected.status !== "failed" && selected.status !== "canceled"}
              onClick=${() => act("retry", () => call(`v1/jobs/${selected.id}/retry`, { method: "POST" }))}>Retry</button>
          </div>
          <pre>${JSON.stringify(selected, null, 1)}</pre>
          ${result ? html`<pre class="answer" data-test="job-result-body">${result}</pre>` : null}
        </div>`
        : null
    }
  </section>`;
}
