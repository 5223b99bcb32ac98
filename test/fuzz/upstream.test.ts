// Fuzzes the upstream backend (docs/LLM.md) from the other side: a `modelport serve` process
// with an `upstream` model in front of an OpenAI-compatible server written here, which answers
// each call as the case says: a valid answer, one mutated as JSON or as text, a stream of valid,
// mutated and junk Server-Sent Events (an `event: error` frame, a line past maxEventChars, no
// [DONE]), an error status, a Retry-After of any form, a connection cut or a stall. Error bodies,
// junk and error frames quote the API key. Whatever the upstream does, the client gets a valid
// answer or a coded error in OpenAI's shape (502 MP_ERR_LLM_UPSTREAM_* for the upstream's
// failures), a started stream ends with [DONE] or a coded error event, and the key appears in no
// answer and no line of the server's log.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { ERRORS, type ErrorCode } from "../../src/errors.js";
import {
  chatBody,
  completionBody,
  embeddingBody,
  encode,
  type Json,
  mutated,
  mutatedText,
} from "./arbitraries.js";
import { type Answer, check, checkAnswer, postJson, useFuzzServer } from "./harness.js";

/** The upstream's API key, in the server's environment: it must never reach a client or the log. */
const KEY = `sk-fuzz${randomBytes(12).toString("hex")}`;
process.env.MODELPORT_FUZZ_UPSTREAM_KEY = KEY;
/** Longest event line the server takes from the upstream (upstream.maxEventChars). */
const MAX_EVENT_CHARS = 4096;

type Kind = "chat" | "completions" | "embeddings";

/** How the upstream answers the next call (every attempt of it, retries included). */
interface Plan {
  status: number;
  headers: Record<string, string>;
  /** Written one after another. */
  chunks: string[];
  /** After the chunks: end the answer, destroy the connection, or leave it open (a stall). */
  ending: "end" | "cut" | "stall";
}

let plan: Plan = { status: 200, headers: {}, chunks: ["{}"], ending: "end" };
const stalled = new Set<ServerResponse>();
const upstream = createServer(async (req, res) => {
  for await (const _ of req);
  if (req.method === "GET") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ object: "list", data: [{ id: "up", object: "model", owned_by: "fuzz" }] }));
    return;
  }
  const p = plan;
  res.writeHead(p.status, p.headers);
  for (const c of p.chunks) res.write(c);
  if (p.ending === "end") res.end();
  else if (p.ending === "cut") res.destroy();
  else {
    stalled.add(res);
    res.on("close", () => stalled.delete(res));
  }
});
await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
after(() => {
  for (const res of stalled) res.destroy();
  upstream.close();
});
const UPSTREAM_URL = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;

async function warm(url: string): Promise<void> {
  plan = {
    status: 200,
    headers: { "content-type": "application/json" },
    chunks: [valid("chat")],
    ending: "end",
  };
  await postJson(url, "/v1/chat/completions", { model: "up", messages: [{ role: "user", content: "hi" }] });
}

const server = useFuzzServer({
  warm,
  extra: [
    "  - name: up",
    "    backend: upstream",
    "    upstream:",
    `      url: ${UPSTREAM_URL}`,
    "      apiKeyEnv: MODELPORT_FUZZ_UPSTREAM_KEY",
    "      model: up",
    "      timeoutMs: 500",
    "      retries: 1",
    "      backoffMs: 1",
    "      maxBackoffMs: 5",
    `      maxEventChars: ${MAX_EVENT_CHARS}`,
    "      maxResponseBytes: 65536",
  ],
});

const text = fc.oneof(fc.string({ maxLength: 16 }), fc.constantFrom("", "hello", "\u0000", "💥", "\\u0000"));

/** A valid answer of the upstream for `kind` (one chunk of a stream when `streamed`). */
function valid(kind: Kind, streamed = false, content = "hi"): string {
  if (kind === "embeddings")
    return JSON.stringify({
      object: "list",
      model: "up",
      data: [{ object: "embedding", index: 0, embedding: [0.1, -0.2, 0.3] }],
      usage: { prompt_tokens: 2, total_tokens: 2 },
    });
  const chat = kind === "chat";
  const choice = streamed
    ? { index: 0, ...(chat ? { delta: { content } } : { text: content }), finish_reason: null }
    : {
        index: 0,
        ...(chat ? { message: { role: "assistant", content } } : { text: content }),
        finish_reason: "stop",
      };
  return JSON.stringify({
    id: "up-1",
    object: chat ? (streamed ? "chat.completion.chunk" : "chat.completion") : "text_completion",
    created: 1,
    model: "up",
    choices: [choice],
    ...(streamed ? {} : { usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }),
  });
}

