// server.connections through a real listening server and raw sockets: a client that trickles
// its headers or its body is answered 408 MP_ERR_REQUEST_TIMEOUT and cut off while others are
// served; over maxConnections a new connection gets 503 while the open ones keep working; and
// responses that last longer than the request timeout (a slow predict, a job's event stream)
// are not cut, since the timeout covers receiving the request only.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { type InProcessServer, postJson, REPO_ROOT, startInProcess } from "../helpers/server.js";

const HANDLER = join(REPO_ROOT, "dist", "examples", "handlers", "latency-handler.js");
const HEADERS_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 2000;
const MAX_CONNECTIONS = 6;

let dir: string;
let server: InProcessServer;
let capped: InProcessServer;
let idle: InProcessServer;

function configFile(name: string, connections: Record<string, number>): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    JSON.stringify({
      server: { connections },
      jobs: {
        sqlitePath: join(dir, `${name}.db`),
        blobs: { backend: "fs", dir: join(dir, `${name}-blobs`) },
      },
      models: [
        { name: "fast", backend: "custom", path: HANDLER, options: { waitMs: 1 } },
        // Answers after 3 s: longer than the request timeout.
        { name: "slow", backend: "custom", path: HANDLER, options: { waitMs: 3000 } },
      ],
    }),
  );
  return file;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-connections-"));
  server = await startInProcess({
    file: configFile("timeouts", {
      headersTimeoutMs: HEADERS_TIMEOUT_MS,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      maxRequestsPerSocket: 3,
    }),
    env: {},
  });
  capped = await startInProcess({ file: configFile("capped", { maxConnections: MAX_CONNECTIONS }), env: {} });
  idle = await startInProcess({ file: configFile("idle", { idleTimeoutMs: 1000 }), env: {} });
});
after(async () => {
  await server.close();
  await capped.close();
  await idle.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A raw TCP client that records everything it receives and when the server closed. */
class RawClient {
  readonly socket: Socket;
  received = "";
  closed = false;
  private readonly opened: Promise<void>;
  private readonly ended: Promise<void>;
  constructor(url: string) {
    const { hostname, port } = new URL(url);
    this.socket = connect(Number(port), hostname);
    this.socket.setEncoding("utf8");
    this.socket.on("data", (d: string) => {
      this.received += d;
    });
    this.socket.on("error", () => {});
    this.opened = new Promise((r) => this.socket.once("connect", () => r()));
    this.ended = new Promise((r) =>
      this.socket.once("close", () => {
        this.closed = true;
        r();
      }),
    );
  }
  async ready(): Promise<void> {
    await this.opened;
  }
  write(s: string): Promise<void> {
    return new Promise((r) => this.socket.write(s, () => r()));
  }
  /** Resolves true when the server closed the connection within `ms`. */
  async closedWithin(ms: number): Promise<boolean> {
    const timer = new Promise<false>((r) => setTimeout(() => r(false), ms).unref());
    return Promise.race([this.ended.then(() => true as const), timer]);
  }
  /** Waits until `text` has been received (or `ms` passed). */
  async waitFor(text: string, ms = 20_000): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!this.received.includes(text) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    return this.received.includes(text);
  }
  destroy(): void {
    this.socket.destroy();
  }
}

/**
 * Sends `text` one byte every `everyMs` until the server closes the connection; returns how
 * many bytes were sent by then.
 */
async function trickle(client: RawClient, text: string, everyMs: number): Promise<number> {
  let sent = 0;
  while (sent < text.length && !client.closed) {
    await client.write(text[sent]!).catch(() => {});
    sent++;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return sent;
}

describe("server.connections: timeouts", () => {
  it("cuts off a client trickling its headers (slowloris) with 408 while another client is served", async () => {
    const slow = new RawClient(server.url);
    await slow.ready();
    // 200 header bytes at 4 per second would take 50 s; the headers timeout is 1 s.
    const headers = `GET /livez HTTP/1.1\r\nHost: localhost\r\nX-Slow: ${"a".repeat(160)}\r\n\r\n`;
    const trickling = trickle(slow, headers, 250);
    // Served meanwhile, on its own connection.
    const other = await postJson(`${server.url}/v1/models/fast/predict`, { inputs: { x: [[1]] } });
    assert.equal(other.status, 200);
    const sent = await trickling;
    assert.ok(slow.closed, "the server closed the slow connection");
    assert.ok(sent < headers.length, `cut off after ${sent} of ${headers.length} bytes`);
    assert.match(slow.received, /^HTTP\/1\.1 408 /);
    assert.match(slow.received, /MP_ERR_REQUEST_TIMEOUT/);
    assert.equal((await fetch(`${server.url}/livez`)).status, 200);
  });

  it("closes a connection that sends nothing at all within the headers timeout", async () => {
    const silent = new RawClient(server.url);
    await silent.ready();
    assert.ok(await silent.closedWithin(30_000), "a silent connection does not hold a slot forever");
  });

  it("serves the next request on a kept-alive connection idle longer than the request timeout", async () => {
    const client = new RawClient(server.url);
    await client.ready();
    await client.write("GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert.ok(await client.waitFor("HTTP/1.1 200"));
    await new Promise((r) => setTimeout(r, REQUEST_TIMEOUT_MS + 1500));
    assert.equal(client.closed, false, "idle within keepAliveTimeoutMs: still open");
    client.received = "";
    await client.write("GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert.ok(await client.waitFor("HTTP/1.1 200"), client.received);
    client.destroy();
  });

  it("ends a kept-alive connection after maxRequestsPerSocket requests", async () => {
    const client = new RawClient(server.url);
    await client.ready();
    for (let i = 1; i <= 3; i++) {
      client.received = "";
      await client.write("GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n");
      assert.ok(await client.waitFor("HTTP/1.1 200"), `request ${i}`);
      if (i < 3) assert.doesNotMatch(client.received, /connection: close/i);
    }
    assert.match(client.received, /connection: close/i);
    // A client that ignores Connection: close is not served again on it.
    client.received = "";
    await client.write("GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n").catch(() => {});
    assert.ok(await client.waitFor("HTTP/1.1 503"), client.received);
    client.destroy();
  });

  it("cuts off a body trickled slower than the request timeout with 408", async () => {
    const slow = new RawClient(server.url);
    await slow.ready();
    const body = JSON.stringify({ inputs: { x: [[1]] }, pad: "p".repeat(200) });
    await slow.write(
      `POST /v1/models/fast/predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    // ~230 bytes at 4 per second would take ~58 s; the request timeout is 2 s.
    const sent = await trickle(slow, body, 250);
    assert.ok(slow.closed, "the server closed the slow connection");
    assert.ok(sent < body.length, `cut off after ${sent} of ${body.length} body bytes`);
    assert.match(slow.received, /^HTTP\/1\.1 408 /);
    assert.match(slow.received, /MP_ERR_REQUEST_TIMEOUT/);
  });

  it("does not cut a response that lasts longer than the request timeout", async () => {
    const started = Date.now();
    const res = await postJson(`${server.url}/v1/models/slow/predict`, { inputs: { x: [[2]] } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.outputs.y, [[4]]);
    assert.ok(Date.now() - started >= REQUEST_TIMEOUT_MS, "the answer came after the request timeout");
  });

  it("does not cut a job's event stream that lasts longer than the request timeout", async () => {
    const submitted = await postJson(`${server.url}/v1/models/slow/jobs`, { inputs: { x: [[3]] } });
    assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
    const id = submitted.body.id as string;
    const stream = new RawClient(server.url);
    await stream.ready();
    const started = Date.now();
    await stream.write(`GET /v1/jobs/${id}/events HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    assert.ok(await stream.waitFor("event: end", 60_000), `stream ended early: ${stream.received}`);
    assert.ok(Date.now() - started >= REQUEST_TIMEOUT_MS, "the stream outlived the request timeout");
    assert.match(stream.received, /"status":"succeeded"/);
    assert.doesNotMatch(stream.received, /HTTP\/1\.1 408/);
    stream.destroy();
  });

  it("does not cut a WebSocket open longer than the request timeout", async () => {
    const ws = new WebSocket(`${server.url.replace("http", "ws")}/v1/jobs/ws`);
    const messages: string[] = [];
    ws.on("message", (m) => messages.push(String(m)));
    await new Promise((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    await new Promise((r) => setTimeout(r, REQUEST_TIMEOUT_MS + 1000));
    assert.equal(ws.readyState, WebSocket.OPEN);
    ws.send(JSON.stringify({ hello: 1 }));
    const deadline = Date.now() + 20_000;
    while (messages.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.match(messages[0] ?? "", /MP_ERR_REQUEST_INVALID/);
    ws.close();
  });
});

describe("server.connections: maxConnections", () => {
  it("answers a connection over the cap with 503 MP_ERR_SERVER_TOO_MANY_CONNECTIONS; open ones keep working", async () => {
    const request = "GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n";
    const open: RawClient[] = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) {
      const c = new RawClient(capped.url);
      await c.ready();
      await c.write(request);
      assert.ok(await c.waitFor("HTTP/1.1 200"), `connection ${i} served`);
      open.push(c);
    }
    const over = new RawClient(capped.url);
    assert.ok(await over.closedWithin(20_000), "the connection over the cap is closed");
    assert.match(over.received, /^HTTP\/1\.1 503 /);
    assert.match(over.received, /MP_ERR_SERVER_TOO_MANY_CONNECTIONS/);
    assert.match(over.received, /Retry-After: 1/i);
    // The open connections still answer (keep-alive).
    for (const c of open) {
      c.received = "";
      await c.write(request);
      assert.ok(await c.waitFor("HTTP/1.1 200"), "an open connection still answers");
    }
    // Once one closes, a new connection is served again.
    open.pop()!.destroy();
    let served = false;
    for (let attempt = 0; attempt < 100 && !served; attempt++) {
      const c = new RawClient(capped.url);
      await c.ready().catch(() => {});
      await c.write(request).catch(() => {});
      served = (await c.waitFor("HTTP/1.1 ", 5000)) && c.received.startsWith("HTTP/1.1 200");
      c.destroy();
      if (!served) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(served, "a new connection is served once there is room");
    for (const c of open) c.destroy();
  });
});

describe("server.connections: idleTimeoutMs", () => {
  it("closes a connection silent both ways for that long, even mid-response (why it is off by default)", async () => {
    const client = new RawClient(idle.url);
    await client.ready();
    const body = JSON.stringify({ inputs: { x: [[1]] } });
    await client.write(
      `POST /v1/models/slow/predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    // The answer would come after 3 s; the connection is silent after 1 s.
    assert.ok(await client.closedWithin(30_000));
    assert.doesNotMatch(client.received, /HTTP\/1\.1 200/);
    // A request that answers at once is served.
    assert.equal(
      (await postJson(`${idle.url}/v1/models/fast/predict`, { inputs: { x: [[1]] } })).status,
      200,
    );
  });
});
