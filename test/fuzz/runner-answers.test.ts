// Fuzzes what an API tier does with a runner's answers (docs/Runners.md): a `--role api` process
// reaches a real `--role runner` process through a proxy written here, which bends the runner's
// answers as the case says (health polls, infers and management calls alike): the status, the
// body's bytes, its JSON, its length, the binary header's length, the content type; or cuts the
// connection, or stalls. A runner is infrastructure, but a misconfigured URL, a proxy or a
// broken runner answers like this. Every client request through the API tier gets an answer in
// its route's shape with a code of the table (503 MP_ERR_RUNNER_UNAVAILABLE and MP_ERR_MODEL_NOT_READY,
// 502 and 504 allowed), never an internal error; and once the proxy passes the runner's answers
// through again, the API tier answers as the runner does within seconds.
import assert from "node:assert/strict";
import { createServer, request as httpRequest, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import type { ErrorCode } from "../../src/errors.js";
import { encode, type Json, mutated, nativeBody, oipBody } from "./arbitraries.js";
import {
  type Answer,
  check,
  checkAnswer,
  essence,
  send,
  styleOf,
  useFuzzServer,
  warmTree,
} from "./harness.js";

/** How the proxy bends each answer of the runner while a case runs. */
type Bend =
  | { kind: "pass" }
  | { kind: "status"; status: number }
  | { kind: "json"; value: Json }
  | { kind: "flip"; at: number; xor: number; count: number }
  | { kind: "truncate"; at: number }
  | { kind: "headerLength"; value: string }
  | { kind: "contentType"; value: string }
  | { kind: "junk"; text: string }
  | { kind: "cut"; at: number }
  | { kind: "stall" };

let bend: Bend = { kind: "pass" };
const stalled = new Set<ServerResponse>();
let runnerUrl = "";

/** The runner's answer, bent, as `res`. */
function answer(res: ServerResponse, status: number, headers: Record<string, string>, body: Buffer): void {
  const b = bend;
  const h = { ...headers };
  let out = body;
  switch (b.kind) {
    case "status":
      status = b.status;
      break;
    case "json":
      if (/json/.test(h["content-type"] ?? "")) out = Buffer.from(encode(b.value));
      break;
    case "flip":
      out = Buffer.from(body);
      for (let i = 0; i < b.count && out.length > 0; i++) {
        const at = (b.at + i * 7919) % out.length;
        out[at] = out[at]! ^ b.xor;
      }
      break;
    case "truncate":
      out = body.subarray(0, body.length ? b.at % body.length : 0);
      break;
    case "headerLength":
      if (h["inference-header-content-length"] !== undefined) h["inference-header-content-length"] = b.value;
      break;
    case "contentType":
      h["content-type"] = b.value;
      break;
    case "junk":
      out = Buffer.from(b.text);
      break;
    case "cut":
      res.writeHead(status, { ...h, "content-length": String(body.length) });
      res.write(body.subarray(0, body.length ? b.at % body.length : 0));
      res.destroy();
      return;
    case "stall":
      stalled.add(res);
      res.on("close", () => stalled.delete(res));
      return;
  }
  h["content-length"] = String(out.length);
  res.writeHead(status, h);
  res.end(out);
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length"]);

const proxy = createServer(async (req, res) => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const target = new URL(req.url ?? "/", runnerUrl);
  const headers = { ...req.headers };
  delete headers.host;
  const upstream = httpRequest(
    {
      host: target.hostname,
      port: target.port,
      path: target.pathname + target.search,
      method: req.method,
      headers,
    },
    (r) => {
      const body: Buffer[] = [];
      r.on("data", (c: Buffer) => body.push(c));
      r.on("end", () => {
        const h: Record<string, string> = {};
        for (const [k, v] of Object.entries(r.headers))
          if (typeof v === "string" && !HOP_BY_HOP.has(k)) h[k] = v;
        answer(res, r.statusCode ?? 502, h, Buffer.concat(body));
      });
      r.on("error", () => res.destroy());
    },
  );
  upstream.on("error", () => res.destroy());
  upstream.end(Buffer.concat(chunks));
});
await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
after(() => {
  for (const res of stalled) res.destroy();
  proxy.close();
  proxy.closeAllConnections();
});

const server = useFuzzServer({
  warm: warmTree,
  tiers: true,
  server: ["runnerPollMs: 50"],
  runnerProxy: async (runner) => {
    runnerUrl = runner;
    return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  },
});

const bendOf: fc.Arbitrary<Bend> = fc.oneof(
  fc.constantFrom(200, 204, 301, 400, 404, 409, 413, 429, 500, 502, 503).map((status) => ({
    kind: "status" as const,
    status,
  })),
  mutated(
    fc.constantFrom<Json>(
      { models: [{ name: "tree", ready: true }] },
      { error: "x", code: "MP_ERR_MODEL_NOT_READY" },
      { outputs: [{ name: "y", datatype: "FP32", shape: [1], data: [1] }] },
    ),
    16,
  ).map((value) => ({ kind: "json" as const, value })),
  fc
    .record({ at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }), count: fc.integer({ min: 1, max: 4 }) })
    .map((f) => ({ kind: "flip" as const, ...f })),
  fc.nat().map((at) => ({ kind: "truncate" as const, at })),
  fc
    .constantFrom("0", "-1", "1", "99999999", "abc", "12.5", "", "18446744073709551616")
    .map((value) => ({ kind: "headerLength" as const, value })),
  fc
    .constantFrom("text/html", "application/octet-stream", "application/json", "")
    .map((value) => ({ kind: "contentType" as const, value })),
  fc
    .oneof(fc.string({ maxLength: 40 }), fc.constantFrom("<html>502</html>", "{", "null", "[]"))
    .map((text) => ({
      kind: "junk" as const,
      text,
    })),
  fc.nat().map((at) => ({ kind: "cut" as const, at })),
  { arbitrary: fc.constant({ kind: "stall" as const }), weight: 1 },
);