/** A valid answer as a JSON value, for mutating. */
const validValue = (kind: Kind, streamed: boolean): fc.Arbitrary<Json> =>
  text.map((content) => JSON.parse(valid(kind, streamed, content)) as Json);

/** Text that is no JSON and quotes the key, as a careless upstream's error page might. */
const keyedJunk = fc
  .tuple(fc.constantFrom("Unauthorized: ", "<html>bad key ", "error=", "key "), fc.string({ maxLength: 8 }))
  .map(([a, b]) => `${a}${KEY}${b}`);

/** An error body that quotes the key. */
const errorBody = fc.oneof(
  fc
    .constantFrom("invalid_api_key", "rate_limit", "server_error")
    .map((type) => JSON.stringify({ error: { message: `Incorrect API key provided: ${KEY}`, type } })),
  keyedJunk,
  fc.constant(""),
);

/** One event of a stream: a valid chunk, a mutated one, junk, a comment, an error frame, a long line. */
function event(kind: Kind): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: text.map((t) => `data: ${valid(kind, true, t)}`), weight: 6 },
    { arbitrary: mutated(validValue(kind, true), 16).map((v) => `data: ${encode(v)}`), weight: 2 },
    { arbitrary: mutatedText(validValue(kind, true)).map((t) => `data: ${t}`), weight: 1 },
    { arbitrary: keyedJunk, weight: 1 },
    {
      arbitrary: fc.constantFrom(": ping", "event: ping", "id: 7", "retry: 10", "data:", "data: [DONE]x"),
      weight: 1,
    },
    {
      arbitrary: fc.constant(
        `event: error\ndata: ${JSON.stringify({ error: { message: `upstream broke, key ${KEY}` } })}`,
      ),
      weight: 1,
    },
    { arbitrary: fc.nat(3).map((n) => `data: ${"x".repeat(MAX_EVENT_CHARS + n)}`), weight: 1 },
  );
}

/** A stream: events with any line ending, usually [DONE] at the end, the bytes cut anywhere. */
function stream(kind: Kind): fc.Arbitrary<string[]> {
  return fc
    .tuple(
      fc.array(event(kind), { maxLength: 6 }),
      fc.constantFrom("\n\n", "\n\n", "\r\n\r\n", "\r\r"),
      fc.boolean(),
      fc.nat(),
    )
    .map(([events, sep, done, cutAt]) => {
      const all = [...events, ...(done ? ["data: [DONE]"] : [])].map((e) => `${e}${sep}`);
      // Written in two pieces split anywhere, so that lines cross chunk boundaries.
      const whole = all.join("");
      const at = whole.length ? cutAt % whole.length : 0;
      return [whole.slice(0, at), whole.slice(at)];
    });
}

const RETRY_AFTER = fc.constantFrom(
  undefined,
  "0",
  "1",
  "3600",
  "-1",
  "abc",
  "Wed, 21 Oct 2015 07:28:00 GMT",
);

/** How the upstream answers a call of `kind`, streamed or not. */
function planFor(kind: Kind, streamed: boolean): fc.Arbitrary<Plan> {
  const ok: fc.Arbitrary<string[]> = streamed
    ? stream(kind)
    : fc
        .oneof(
          { arbitrary: validValue(kind, false).map((v) => encode(v)), weight: 3 },
          { arbitrary: mutated(validValue(kind, false), 16).map((v) => encode(v)), weight: 3 },
          { arbitrary: mutatedText(validValue(kind, false)), weight: 2 },
          { arbitrary: keyedJunk, weight: 1 },
        )
        .map((body) => [body]);
  const type = streamed ? "text/event-stream" : "application/json";
  return fc.oneof(
    {
      arbitrary: fc.record({
        status: fc.constant(200),
        headers: fc.constantFrom<Record<string, string>>(
          { "content-type": type },
          { "content-type": "text/plain" },
          {},
        ),
        chunks: ok,
        // A stall costs a timeoutMs per attempt: rare, so that the default run stays short.
        ending: fc.oneof(
          { arbitrary: fc.constant<Plan["ending"]>("end"), weight: 14 },
          { arbitrary: fc.constant<Plan["ending"]>("cut"), weight: 2 },
          { arbitrary: fc.constant<Plan["ending"]>("stall"), weight: 1 },
        ),
      }),
      weight: 6,
    },
    {
      arbitrary: fc
        .record({
          status: fc.constantFrom(400, 401, 403, 404, 409, 422, 429, 500, 502, 503, 504),
          retryAfter: RETRY_AFTER,
          body: errorBody,
          ending: fc.constantFrom<Plan["ending"]>("end", "end", "end", "cut"),
        })
        .map(({ status, retryAfter, body, ending }) => ({
          status,
          headers: {
            "content-type": "application/json",
            ...(retryAfter ? { "retry-after": retryAfter } : {}),
          },
          chunks: [body],
          ending,
        })),
      weight: 3,
    },
  );
}

