// Large all-ASCII text responses are handed to the socket as bytes (src/server/ascii-body.ts):
// the client must get exactly what it got before, with the same headers; anything with a
// non-ASCII character, and small bodies, take the usual path.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import Fastify from "fastify";
import { ASCII_BODY_MIN_CHARS, asciiBody, asciiBytes } from "../../src/server/ascii-body.js";

describe("large ASCII responses as bytes", () => {
  it("an all-ASCII body at or above the threshold becomes its bytes; others stay strings", () => {
    const ascii = "x".repeat(ASCII_BODY_MIN_CHARS);
    const bytes = asciiBytes(ascii);
    assert.ok(Buffer.isBuffer(bytes));
    assert.equal((bytes as Buffer).toString("utf8"), ascii);
    for (const other of [
      `${"x".repeat(ASCII_BODY_MIN_CHARS)}é`,
      `${"x".repeat(ASCII_BODY_MIN_CHARS)}日本`,
      "small",
    ])
      assert.equal(asciiBytes(other), other);
    const buffer = Buffer.from("already bytes");
    assert.equal(asciiBytes(buffer), buffer);
  });

  it("through Fastify: the same JSON, Content-Type and Content-Length, for ASCII and non-ASCII bodies", async () => {
    const app = Fastify();
    app.addHook("onSend", asciiBody);
    const data = Array.from({ length: 20_000 }, (_, i) => i / 7);
    app.get("/ascii", async () => ({ data }));
    app.get("/utf8", async () => ({ data, label: "café ☕" }));
    for (const [url, expected] of [
      ["/ascii", { data }],
      ["/utf8", { data, label: "café ☕" }],
    ] as const) {
      const res = await app.inject({ method: "GET", url });
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers["content-type"], "application/json; charset=utf-8");
      assert.equal(Number(res.headers["content-length"]), res.rawPayload.length);
      assert.deepEqual(JSON.parse(res.rawPayload.toString("utf8")), expected);
    }
    await app.close();
  });
});
