// The upstream client's pieces on their own: the Server-Sent Events reader over a real
// Response body (line endings, event names, the buffer limit, a last event without its blank
// line) and the redaction applied to everything an upstream says.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { redactSecrets, safeUpstreamText, safeUrl } from "../../src/backends/upstream/redact.js";
import {
  AttemptFailure,
  readBounded,
  readSse,
  type SseEvent,
} from "../../src/backends/upstream/upstream-client.js";

/** A Response whose body arrives in exactly these pieces. */
function body(...pieces: string[]): Response {
  const enc = new TextEncoder();
  return new Response(
    new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of pieces) c.enqueue(enc.encode(p));
        c.close();
      },
    }),
  );
}

async function all(res: Response, max = 1 << 20): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const e of readSse(res, () => {}, max)) out.push(e);
  return out;
}

describe("readSse", () => {
  it("splits on LF, CRLF and bare CR, across chunk boundaries, and keeps event names", async () => {
    const events = await all(
      body("data: a\r", "\rdata: b\r\n\r\nevent: ping\nda", "ta: c\n\n", "data: d\r\r"),
    );
    assert.deepEqual(events, [
      { event: undefined, data: "a" },
      { event: undefined, data: "b" },
      { event: "ping", data: "c" },
      { event: undefined, data: "d" },
    ]);
  });

  it("joins multi-line data and reads a last event that lacks its blank line", async () => {
    assert.deepEqual(await all(body("data: x\ndata: y\n\ndata: [DONE]")), [
      { event: undefined, data: "x\ny" },
      { event: undefined, data: "[DONE]" },
    ]);
  });

  it("a line longer than the limit ends the read with a non-retryable failure", async () => {
    let pulled = 0;
    const endless = new Response(
      new ReadableStream<Uint8Array>({
        pull(c) {
          pulled++;
          c.enqueue(new TextEncoder().encode("x".repeat(1000)));
        },
      }),
    );
    await assert.rejects(all(endless, 10_000), (err: unknown) => {
      assert.ok(err instanceof AttemptFailure);
      assert.equal(err.retryable, false);
      assert.match(err.message, /longer than 10000 characters/);
      return true;
    });
    assert.ok(pulled < 100, `read ${pulled} chunks past a 10-chunk limit`);
  });

  it("events seen before the limit was crossed are still delivered", async () => {
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const e of readSse(body("data: ok\n\n", `data: ${"y".repeat(50)}`), () => {}, 20))
        seen.push(e.data);
    });
    assert.deepEqual(seen, ["ok"]);
  });
});

describe("readBounded", () => {
  it("stops at the byte limit and says the body was cut", async () => {
    assert.deepEqual(await readBounded(body("abc", "def"), 4), { text: "abcd", truncated: true });
    assert.deepEqual(await readBounded(body("abc", "def"), 6), { text: "abcdef", truncated: false });
  });
});

describe("redaction of upstream text", () => {
  it("removes the configured key, bearer values, provider-shaped keys and key=value pairs", () => {
    const text =
      "bad key my-own-secret-42; Authorization: Bearer abc.def-123; other sk-proj-ABCDEF123456, hf_abcdefghij, api_key=zzzz9999";
    const out = redactSecrets(text, ["my-own-secret-42"]);
    for (const secret of [
      "my-own-secret-42",
      "abc.def-123",
      "sk-proj-ABCDEF123456",
      "hf_abcdefghij",
      "zzzz9999",
    ])
      assert.ok(!out.includes(secret), `${secret} in ${out}`);
    assert.match(out, /bad key \[redacted\]; Authorization: Bearer \[redacted\]/);
  });

  it("redacts before bounding (a key cut by the bound cannot leak its start) and drops control characters", () => {
    const key = "k".repeat(40);
    const out = safeUpstreamText(`${"a".repeat(280)}${key}\nforged log line`, [key], 300);
    assert.ok(!out.includes("kkkk"), out);
    assert.ok(!out.includes("\n"));
    assert.ok(out.length <= 301);
  });

  it("URLs lose user-info and query", () => {
    assert.equal(
      safeUrl("https://user:pw@host.example/v1/models?key=abc#x"),
      "https://host.example/v1/models",
    );
  });
});
