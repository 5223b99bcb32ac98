// Fuzzes request headers on a real `modelport serve` process: X-Request-Timeout-Ms,
// Idempotency-Key, Prefer, traceparent-like garbage, Content-Type and Accept garbage through an
// HTTP client, and, over raw sockets, Content-Length that disagrees with the body and header
// bytes no HTTP client would send. Every answer is a 2xx or a coded 4xx in its route's shape.
import assert from "node:assert/strict";
import { connect } from "node:net";
import { describe, it } from "node:test";
import fc from "fast-check";
import { edgeNumber, headerSafe } from "./arbitraries.js";
import { type Answer, check, checkAnswer, postJson, send, styleOf, useFuzzServer } from "./harness.js";

const TREE_ROWS = '{"rows":[[1,2,3,4,5,6]]}';
const OIP = '{"inputs":[{"name":"features","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}';

async function warm(url: string): Promise<void> {
  await postJson(url, "/v1/models/tree/predict", TREE_ROWS);
  await postJson(url, "/v2/models/mlp/infer", OIP);
  await postJson(url, "/v1/models/tree/jobs", TREE_ROWS);
}

const server = useFuzzServer({ warm });

/** Routes with a body that passes when the headers do. */
const ROUTES = [
  { method: "POST", path: "/v1/models/tree/predict", body: TREE_ROWS },
  { method: "POST", path: "/v2/models/mlp/infer", body: OIP },
  { method: "POST", path: "/v1/models/tree/jobs", body: TREE_ROWS },
  { method: "GET", path: "/v1/models", body: undefined },
  { method: "GET", path: "/v2/models/tree", body: undefined },
  { method: "GET", path: "/readyz", body: undefined },
  { method: "DELETE", path: "/v1/models/tree/predict", body: undefined },
] as const;

// Values Node's HTTP client accepts (tab, printable ASCII, Latin-1); the rest go over raw sockets.
const latin1 = fc.string({ unit: "binary", maxLength: 40 }).map(headerSafe);

const timeout = fc.oneof(
  fc.constantFrom(
    "1",
    "0",
    "-1",
    "1.5",
    "",
    " ",
    "abc",
    "1e3",
    "3600001",
    "99999999999999999999",
    "0x10",
    "NaN",
    "50",
  ),
  edgeNumber.map(String),
);
const prefer = fc.constantFrom(
  "respond-async",
  "RESPOND-ASYNC",
  "respond-async, wait=5",
  "wait=1",
  "return=minimal",
  "respond-async;x=y",
  "",
  ",,,",
  "respond-async".repeat(100),
);
const traceparent = fc.oneof(
  fc.constantFrom(
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "00-00000000000000000000000000000000-0000000000000000-00",
    "ff-zz-yy-xx",
    "00-",
    "-".repeat(200),
  ),
  latin1,
);
const contentType = fc.oneof(
  fc.constantFrom(
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=utf-16",
    "application/json;;;",
    "APPLICATION/JSON",
    "application/jsonx",
    "application/octet-stream",
    "text/plain",
    "multipart/form-data; boundary=x",
    "application/x-www-form-urlencoded",
    "",
    "*/*",
    "application/",
  ),
  latin1,
);
const accept = fc.oneof(
  fc.constantFrom("application/octet-stream", "application/json;q=0", "*/*;q=abc", "text/event-stream", ""),
  latin1,
);

