// What a web page can make a modelport do through its visitor's browser (plugins/browser-guard.ts),
// over a raw socket so the Host and Origin headers are exactly those a browser would send: a
// cross-origin POST without a body (no CORS preflight) must not unload a model, a DNS-rebound name
// must not reach a server without keys, and a WebSocket from another origin must not open;
// same-origin pages (the dashboard), clients without Origin, IP addresses, localhost and the
// names in server.allowedHosts keep working.
import assert from "node:assert/strict";
import { connect } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type RawResponse, rawRequest } from "../helpers/raw-http.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";

const BODY = JSON.stringify({ rows: [[1, 2, 3, 1, 0, 4]] });
const KEY = "browser-guard-key-1234";

/** One HTTP/1.1 request with exactly these headers (Host among them when given). */
function send(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<RawResponse> {
  const lines = [`${method} ${path} HTTP/1.1`];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body !== undefined)
    lines.push("Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`);
  else if (method === "POST") lines.push("Content-Length: 0");
  lines.push("Connection: close", "", body ?? "");
  return rawRequest(url, lines.join("\r\n"));
}

/** The MP_ERR_* code of an error answer, in the native shape or the Open Inference Protocol's. */
function code(r: RawResponse): string | undefined {
  const body = JSON.parse(r.body) as { error?: { code?: string } | string; code?: string };
  return typeof body.error === "object" ? body.error.code : body.code;
}

/** The status of the answer to a WebSocket upgrade: the socket stays open after a 101, so only its first line is read. */
function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let data = "";
    socket.on("data", (chunk: Buffer) => {
      data += chunk.toString("latin1");
      const line = /^HTTP\/1\.1 (\d{3})/.exec(data);
      if (line) {
        socket.destroy();
        resolve(Number(line[1]));
      }
    });
    socket.on("error", reject);
    const lines = ["GET /v1/jobs/ws HTTP/1.1", ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
    socket.write(`${lines.join("\r\n")}\r\n\r\n`);
  });
}

/** The server's own host:port, as a browser on its page sends it in Host. */
const ownHost = (s: InProcessServer) => new URL(s.url).host;

