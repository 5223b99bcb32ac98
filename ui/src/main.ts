// The dashboard's entry (bundled by ui/build.mjs into dist/ui/app.js): asks for the API key when
// the server wants one, then shows the models, live charts from /metrics, cost, a "try it" form
// per tensor model, a chat box for language models and the jobs browser. It calls only public
// routes of the server that serves it, so it works on an API tier as on a single process.
import { render } from "preact";
import { ApiError, callJson, getKey, setKey, whenUnauthorized } from "./api.js";
import { html, usePoll, useState } from "./html.js";
import { Jobs } from "./jobs.js";
import { Live } from "./live.js";
import { type ListEntry, type ModelDetail, ModelTable, type Served } from "./models.js";
import { Chat, TryIt } from "./play.js";

type Auth = "checking" | "need" | "ok";

function KeyForm({ onKey, invalid }: { onKey: (key: string) => void; invalid: boolean }) {
  const [key, setText] = useState("");
  return html`<form class="card key" data-test="key-form"
    onSubmit=${(e: Event) => {
      e.preventDefault();
      if (key.trim()) onKey(key.trim());
    }}>
    <h2>API key</h2>
    <p>This server needs an API key. It is kept in this tab only (sessionStorage) and sent as
      <code>Authorization: Bearer</code> on every call.</p>
    ${invalid ? html`<p class="error">That key was refused (401).</p>` : null}
    <input type="password" autocomplete="off" placeholder="key" data-test="key-input" value=${key}
      onInput=${(e: Event) => setText((e.target as HTMLInputElement).value)} />
    <button type="submit" data-test="key-submit">Use key</button>
  </form>`;
}

function App() {
  const [auth, setAuth] = useState<Auth>("checking");
  const [invalid, setInvalid] = useState(false);
  const [models, setModels] = useState<Served[]>([]);
  const [error, setError] = useState<string | undefined>();
  const [attempt, setAttempt] = useState(0);
  whenUnauthorized(() => {
    setInvalid(getKey() !== "");
    setAuth("need");
  });

  usePoll(
    async () => {
      if (auth === "need") return;
      try {
        const list = await callJson<{ data?: ListEntry[]; models?: ModelDetail[] }>("v1/models", {
          poll: true,
        });
        const native = new Map((list.models ?? []).map((m) => [m.name, m]));
        const served = await Promise.all(
          (list.data ?? []).map(async (entry): Promise<Served> => {
            const known = native.get(entry.id);
            if (known) return { entry, detail: known };
            const detail = await callJson<ModelDetail>(`v1/models/${encodeURIComponent(entry.id)}`, {
              poll: true,
            }).catch(() => undefined);
            return { entry, detail };
          }),
        );
        setModels(served);
        setError(undefined);
        setAuth("ok");
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 401)) setError(String((e as Error).message ?? e));
      }
    },
    5000,
    [auth, attempt],
  );

  const useKey = (key: string) => {
    setKey(key);
    setInvalid(false);
    setAuth("checking");
    setAttempt((n) => n + 1);
  };

  return html`<header>
      <h1>modelport</h1>
      <nav>
        <a href="docs">API docs</a>
        ${
          getKey()
            ? html`<button class="link" data-test="forget-key"
              onClick=${() => {
                setKey("");
                setAuth("need");
              }}>forget key</button>`
            : null
        }
      </nav>
    </header>
    <main>
      ${
        auth === "need"
          ? html`<${KeyForm} onKey=${useKey} invalid=${invalid} />`
          : auth === "checking"
            ? html`<p class="muted">connecting…</p>`
            : html`<${ModelTable} models=${models} error=${error} />
            <${Live} />
            <${TryIt} models=${models} />
            <${Chat} models=${models} />
            <${Jobs} models=${models} />`
      }
    </main>`;
}

// The page's only script: no inline code (the CSP allows scripts from this origin only).
render(html`<${App} />`, document.getElementById("app")!);
