// Every decision follows the route a request reached, however its path was spelled. The router
// decodes percent-escapes, drops a fragment and reads an absolute-form target, so
// `/v1/%63ompletions`, `/v1/completions#x` and `http://host/v1/completions` all reach the
// completions route: each must be limited by the key's tokens per minute as the plain path is;
// a probe spelled any way is a probe (no key, answered while draining, logged at debug); and an
// error raised before routing answers in the style of the route the path is for. Spellings the
// router does not reach (trailing slash, doubled or escaped slash, other case, dot segments) are
// 404s. Requests go over a raw socket, so the target reaches the server exactly as written.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createGate } from "../helpers/gate.js";
import { testModels } from "../helpers/models.js";
import { type RawResponse, rawRequest } from "../helpers/raw-http.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

const ADMIN = `mp_${"a".repeat(43)}`;
const hash = (key: string) => `sha256:${createHash("sha256").update(key).digest("hex")}`;

const CHAT = { model: "tiny-llama", messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
const COMPLETION = { model: "tiny-llama", prompt: "hi", max_tokens: 2 };
const EMBEDDING = { model: "tiny-embed", input: "a cat" };

/** Each spelling of a language route, with its body: one key of 1 token a minute per spelling. */
const LANGUAGE_SPELLINGS: [string, unknown][] = [
  ["/v1/completions", COMPLETION],
  ["/v1/%63ompletions", COMPLETION],
  ["/%76%31/%63%6F%6D%70%6C%65%74%69%6F%6E%73", COMPLETION],
  ["/v1/completions#fragment", COMPLETION],
  ["http://modelport.test/v1/completions", COMPLETION],
  ["/v1/chat/completions", CHAT],
  ["/v1/chat/%63ompletions", CHAT],
  ["/v1/%63hat/completions#x", CHAT],
  ["/v1/embeddings", EMBEDDING],
  ["/v1/%65mbeddings", EMBEDDING],
];
const tpmKey = (i: number) => `mp_tpm${String(i).padStart(40, "0")}`;

let server: InProcessServer;
const gate = createGate();

function send(target: string, key: string | undefined, body?: unknown): Promise<RawResponse> {
  const text = body === undefined ? "" : JSON.stringify(body);
  return rawRequest(
    server.url,
    [
      `${body === undefined ? "GET" : "POST"} ${target} HTTP/1.1`,
      "Host: modelport.test",
      ...(key ? [`Authorization: Bearer ${key}`] : []),
      ...(body === undefined ? [] : ["Content-Type: application/json"]),
      `Content-Length: ${Buffer.byteLength(text)}`,
      "Connection: close",
      "",
      text,
    ].join("\r\n"),
  );
}

before(async () => {
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-matched-route-"));
  const keys = [
    `  - {name: ops, role: admin, hash: ${hash(ADMIN)}}`,
    ...LANGUAGE_SPELLINGS.map(
      (_, i) => `  - {name: tpm-${i}, hash: ${hash(tpmKey(i))}, limits: {tokensPerMinute: 1}}`,
    ),
  ];
  writeFileSync(join(dir, "keys.yaml"), ["keys:", ...keys, ""].join("\n"));
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "server:",
      `  keys: ${join(dir, "keys.yaml")}`,
      // The drain below is ended by the gate, not by this limit.
      "  drainTimeoutMs: 600000",
      "limits: {timeoutMs: 600000}",
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      "models:",
      `  - {name: tiny-llama, path: ${join(models, "tiny-llama.gguf")}, llm: {sequences: 1, contextSize: 512}}`,
      `  - {name: tiny-embed, backend: transformers, path: ${join(models, "tiny-embed")}}`,
      gate.modelYaml("gate"),
      "",
    ].join("\n"),
  );
  server = await startInProcess({ file, env: {} });
});

after(async () => {
  gate.openAll();
  await server?.close();
});