/** A request for the API tier: a valid native or OIP body for one of the example models. */
const requestOf = fc.oneof(
  nativeBody.map(({ model, body }) => ({ path: `/v1/models/${model}/predict`, body })),
  oipBody.map(({ model, body }) => ({ path: `/v2/models/${model}/infer`, body })),
);

/** What a runner failing or unreachable may cost a request through the API tier. */
const RUNNER_FAILURES: ErrorCode[] = [
  "MP_ERR_RUNNER_UNAVAILABLE",
  "MP_ERR_MODEL_NOT_READY",
  "MP_ERR_DEADLINE_EXCEEDED",
];

const seen = { refused: 0, answered: 0, recoveredAfterMs: 0 };

describe("an API tier in front of a runner whose answers are bent", () => {
  it("every request gets a coded answer in its route's shape; unbent again, the API tier answers as the runner", () =>
    check(
      "runnerAnswers",
      fc.asyncProperty(bendOf, requestOf, async (b, { path, body }) => {
        bend = b;
        const text = encode(body);
        const what = ` (${JSON.stringify(b).slice(0, 300)}: ${path} ${text.slice(0, 200)})`;
        // A deadline, for the stalls; not on the comparisons below, which no clock may decide.
        const headers = { "content-type": "application/json" };
        const res = await send(server.url, "POST", path, {
          headers: { ...headers, "x-request-timeout-ms": "1000" },
          body: text,
        });
        const code = checkAnswer(res, styleOf(path), {
          what,
          clientDeadline: true,
          allowed5xx: RUNNER_FAILURES,
        });
        if (code === undefined) seen.answered++;
        else seen.refused++;
        // The runner behaves again: within 10 s the API tier answers this request as it does.
        bend = { kind: "pass" };
        for (const res of stalled) res.destroy();
        const direct = await send(server.runner, "POST", path, { headers, body: text });
        const started = performance.now();
        let via: Answer;
        do {
          via = await send(server.url, "POST", path, { headers, body: text });
          if (JSON.stringify(essence(via)) === JSON.stringify(essence(direct))) break;
          await new Promise((r) => setTimeout(r, 50));
        } while (performance.now() - started < 10_000);
        assert.deepEqual(
          essence(via),
          essence(direct),
          `not recovered after 10 s: ${via.text.slice(0, 300)}${what}`,
        );
        seen.recoveredAfterMs = Math.max(seen.recoveredAfterMs, performance.now() - started);
      }),
    ));

  it("bent answers were refused and others answered", (t) => {
    t.diagnostic(JSON.stringify(seen));
    assert.ok(seen.refused > 0 && seen.answered > 0, JSON.stringify(seen));
  });

  server.finalCheck();
});