describe("browser guard: Host and Origin", () => {
  let modelPath: string;
  let open: InProcessServer;

  before(async () => {
    modelPath = join(await testModels(), "churn-tree.onnx");
    open = await startInProcess({ modelPath, env: {} });
  });
  after(() => open?.close());

  it("a cross-origin POST without a body does not unload the model: 403, and the model still answers", async () => {
    const host = ownHost(open);
    for (const origin of [
      "https://evil.example",
      "null",
      "http://localhost:1",
      `http://${host}.evil.example`,
    ]) {
      const r = await send(open.url, "POST", "/v2/repository/models/churn-tree/unload", {
        Host: host,
        Origin: origin,
      });
      assert.equal(r.status, 403, `Origin ${origin}: ${r.body}`);
      assert.equal(code(r), "MP_ERR_ORIGIN_NOT_ALLOWED", origin);
    }
    const model = (await (await fetch(`${open.url}/v1/models/churn-tree`)).json()) as any;
    assert.equal(model.status.state, "ready");
    const predict = await send(open.url, "POST", "/v1/models/churn-tree/predict", { Host: host }, BODY);
    assert.equal(predict.status, 200);
  });

  it("a foreign Origin is refused on every state-changing method and route, before auth and routing", async () => {
    const host = ownHost(open);
    for (const [method, path] of [
      ["POST", "/v1/models/churn-tree/predict"],
      ["POST", "/v2/models/churn-tree/infer"],
      ["POST", "/v1/models/churn-tree/jobs"],
      ["DELETE", "/v1/jobs/some-job"],
      ["PUT", "/v1/no-such-route"],
    ] as const) {
      const r = await send(open.url, method, path, { Host: host, Origin: "https://evil.example" }, BODY);
      assert.equal(r.status, 403, `${method} ${path}: ${r.body}`);
      assert.match(r.body, /MP_ERR_ORIGIN_NOT_ALLOWED/, `${method} ${path}`);
    }
  });

  it("the server's own origin (any scheme, default ports too) and requests without Origin pass", async () => {
    const host = ownHost(open);
    for (const origin of [`http://${host}`, `https://${host}`, `HTTP://${host.toUpperCase()}`]) {
      const r = await send(
        open.url,
        "POST",
        "/v1/models/churn-tree/predict",
        { Host: host, Origin: origin },
        BODY,
      );
      assert.equal(r.status, 200, `Origin ${origin}: ${r.body}`);
    }
    const plain = await send(open.url, "POST", "/v1/models/churn-tree/predict", { Host: host }, BODY);
    assert.equal(plain.status, 200);
    // Host without a port: the origin's default port.
    const dflt = await send(
      open.url,
      "POST",
      "/v1/models/churn-tree/predict",
      {
        Host: "localhost",
        Origin: "http://localhost",
      },
      BODY,
    );
    assert.equal(dflt.status, 200, dflt.body);
    const otherPort = await send(
      open.url,
      "POST",
      "/v1/models/churn-tree/predict",
      {
        Host: "localhost",
        Origin: "http://localhost:3000",
      },
      BODY,
    );
    assert.equal(otherPort.status, 403, "another port on the same host is another origin");
    // Reading (GET) from another origin changes nothing: browsers keep the answer from the page.
    const read = await send(open.url, "GET", "/v1/models", { Host: host, Origin: "https://evil.example" });
    assert.equal(read.status, 200);
  });

  it("a server without keys refuses a Host that is a DNS name (rebinding), with a message saying what to set", async () => {
    for (const host of [
      "evil.example",
      "evil.example:8080",
      "127.0.0.1.nip.io",
      "localhost.evil.example",
      "a b",
    ]) {
      const r = await send(open.url, "GET", "/v1/models", { Host: host });
      assert.equal(r.status, 403, `Host ${host}: ${r.body}`);
      assert.equal(code(r), "MP_ERR_HOST_NOT_ALLOWED", host);
    }
    const r = await send(open.url, "GET", "/v1/models", { Host: "evil.example" });
    assert.match(r.body, /allowedHosts/);
  });

  it("IP literals, localhost, *.localhost and a request without Host pass; the probes pass with any Host", async () => {
    const { port } = new URL(open.url);
    for (const host of [
      `127.0.0.1:${port}`,
      "127.0.0.1",
      "10.1.2.3:8080",
      "[::1]",
      `[::1]:${port}`,
      "[fe80::1]:8080",
      "localhost",
      `LocalHost:${port}`,
      "app.localhost",
    ]) {
      const r = await send(open.url, "GET", "/v1/models", { Host: host });
      assert.equal(r.status, 200, `Host ${host}: ${r.body}`);
    }
    const http10 = await rawRequest(open.url, "GET /v1/models HTTP/1.0\r\n\r\n");
    assert.equal(http10.status, 200);
    for (const probe of ["/livez", "/readyz", "/v2/health/live", "/v2/health/ready"]) {
      const r = await send(open.url, "GET", probe, { Host: "pod.evil.example" });
      assert.equal(r.status, 200, `${probe}: ${r.body}`);
    }
  });

  it("a WebSocket upgrade from another origin is refused; from the server's own origin it opens", async () => {
    const host = ownHost(open);
    const upgrade = (origin: string) =>
      send(open.url, "GET", "/v1/jobs/ws", {
        Host: host,
        Origin: origin,
        Upgrade: "websocket",
        Connection: "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
      });
    const foreign = await upgrade("https://evil.example");
    assert.equal(foreign.status, 403, foreign.body);
    assert.equal(code(foreign), "MP_ERR_ORIGIN_NOT_ALLOWED");
    const own = await upgradeStatus(open.url, {
      Host: host,
      Origin: `http://${host}`,
      Upgrade: "websocket",
      Connection: "Upgrade",
      "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
      "Sec-WebSocket-Version": "13",
    });
    assert.equal(own, 101);
  });

  describe("configured", () => {
    let allowing: InProcessServer;
    let keyed: InProcessServer;
    let keyedPinned: InProcessServer;

    before(async () => {
      allowing = await startInProcess({
        modelPath,
        env: {},
        flags: {
          allowedHosts: ["models.internal", ".example.org"],
          allowedOrigins: ["https://app.example.com"],
        },
      });
      keyed = await startInProcess({ modelPath, env: {}, flags: { apiKeys: [KEY] } });
      keyedPinned = await startInProcess({
        modelPath,
        env: {},
        flags: { apiKeys: [KEY], allowedHosts: ["models.internal"] },
      });
    });
    after(async () => {
      await allowing?.close();
      await keyed?.close();
      await keyedPinned?.close();
    });

    it("server.allowedHosts lets those names in (a leading dot: the name and its subdomains); others stay out", async () => {
      for (const host of ["models.internal", "models.internal:8080", "example.org", "a.b.example.org"]) {
        const r = await send(allowing.url, "GET", "/v1/models", { Host: host });
        assert.equal(r.status, 200, `Host ${host}: ${r.body}`);
      }
      for (const host of ["evil.example", "badexample.org", "models.internal.evil.example"]) {
        const r = await send(allowing.url, "GET", "/v1/models", { Host: host });
        assert.equal(code(r), "MP_ERR_HOST_NOT_ALLOWED", host);
      }
    });

    it("server.allowedOrigins lets that origin's pages send requests; other origins stay refused", async () => {
      const host = ownHost(allowing);
      const listed = await send(
        allowing.url,
        "POST",
        "/v1/models/churn-tree/predict",
        {
          Host: host,
          Origin: "https://app.example.com",
        },
        BODY,
      );
      assert.equal(listed.status, 200, listed.body);
      const other = await send(
        allowing.url,
        "POST",
        "/v1/models/churn-tree/predict",
        {
          Host: host,
          Origin: "https://app.example.com:8443",
        },
        BODY,
      );
      assert.equal(code(other), "MP_ERR_ORIGIN_NOT_ALLOWED");
    });

    it("a server with keys checks Host only when allowedHosts is set, and Origin always", async () => {
      const auth = { Authorization: `Bearer ${KEY}` };
      const any = await send(keyed.url, "GET", "/v1/models", { Host: "evil.example", ...auth });
      assert.equal(any.status, 200, any.body);
      const pinned = await send(keyedPinned.url, "GET", "/v1/models", { Host: "evil.example", ...auth });
      assert.equal(code(pinned), "MP_ERR_HOST_NOT_ALLOWED");
      const named = await send(keyedPinned.url, "GET", "/v1/models", { Host: "models.internal", ...auth });
      assert.equal(named.status, 200);
      const foreign = await send(
        keyed.url,
        "POST",
        "/v1/models/churn-tree/predict",
        {
          Host: ownHost(keyed),
          Origin: "https://evil.example",
          ...auth,
        },
        BODY,
      );
      assert.equal(code(foreign), "MP_ERR_ORIGIN_NOT_ALLOWED");
    });
  });
});