describe("headers", () => {
  it("timeout, idempotency, Prefer, trace, content-type and accept garbage get a 2xx or a coded 4xx", () =>
    check(
      "headers",
      fc.asyncProperty(
        fc.constantFrom(...ROUTES),
        fc.record(
          {
            "x-request-timeout-ms": timeout,
            "idempotency-key": latin1,
            prefer,
            traceparent,
            tracestate: latin1,
            "content-type": contentType,
            accept,
            "x-request-id": latin1,
            "inference-header-content-length": fc.constantFrom("0", "1", "5", "-1", "x", "999999"),
            "x-tensor-shape": fc.constantFrom("1,6", "x", ""),
          },
          { requiredKeys: [] },
        ),
        async (route, headers) => {
          const res = await send(server.url, route.method, route.path, {
            headers,
            ...(route.body !== undefined ? { body: route.body } : {}),
          });
          checkAnswer(res, styleOf(route.path), {
            clientDeadline: headers["x-request-timeout-ms"] !== undefined,
            what: `${route.method} ${route.path} ${JSON.stringify(headers)}`,
          });
        },
      ),
    ));

  it("raw requests with a wrong Content-Length or raw header bytes get a coded answer or a closed socket", () =>
    check(
      "rawSocket",
      fc.asyncProperty(
        fc.constantFrom(...ROUTES.filter((r) => r.body !== undefined)),
        fc.integer({ min: -30, max: 30 }),
        fc.constantFrom(
          "application/json",
          "application/octet-stream",
          "text/plain",
          "application/json; charset=\xff",
        ),
        fc.array(
          fc.tuple(
            fc.constantFrom(
              "X-Request-Timeout-Ms",
              "Idempotency-Key",
              "Prefer",
              "Traceparent",
              "X-Tensor-Shape",
              "X-Fuzz",
            ),
            fc.oneof(latin1, fc.constantFrom("é", "🦀", "\u202e", "\ud800", "a\u0000b")),
          ),
          { maxLength: 3 },
        ),
        async (route, delta, ct, extra) => {
          const body = Buffer.from(route.body!);
          const length = body.length + delta;
          // Header bytes as UTF-8, as a careless client would write them.
          const head =
            `${route.method} ${route.path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: ${ct}\r\n` +
            `Content-Length: ${length}\r\n${extra.map(([k, v]) => `${k}: ${v.replace(/[\r\n]/g, "")}\r\n`).join("")}Connection: close\r\n\r\n`;
          const raw = await rawExchange(Buffer.concat([Buffer.from(head, "utf8"), body]), 10_000, delta <= 0);
          const first = parseFirstResponse(raw);
          const what = `${route.path} Content-Length ${length} for ${body.length} bytes, ${ct}, ${JSON.stringify(extra)} → ${raw.toString("latin1").slice(0, 300)}`;
          // A body shorter than its Content-Length never arrives in full: the server may close
          // without an answer once the client has sent all it will. Otherwise it must answer.
          if (!first) {
            assert.ok(delta > 0, `no answer to a complete request: ${what}`);
            return;
          }
          // A request Node's HTTP parser refuses (a negative Content-Length, control bytes in a
          // header) is answered by the connection layer before any route, so in the native shape
          // and without an X-Request-Id (no request was made); a routed answer has one.
          checkAnswer(
            first,
            first.status === 400 && !first.headers["x-request-id"] ? "native" : styleOf(route.path),
            { what },
          );
        },
      ),
    ));
});

/**
 * Writes `request` and collects what the server sends until it closes. The client does not
 * half-close at once (Node's server takes a FIN as the client leaving and drops the request): it
 * ends its side once a whole response has come. When the request is `complete` it waits for that
 * (up to `timeoutMs`: however busy the machine, a complete request gets an answer); otherwise (a
 * body shorter than its Content-Length leaves the server waiting for the rest) it also ends after
 * 300 ms of silence.
 */
function rawExchange(request: Buffer, timeoutMs: number, complete: boolean): Promise<Buffer> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect(Number(url.port), url.hostname, () => socket.write(request));
    const idleEnd = () => (complete ? undefined : setTimeout(() => socket.end(), 300));
    let idle = idleEnd();
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open for ${timeoutMs} ms after the client ended it`));
    }, timeoutMs);
    socket.on("data", (c: Buffer) => {
      chunks.push(c);
      clearTimeout(idle);
      if (parseFirstResponse(Buffer.concat(chunks))?.complete) socket.end();
      else idle = idleEnd();
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      clearTimeout(idle);
      resolve(Buffer.concat(chunks));
    });
  });
}

/** The first HTTP response in `raw` (status, headers, body by Content-Length), if any. */
function parseFirstResponse(raw: Buffer): (Answer & { complete: boolean }) | undefined {
  const text = raw.toString("utf8");
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1]);
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(":");
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const bodyBytes = raw.subarray(Buffer.byteLength(text.slice(0, end + 4)));
  const length =
    headers["content-length"] !== undefined ? Number(headers["content-length"]) : bodyBytes.length;
  const body = bodyBytes.subarray(0, length).toString("utf8");
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {}
  return { status, headers, text: body, json, complete: bodyBytes.length >= length };
}

server.finalCheck();
