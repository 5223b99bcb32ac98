// Server-Sent Events read from a fetch body, as the WHATWG spec splits them: lines ending in
// CR, LF or CRLF; "field: value" lines; comments (":") ignored; an event dispatched at a blank
// line with its data lines joined by "\n". Used for a job's event stream (GET /v1/jobs/{id}/events).

export interface SseEvent {
  /** The event type ("message" when the stream gave none). */
  event: string;
  data: string;
  id?: string;
  /** The reconnection time the stream asked for, in ms. */
  retry?: number;
}

/** Every event of a stream of bytes, in order; ends when the stream does. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let id: string | undefined;
  let retry: number | undefined;
  let sawData = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buffer);
        // A lone CR at the end may be the first half of a CRLF: wait for the next chunk.
        if (!m || (m[0] === "\r" && m.index === buffer.length - 1 && !done)) break;
        const line = buffer.slice(0, m.index);
        buffer = buffer.slice(m.index + m[0].length);
        if (line === "") {
          if (sawData) {
            const out: SseEvent = { event: event || "message", data: data.join("\n") };
            if (id !== undefined) out.id = id;
            if (retry !== undefined) out.retry = retry;
            yield out;
          }
          event = "";
          data = [];
          retry = undefined;
          sawData = false;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") {
          data.push(value);
          sawData = true;
        } else if (field === "id" && !value.includes("\0")) id = value;
        else if (field === "retry" && /^\d+$/.test(value)) retry = Number(value);
      }
      if (done) return;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
