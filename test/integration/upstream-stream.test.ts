// Upstream streams and upstream error text through real listening servers, spoken to with the
// official `openai` client. A raw SSE upstream written here controls the bytes exactly: bare-CR
// and CRLF line endings, `event:`/`id:`/comment lines, an endless line without a newline, an
// `event: error` frame, and a producer that holds its second chunk until told to go on, which
// proves chunks are passed on as they arrive (an event from the producer, not a clock) both by
// a single server and through the API tier to a runner; and embeddings answers that are too
// large, out of order or inconsistent. The shared OpenAI stub answers errors
// that quote the API key: the key must appear nowhere in answers, logs or /readyz.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import { stringify } from "yaml";
import { type OpenAiStub, startOpenAiStub } from "../helpers/openai-stub.js";
import { type InProcessServer, startInProcess, waitReady } from "../helpers/server.js";

type Mode = "cr" | "endless" | "gated" | "error-event" | "big" | "reversed" | "duplicate";

/** A minimal OpenAI-compatible upstream whose streamed bytes each test chooses. */
interface RawUpstream {
  url: string;
  /** The stream mode of the next POST. */
  mode: Mode;
  /** Streaming POSTs received. */
  posts: number;
  /** Bytes written on the last endless stream, and whether its connection was closed on it. */
  endless: { bytes: number; closed: boolean };
  /** Gated mode: set once the chunks after the first were written; release() lets them go. */
  gated: { firstSent: boolean; restSent: boolean; release(): void };
  /** The text an error-event stream quotes. */
  errorText: string;
  close(): Promise<void>;
}

const chunk = (content: string) =>
  JSON.stringify({
    id: "raw-1",
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta: { content } }],
  });

async function startRawUpstream(): Promise<RawUpstream> {
  let release: () => void = () => {};
  const up: RawUpstream = {
    url: "",
    mode: "cr",
    posts: 0,
    endless: { bytes: 0, closed: false },
    gated: { firstSent: false, restSent: false, release: () => release() },
    errorText: "",
    close: async () => {},
  };
  const server: Server = createServer(async (req: IncomingMessage, res) => {
    let raw = "";
    for await (const c of req) raw += c;
    if (req.method === "GET") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "raw", object: "model" }] }));
      return;
    }
    up.posts++;
    if (up.mode === "reversed" || up.mode === "duplicate") {
      // Embeddings answered last input first (each with its index), or with an index twice.
      const input = (JSON.parse(raw) as { input: string[] }).input;
      const data = input.map((t, index) => ({ index, embedding: [t.length, index] })).reverse();
      if (up.mode === "duplicate") data[0]!.index = data[1]!.index;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ data, usage: { prompt_tokens: input.length } }));
      return;
    }
    if (up.mode === "big") {
      // A non-streamed (embeddings) answer of about 1 MB.
      res.writeHead(200, { "content-type": "application/json" });
      const embedding = Array.from({ length: 1 << 16 }, (_, i) => i / 7);
      res.end(JSON.stringify({ data: [{ index: 0, embedding }], usage: { prompt_tokens: 1 } }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    switch (up.mode) {
      case "cr":
        // Bare CR endings throughout, a named "message" event with an id, a comment, a "ping"
        // event the answer must skip, a CRLF event, and data split over two lines.
        res.write(`: keep-alive\r\revent: message\rid: 1\rdata: ${chunk("Hel")}\r\r`);
        res.write(`event: ping\rdata: {"choices":[{"index":0,"delta":{"content":"NOT TEXT"}}]}\r\r`);
        res.write(`data: ${chunk("lo")}\r\n\r\n`);
        res.write(`data: {"id":"raw-1","choices":\rdata: [{"index":0,"delta":{"content":" there"}}]}\r\r`);
        res.end(
          `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\r\rdata: [DONE]\r\r`,
        );
        return;
      case "error-event":
        res.write(`data: ${chunk("partial")}\n\n`);
        res.end(`event: error\ndata: ${JSON.stringify({ error: { message: up.errorText } })}\n\n`);
        return;
      case "endless": {
        up.endless = { bytes: 0, closed: false };
        const state = up.endless;
        res.on("close", () => {
          state.closed = true;
        });
        const piece = `data: ${"x".repeat(64 * 1024)}`;
        res.write("data: ");
        // One line that never ends, written as fast as the reader takes it.
        while (!state.closed && state.bytes < 512 * 1024 * 1024) {
          state.bytes += piece.length;
          if (!res.write(piece)) await new Promise((r) => res.once("drain", r).once("close", r));
        }
        res.destroy();
        return;
      }
      case "gated": {
        up.gated.firstSent = false;
        up.gated.restSent = false;
        const go = new Promise<void>((r) => {
          release = r;
        });
        res.write(`data: ${chunk("first")}\n\n`);
        up.gated.firstSent = true;
        // The rest only once the test saw the first chunk, or after 20 s if it never does.
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([go, new Promise((r) => (timer = setTimeout(r, 20_000)))]);
        clearTimeout(timer);
        up.gated.restSent = true;
        for (const t of [" second", " third"]) res.write(`data: ${chunk(t)}\n\n`);
        res.end("data: [DONE]\n\n");
        return;
      }
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  up.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  up.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return up;
}

function writeConfig(name: string, config: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), "modelport-upstream-stream-"));
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, stringify(config));
  return file;
}