const ROUTES: Record<Kind, { path: string; body: fc.Arbitrary<Json> }> = {
  chat: { path: "/v1/chat/completions", body: chatBody },
  completions: { path: "/v1/completions", body: completionBody },
  embeddings: { path: "/v1/embeddings", body: embeddingBody },
};

/** A valid client request for the upstream model, and how the upstream answers it. */
const exchange = fc.constantFrom<Kind>("chat", "completions", "embeddings").chain((kind) =>
  ROUTES[kind].body.chain((body) => {
    const request: Record<string, Json> = { ...(body as Record<string, Json>), model: "up" };
    const streamed = request.stream === true;
    return planFor(kind, streamed).map((p) => ({ kind, request, streamed, plan: p }));
  }),
);

/** The upstream's failures, as the client is told of them. */
const UPSTREAM_FAILURES: ErrorCode[] = ["MP_ERR_LLM_UPSTREAM_FAILED", "MP_ERR_LLM_UPSTREAM_REJECTED"];

/** Calls ended by the upstream's failure, and calls answered: a run must see both. */
const seen = { answered: 0, failed: 0, streamsCut: 0 };

/** A 200 stream: each event's data is JSON or [DONE]; it ends with [DONE] or a coded error event. */
function checkStream(res: Answer, what: string): void {
  const data = res.text
    .split("\n\n")
    .filter((e) => e !== "")
    .map((e) => {
      assert.ok(e.startsWith("data: "), `an event of data only: ${JSON.stringify(e.slice(0, 200))}${what}`);
      return e.slice(6);
    });
  const last = data.at(-1);
  if (last === "[DONE]") return;
  const error = (JSON.parse(last ?? "null") as { error?: { code?: string } } | null)?.error;
  const code = error?.code;
  assert.ok(
    typeof code === "string" && code in ERRORS,
    `a stream ends with [DONE] or a coded error: ${last}${what}`,
  );
  assert.ok(ERRORS[code as ErrorCode].status !== 500, `an internal error ended the stream: ${last}${what}`);
  seen.streamsCut++;
}

describe("upstream backend against a hostile upstream", () => {
  it("every answer is valid or coded, streams end cleanly, and the key is never in an answer", () =>
    check(
      "upstream",
      fc.asyncProperty(exchange, async ({ kind, request, streamed, plan: p }) => {
        plan = p;
        const what = ` (${kind}${streamed ? ", streamed" : ""}; upstream ${p.status} ${JSON.stringify(p.headers)} ${p.ending}: ${JSON.stringify(p.chunks).slice(0, 400)})`;
        const res = await postJson(server.url, ROUTES[kind].path, request);
        assert.ok(!res.text.includes(KEY), `the key in an answer: ${res.text.slice(0, 400)}${what}`);
        const code = checkAnswer(res, "openai", { what, allowed5xx: UPSTREAM_FAILURES });
        if (code === undefined) {
          assert.equal(res.status, 200, what);
          seen.answered++;
          if (streamed) checkStream(res, what);
          else assert.ok(res.json !== undefined, `a 200 answer is JSON: ${res.text.slice(0, 200)}${what}`);
        } else seen.failed++;
      }),
    ));

  it("both answers and failures were seen, and the key is in no line of the server's log", (t) => {
    t.diagnostic(JSON.stringify(seen));
    assert.ok(seen.answered > 0 && seen.failed > 0, JSON.stringify(seen));
    assert.ok(!server.output().includes(KEY), "the upstream's key in the server's log");
  });

  server.finalCheck();
});
