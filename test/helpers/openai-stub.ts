// A small OpenAI-compatible server for tests of the upstream backend: a real HTTP server on a
// free port that answers GET /v1/models, POST /v1/chat/completions (plain or streamed),
// /v1/completions and /v1/embeddings, records every request (headers included), and can be
// told to fail the next calls (status, Retry-After, dropped connection) or to pause a stream.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface StubFailure {
  /** HTTP status to answer with; "drop" closes the connection without an answer. */
  status: number | "drop";
  retryAfter?: string;
  message?: string;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: Record<string, unknown> | undefined;
  at: number;
}

export interface OpenAiStub {
  /** Base URL including /v1. */
  url: string;
  requests: RecordedRequest[];
  /** Failures to answer the next requests to `path` with, in order. */
  failNext(path: string, ...failures: StubFailure[]): void;
  /** The pieces a streamed answer is sent in (each its own SSE event and write). */
  streamPieces: string[];
  /** Milliseconds to wait between streamed pieces. */
  streamGapMs: number;
  /** When false, GET /v1/models answers 404 (an upstream without a model list). */
  hasModelsRoute: boolean;
  /**
   * Generate as a real server does instead of sending streamPieces: one token " t<i>" after
   * another up to max_tokens (finish_reason "length"), ending before a stop sequence (finish_reason
   * "stop", the stop sequence left out), every streamGapMs, until the client leaves.
   */
  generate: boolean;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let s = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => {
      s += c;
    });
    req.on("end", () => resolve(s));
    req.on("error", reject);
  });
}

/** A deterministic "embedding": letter counts of the text, so equal texts give equal vectors. */
export function stubEmbedding(text: string): number[] {
  const v = new Array<number>(8).fill(0);
  for (const ch of text.toLowerCase()) v[ch.charCodeAt(0) % 8]! += 1;
  return v;
}

/**
 * What stub.generate answers: tokens " t0", " t1", … up to max_tokens; with stop sequences, the
 * text before the earliest one (held back across tokens, as a real server does).
 */
function generated(body: Record<string, unknown> | undefined): { pieces: string[]; finish: string } {
  const max = Number(body?.max_tokens ?? body?.max_completion_tokens ?? 16);
  const stops = ([] as unknown[]).concat(body?.stop ?? []).map(String);
  const pieces = Array.from({ length: max }, (_, i) => ` t${i}`);
  if (stops.length === 0) return { pieces, finish: "length" };
  const full = pieces.join("");
  const at = Math.min(...stops.map((x) => full.indexOf(x)).filter((n) => n >= 0));
  if (!Number.isFinite(at)) return { pieces, finish: "length" };
  const kept: string[] = [];
  let length = 0;
  for (const piece of pieces) {
    if (length >= at) break;
    kept.push(piece.slice(0, at - length));
    length += piece.length;
  }
  return { pieces: kept, finish: "stop" };
}

export async function startOpenAiStub(): Promise<OpenAiStub> {
  const failures = new Map<string, StubFailure[]>();
  const stub: OpenAiStub = {
    url: "",
    requests: [],
    failNext(path, ...f) {
      failures.set(path, [...(failures.get(path) ?? []), ...f]);
    },
    streamPieces: ["Hello", " from", " the", " stub", "."],
    streamGapMs: 0,
    hasModelsRoute: true,
    generate: false,
    close: async () => {},
  };
  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };
  const server: Server = createServer(async (req, res) => {
    const path = (req.url ?? "").split("?")[0]!;
    const raw = await readBody(req);
    const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
    stub.requests.push({ method: req.method ?? "", path, headers: req.headers, body, at: performance.now() });
    const f = failures.get(path)?.shift();
    if (f) {
      if (f.status === "drop") {
        req.socket.destroy();
        return;
      }
      json(
        res,
        f.status,
        { error: { message: f.message ?? `stub failure ${f.status}`, type: "server_error", code: null } },
        f.retryAfter ? { "retry-after": f.retryAfter } : {},
      );
      return;
    }
    const model = String(body?.model ?? "");
    if (req.method === "GET" && path === "/v1/models") {
      if (!stub.hasModelsRoute) return json(res, 404, { error: { message: "not found" } });
      return json(res, 200, {
        object: "list",
        data: [{ id: "stub-model", object: "model", owned_by: "stub" }],
      });
    }
    if (req.method === "POST" && path === "/v1/embeddings") {
      const input = body?.input;
      // Token-id inputs are embedded as their JSON text.
      const texts = (Array.isArray(input) ? input : [input]).map((t) =>
        typeof t === "string" ? t : JSON.stringify(t),
      );
      return json(res, 200, {
        object: "list",
        data: texts.map((t, index) => ({ object: "embedding", index, embedding: stubEmbedding(t) })),
        model,
        usage: { prompt_tokens: texts.length * 3, total_tokens: texts.length * 3 },
      });
    }
    const chat = path === "/v1/chat/completions";
    if (req.method === "POST" && (chat || path === "/v1/completions")) {
      const { pieces, finish } = stub.generate
        ? generated(body)
        : { pieces: stub.streamPieces, finish: "stop" };
      const text = pieces.join("");
      if (!body?.stream) {
        return json(res, 200, {
          id: "stub-1",
          object: chat ? "chat.completion" : "text_completion",
          created: 0,
          model,
          choices: [
            chat
              ? { index: 0, message: { role: "assistant", content: text }, finish_reason: finish }
              : { index: 0, text, finish_reason: finish },
          ],
          usage: {
            prompt_tokens: 7,
            completion_tokens: pieces.length,
            total_tokens: 7 + pieces.length,
          },
        });
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      for (const piece of pieces) {
        if (res.destroyed) return;
        const choice = chat
          ? { index: 0, delta: { content: piece }, finish_reason: null }
          : { index: 0, text: piece, finish_reason: null };
        res.write(`data: ${JSON.stringify({ id: "stub-1", object: "chunk", model, choices: [choice] })}\n\n`);
        if (stub.streamGapMs) await new Promise((r) => setTimeout(r, stub.streamGapMs));
      }
      const last = chat
        ? { index: 0, delta: {}, finish_reason: finish }
        : { index: 0, text: "", finish_reason: finish };
      res.write(`data: ${JSON.stringify({ id: "stub-1", object: "chunk", model, choices: [last] })}\n\n`);
      res.write(
        `data: ${JSON.stringify({ id: "stub-1", object: "chunk", model, choices: [], usage: { prompt_tokens: 7, completion_tokens: pieces.length } })}\n\n`,
      );
      res.end("data: [DONE]\n\n");
      return;
    }
    json(res, 404, { error: { message: `no route ${req.method} ${path}` } });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  stub.url = `http://127.0.0.1:${port}/v1`;
  stub.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return stub;
}