/** Streams a chat answer; on the first delta calls `onFirst`. Returns the deltas. */
async function streamChat(client: OpenAI, model: string, onFirst?: () => void): Promise<string[]> {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "hi" }],
    stream: true,
  });
  const deltas: string[] = [];
  for await (const c of stream) {
    const d = c.choices[0]?.delta?.content;
    if (!d) continue;
    if (deltas.length === 0) onFirst?.();
    deltas.push(d);
  }
  return deltas;
}

describe("upstream streams (raw SSE upstream, real server)", () => {
  let up: RawUpstream;
  let server: InProcessServer;
  let client: OpenAI;

  before(async () => {
    up = await startRawUpstream();
    const file = writeConfig("raw", {
      server: { logLevel: "warn" },
      models: [
        {
          name: "raw",
          backend: "upstream",
          upstream: {
            url: up.url,
            model: "raw",
            backoffMs: 10,
            retries: 2,
            maxEventChars: 65536,
            maxResponseBytes: 100_000,
          },
        },
      ],
    });
    server = await startInProcess({ file });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });

  after(async () => {
    await server?.close();
    await up?.close();
  });

  it("reads bare-CR and CRLF line endings, named events, ids, comments and multi-line data", async () => {
    up.mode = "cr";
    const deltas = await streamChat(client, "raw");
    assert.deepEqual(deltas, ["Hel", "lo", " there"]);
  });

  it("cuts an endless line at upstream.maxEventChars with 502 MP_ERR_LLM_UPSTREAM_FAILED; no retry; the process stays up", async () => {
    up.mode = "endless";
    const before = up.posts;
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "raw", messages: [{ role: "user", content: "hi" }], stream: true }),
      signal: AbortSignal.timeout(60_000),
    });
    assert.equal(res.status, 502);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, "MP_ERR_LLM_UPSTREAM_FAILED");
    assert.match(body.error.message, /longer than 65536 characters \(upstream\.maxEventChars\)/);
    assert.equal(up.posts - before, 1, "a stream the upstream broke this way is not retried");
    // The reader let go of the connection instead of reading on.
    const deadline = Date.now() + 10_000;
    while (!up.endless.closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(up.endless.closed, "the upstream connection was closed");
    assert.ok(up.endless.bytes < 256 * 1024 * 1024, `${up.endless.bytes} bytes written before the cut`);
    assert.equal((await fetch(`${server.url}/livez`)).status, 200);
    up.mode = "cr";
    assert.deepEqual(await streamChat(client, "raw"), ["Hel", "lo", " there"]);
  });

  it("refuses a non-streamed answer over upstream.maxResponseBytes without retrying", async () => {
    up.mode = "big";
    const before = up.posts;
    await assert.rejects(client.embeddings.create({ model: "raw", input: "hi" }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.APIError);
      assert.equal(err.status, 502);
      assert.equal(err.code, "MP_ERR_LLM_UPSTREAM_FAILED");
      assert.match(err.message, /larger than 100000 bytes \(upstream\.maxResponseBytes\)/);
      return true;
    });
    assert.equal(up.posts - before, 1);
  });

  it("puts embeddings answered out of order back in input order; refuses an answer with an index twice", async () => {
    up.mode = "reversed";
    const input = ["a", "bb", "ccc"];
    const r = await client.embeddings.create({ model: "raw", input, encoding_format: "float" });
    assert.deepEqual(
      r.data.map((d) => d.embedding),
      [
        [1, 0],
        [2, 1],
        [3, 2],
      ],
    );
    up.mode = "duplicate";
    await assert.rejects(client.embeddings.create({ model: "raw", input }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.APIError);
      assert.equal(err.status, 502);
      assert.equal(err.code, "MP_ERR_LLM_UPSTREAM_FAILED");
      assert.match(err.message, /indexes are not 0…n-1, each once/);
      return true;
    });
  });

  it("passes each chunk on as it arrives: the client sees the first before the upstream sent the rest", async () => {
    up.mode = "gated";
    let restSentAtFirst: boolean | undefined;
    const deltas = await streamChat(client, "raw", () => {
      restSentAtFirst = up.gated.restSent;
      up.gated.release();
    });
    assert.equal(restSentAtFirst, false, "the first chunk reached the client before the rest was produced");
    assert.deepEqual(deltas, ["first", " second", " third"]);
  });
});

