// "Try it": a form per tensor model generated from its input schema (GET /v1/models/{m}),
// posted to /v1/models/{m}/predict with the answer shown as JSON; and a chat box for language
// models over POST /v1/chat/completions, streamed (Server-Sent Events read from fetch's body).
import { call } from "./api.js";
import { batchable, choices, defaultText, predictBody, sseEvents, type TensorSpec } from "./forms.js";
import { html, useRef, useState } from "./html.js";
import type { Served } from "./models.js";

function ModelForm({ name, inputs }: { name: string; inputs: TensorSpec[] }) {
  const rows = batchable(inputs);
  const [texts, setTexts] = useState<Record<string, string>>(() =>
    Object.fromEntries(inputs.map((s) => [s.name, defaultText(s, rows)])),
  );
  const [answer, setAnswer] = useState<{ ok: boolean; text: string } | undefined>();
  const [busy, setBusy] = useState(false);
  const run = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    const started = performance.now();
    try {
      const body = predictBody(inputs, texts);
      const res = await call(`v1/models/${encodeURIComponent(name)}/predict`, { method: "POST", json: body });
      const json = await res.json();
      const ms = Math.round(performance.now() - started);
      setAnswer({
        ok: true,
        text: `${res.status} in ${ms} ms\n${JSON.stringify(json.outputs ?? json, null, 1)}`,
      });
    } catch (err) {
      setAnswer({ ok: false, text: (err as Error).message });
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="try" data-test=${`try-${name}`} onSubmit=${run}>
    <h3>${name} <small class="muted">${rows ? "one row" : "named tensors"}</small></h3>
    ${inputs.map((s) => {
      const options = choices(s);
      const set = (e: Event) => setTexts({ ...texts, [s.name]: (e.target as HTMLInputElement).value });
      return html`<label>
        <span>${s.name} <small class="muted">${s.datatype} [${(s.shape ?? []).join(", ")}]</small></span>
        ${
          options
            ? html`<select name=${s.name} value=${texts[s.name]} onChange=${set}>
              ${options.map((o) => html`<option value=${o}>${o}</option>`)}
            </select>`
            : html`<input name=${s.name} value=${texts[s.name]} onInput=${set} title=${s.description ?? ""} />`
        }
      </label>`;
    })}
    <button type="submit" disabled=${busy} data-test="run">Predict</button>
    ${answer ? html`<pre class=${answer.ok ? "answer" : "answer error"} data-test="answer">${answer.text}</pre>` : null}
  </form>`;
}

export function TryIt({ models }: { models: Served[] }) {
  const tensor = models.filter((m) => m.entry.kind === "tensor" && m.detail?.inputs?.length);
  return html`<section class="card wide">
    <h2>Try it</h2>
    <p class="muted">A form per tensor model from its inputs; it posts to <code>/v1/models/{model}/predict</code>.</p>
    <div class="forms">
      ${tensor.map((m) => html`<${ModelForm} key=${m.entry.id} name=${m.entry.id} inputs=${m.detail!.inputs!} />`)}
    </div>
  </section>`;
}

interface Message {
  role: "user" | "assistant";
  content: string;
}

export function Chat({ models }: { models: Served[] }) {
  const chat = models.filter((m) => m.entry.kind === "language" && m.entry.capabilities?.chat);
  const [model, setModel] = useState<string>("");
  const [messages, setMessages] = useState<Message[]>([]);
  const [text, setText] = useState("");
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const abort = useRef<AbortController | undefined>(undefined);
  if (chat.length === 0) return null;
  const chosen = model || chat[0]!.entry.id;

  const send = async (e: Event) => {
    e.preventDefault();
    if (!text.trim() || busy) return;
    const history: Message[] = [...messages, { role: "user", content: text }];
    setMessages([...history, { role: "assistant", content: "" }]);
    setText("");
    setError(undefined);
    setBusy(true);
    abort.current = new AbortController();
    let reply = "";
    try {
      const res = await call("v1/chat/completions", {
        method: "POST",
        json: { model: chosen, messages: history, stream: true, max_tokens: 64 },
        signal: abort.current.signal,
      });
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        const { data, rest } = sseEvents(buffer);
        buffer = rest;
        for (const d of data) {
          if (d === "[DONE]") continue;
          const chunk = JSON.parse(d) as {
            choices?: { delta?: { content?: string } }[];
            error?: { message?: string };
          };
          if (chunk.error) throw new Error(chunk.error.message ?? "stream error");
          reply += chunk.choices?.[0]?.delta?.content ?? "";
          setMessages([...history, { role: "assistant", content: reply }]);
        }
      }
    } catch (err) {
      if ((err as Error).name !== "AbortError") setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return html`<section class="card wide">
    <h2>Chat</h2>
    <form class="chat" data-test="chat" onSubmit=${send}>
      <label><span>model</span>
        <select value=${chosen} onChange=${(e: Event) => setModel((e.target as HTMLSelectElement).value)}>
          ${chat.map((m) => html`<option value=${m.entry.id}>${m.entry.id}</option>`)}
        </select>
      </label>
      <div class="messages" data-test="messages">
        ${messages.map((m) => html`<p class=${`msg ${m.role}`} data-role=${m.role}>${m.content || "…"}</p>`)}
      </div>
      ${error ? html`<p class="error">${error}</p>` : null}
      <div class="row">
        <input data-test="chat-input" placeholder="say something" value=${text}
          onInput=${(e: Event) => setText((e.target as HTMLInputElement).value)} />
        <button type="submit" disabled=${busy} data-test="chat-send">Send</button>
        ${busy ? html`<button type="button" onClick=${() => abort.current?.abort()}>Stop</button>` : null}
        <button type="button" class="link" onClick=${() => setMessages([])}>clear</button>
      </div>
    </form>
  </section>`;
}