describe("decisions follow the matched route, not the URL as spelled", () => {
  it("a key's tokens per minute hold on every spelling of the language routes: charged, then refused", async () => {
    for (const [i, [target, body]] of LANGUAGE_SPELLINGS.entries()) {
      const key = tpmKey(i);
      const first = await send(target, key, body);
      assert.equal(first.status, 200, `${target}: ${first.body}`);
      // The tokens bucket applies to this request: its policy is on the answer.
      assert.match(first.headers["ratelimit-policy"] ?? "", /"tokens";q=1;w=60/, target);
      // The answer's tokens are taken from the bucket once the response has ended (after the
      // client has it): the same spelling is refused once they are.
      let refused: RawResponse | undefined;
      for (let n = 0; n < 100 && refused === undefined; n++) {
        const next = await send(target, key, body);
        if (next.status === 429) refused = next;
        else {
          assert.equal(next.status, 200, `${target}: ${next.body}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
      assert.ok(refused, `${target}: never refused over 1 token a minute`);
      const error = JSON.parse(refused.body).error;
      assert.deepEqual([error.code, error.type], ["MP_ERR_RATE_LIMITED", "rate_limit_error"], target);
      assert.ok(Number(refused.headers["retry-after"]) >= 1, target);
    }
  });

  it("a key charged on a percent-encoded path is refused on the plain one", async () => {
    // tpm-1 spent its tokens on /v1/%63ompletions above.
    const plain = await send("/v1/completions", tpmKey(1), COMPLETION);
    assert.equal(plain.status, 429, plain.body);
  });

  it("spellings the router does not reach are 404s, whatever the key", async () => {
    for (const target of [
      "/v1/completions/",
      "//v1/completions",
      "/V1/completions",
      "/v1/COMPLETIONS",
      "/v1%2Fcompletions",
      "/v1%2fcompletions",
      "/v1/completions;x",
      "/v1/./completions",
      "/v1/x/../completions",
    ]) {
      const res = await send(target, tpmKey(0), COMPLETION);
      assert.equal(res.status, 404, `${target}: ${res.body}`);
      assert.equal(JSON.parse(res.body).error.code, "MP_ERR_ROUTE_NOT_FOUND", target);
    }
  });

  it("a probe spelled any way needs no key and is logged at debug, not as a request", async () => {
    const probes = [
      "/livez?verbose=1",
      "/%6civez",
      "/liv%65z?x=1",
      "/livez#top",
      "http://modelport.test/livez",
      "/v2/health/%6cive",
      "/%72eadyz",
      "/v2/health/r%65ady",
    ];
    for (const target of probes) {
      const res = await send(target, undefined);
      assert.equal(res.status, 200, `${target}: ${res.body}`);
    }
    // The server logs at info: a probe's line (debug) is not among them.
    const logged = server.logs.filter((l) => l.msg === "request completed").map((l) => l.url);
    for (const target of probes) assert.ok(!logged.includes(target), `${target} logged at info`);
    // A request that is not a probe is, which shows the lines are there to be seen.
    await send("/v1/%6dodels", ADMIN);
    assert.ok(
      server.logs.some((l) => l.msg === "request completed" && l.url === "/v1/%6dodels"),
      "a plain request's line",
    );
  });

  it("an error raised before routing answers in the style of the route the path is for", async () => {
    // A malformed escape and an over-long model name: the router refuses both before any route.
    for (const target of ["/v2/%6Dodels/%ZZ/infer", `/v2/%6dodels/${"m".repeat(101)}/infer`]) {
      const res = await send(target, ADMIN, { inputs: [] });
      assert.equal(res.status, 400, `${target}: ${res.body}`);
      const body = JSON.parse(res.body);
      // The Open Inference Protocol's shape: {error: "<message>", code}.
      assert.equal(typeof body.error, "string", `${target}: ${res.body}`);
      assert.equal(body.code, "MP_ERR_REQUEST_INVALID", target);
    }
  });

  it("while draining, a probe spelled any way is answered; anything else is 503 MP_ERR_SERVER_SHUTTING_DOWN", async () => {
    const held = postJson(
      `${server.url}/v1/models/gate/predict`,
      { rows: [[7]] },
      {
        authorization: `Bearer ${ADMIN}`,
      },
    );
    await gate.started(7);
    const closed = server.close();
    // Readiness turns false as the drain begins; the held request keeps it going.
    for (let i = 0; ; i++) {
      const r = await send("/readyz", undefined);
      if (r.status === 503) break;
      assert.ok(i < 3000, "readiness never turned false");
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal((await send("/%6civez", undefined)).status, 200);
    assert.equal((await send("/v2/health/%6cive", undefined)).status, 200);
    // With a key: a caller without one is told the status and counts, no reasons.
    const ready = await send("/%72eadyz", ADMIN);
    assert.equal(ready.status, 503);
    assert.deepEqual(JSON.parse(ready.body).reasons.slice(0, 1), ["server is shutting down"]);
    const late = await send("/v1/%63ompletions", ADMIN, COMPLETION);
    assert.equal(late.status, 503);
    assert.equal(JSON.parse(late.body).error.code, "MP_ERR_SERVER_SHUTTING_DOWN");
    gate.open(7);
    assert.equal((await held).status, 200);
    await closed;
  });
});