describe("upstream error text never carries the key (OpenAI stub)", () => {
  const KEY = "sk-quoted-secret-0123456789abcdef";
  const KEY_ENV = "MODELPORT_TEST_QUOTED_KEY";
  let stub: OpenAiStub;
  let up: RawUpstream;
  let server: InProcessServer;
  let client: OpenAI;
  const seen: string[] = [];

  before(async () => {
    stub = await startOpenAiStub();
    up = await startRawUpstream();
    process.env[KEY_ENV] = KEY;
    // The first readiness probe is refused with a body quoting the key; the next one passes.
    stub.failNext("/v1/models", { status: 401, message: `Incorrect API key provided: ${KEY}.` });
    const file = writeConfig("quoted", {
      server: { logLevel: "info" },
      models: [
        {
          name: "hosted",
          backend: "upstream",
          upstream: { url: stub.url, apiKeyEnv: KEY_ENV, model: "stub-model", backoffMs: 10, retries: 1 },
        },
        {
          name: "raw",
          backend: "upstream",
          upstream: { url: up.url, apiKeyEnv: KEY_ENV, model: "raw", backoffMs: 10, retries: 0 },
        },
      ],
    });
    server = await startInProcess({ file });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });

  after(async () => {
    await server?.close();
    await stub?.close();
    await up?.close();
    delete process.env[KEY_ENV];
  });

  it("/readyz gives a generic reason for a refused probe, without the upstream's words", async () => {
    const res = await fetch(`${server.url}/readyz`);
    const text = await res.text();
    seen.push(text);
    assert.equal(res.status, 503);
    const body = JSON.parse(text) as { models: Record<string, { reason?: string; code?: string }> };
    assert.equal(body.models.hosted?.code, "MP_ERR_LLM_UPSTREAM_FAILED");
    assert.match(body.models.hosted?.reason ?? "", /answered HTTP 401: the upstream refused the key in/);
    assert.doesNotMatch(text, /Incorrect API key/);
    // The probe is repeated and the upstream now answers.
    const deadline = Date.now() + 20_000;
    let status = 0;
    while (status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      const again = await fetch(`${server.url}/readyz`);
      seen.push(await again.text());
      status = again.status;
    }
    assert.equal(status, 200, "ready once the probe passed");
  });

  it("a refusal quoting the key reaches the client redacted, with the status and the rest of the message", async () => {
    stub.failNext("/v1/chat/completions", {
      status: 401,
      message: `Incorrect API key provided: ${KEY}. Header was 'Bearer ${KEY}', other key sk-other-9876543210.`,
    });
    await assert.rejects(
      client.chat.completions.create({ model: "hosted", messages: [{ role: "user", content: "hi" }] }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError);
        seen.push(JSON.stringify(err.error), err.message);
        assert.equal(err.status, 502);
        assert.equal(err.code, "MP_ERR_LLM_UPSTREAM_REJECTED");
        assert.match(err.message, /HTTP 401: Incorrect API key provided: \[redacted\]/);
        // The upstream's error type stays (the stub answers type "server_error").
        assert.match(err.message, /\(type server_error\)/);
        assert.doesNotMatch(err.message, /sk-other-9876543210/);
        return true;
      },
    );
  });

  it("retried 5xx answers quoting the key: redacted in the answer and in every log line", async () => {
    const failure = { status: 500, message: `upstream saw key=${KEY} and failed` };
    stub.failNext("/v1/chat/completions", failure, failure);
    await assert.rejects(
      client.chat.completions.create({ model: "hosted", messages: [{ role: "user", content: "hi" }] }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError);
        seen.push(JSON.stringify(err.error), err.message);
        assert.equal(err.code, "MP_ERR_LLM_UPSTREAM_FAILED");
        assert.match(err.message, /after 2 attempt\(s\).*HTTP 500/);
        return true;
      },
    );
    assert.ok(
      server.logs.some((l) => /retrying in/.test(String(l.msg))),
      "the retry was logged (with the redacted message)",
    );
  });

  it("an `event: error` frame quoting the key ends a started stream, redacted", async () => {
    up.mode = "error-event";
    up.errorText = `rate limited for Bearer ${KEY}`;
    const stream = await client.chat.completions.create({
      model: "raw",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    const deltas: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const c of stream)
          if (c.choices[0]?.delta?.content) deltas.push(c.choices[0].delta.content);
      })(),
      (err: unknown) => {
        seen.push(String(err), JSON.stringify((err as { error?: unknown }).error ?? null));
        assert.match(String(err), /the stream reported: rate limited for Bearer \[redacted\]/);
        return true;
      },
    );
    assert.deepEqual(deltas, ["partial"]);
  });

  it("the key appears in no answer, no log line and no /readyz or model status", async () => {
    seen.push(await (await fetch(`${server.url}/readyz`)).text());
    seen.push(await (await fetch(`${server.url}/v1/models/hosted`)).text());
    seen.push(JSON.stringify(server.logs));
    // The upstream did get the key: the test would pass vacuously otherwise.
    assert.ok(stub.requests.some((r) => r.headers.authorization === `Bearer ${KEY}`));
    for (const text of seen) assert.ok(!text.includes(KEY), `the key leaked into: ${text.slice(0, 300)}`);
    assert.ok(JSON.stringify(server.logs).includes("[redacted]"), "the logs kept the redacted messages");
  });
});

describe("API tier streaming to a runner (runner → slow upstream)", () => {
  let up: RawUpstream;
  let runner: InProcessServer;
  let api: InProcessServer;

  before(async () => {
    up = await startRawUpstream();
    // The runner serves "relay" from the raw upstream; the API tier knows it as a runner model.
    runner = await startInProcess({
      file: writeConfig("runner", {
        server: { logLevel: "warn" },
        models: [{ name: "relay", backend: "upstream", upstream: { url: up.url, model: "raw", retries: 0 } }],
      }),
      flags: { role: "runner" },
    });
    api = await startInProcess({
      file: writeConfig("api", {
        server: { logLevel: "warn" },
        models: [{ name: "relay", backend: "llama-cpp", path: "relay.gguf" }],
      }),
      flags: { role: "api", runners: [runner.url] },
    });
    const ready = await waitReady(api.url);
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
  });

  after(async () => {
    await api?.close();
    await runner?.close();
    await up?.close();
  });

  it("the client sees the first chunk through both tiers before the upstream produced the rest", async () => {
    up.mode = "gated";
    const client = new OpenAI({ baseURL: `${api.url}/v1`, apiKey: "unused", maxRetries: 0 });
    let restSentAtFirst: boolean | undefined;
    const deltas = await streamChat(client, "relay", () => {
      restSentAtFirst = up.gated.restSent;
      up.gated.release();
    });
    assert.equal(restSentAtFirst, false, "the first chunk crossed both tiers before the rest was produced");
    assert.deepEqual(deltas, ["first", " second", " third"]);
  });
});
