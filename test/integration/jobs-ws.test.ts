// The job WebSocket against hostile clients, through a real listening server and the `ws`
// client: every malformed frame is answered with an error frame and the connection stays usable,
// subscriptions are a set per socket (no listener leaks, the cap holds), oversized frames close
// only that connection, and the stream limits refuse the upgrade with the HTTP error.
import assert from "node:assert/strict";
import { once } from "node:events";
import { connect as tcpConnect } from "node:net";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { postJson } from "../helpers/server.js";
import {
  type FaultyJobStore,
  faultyJobStore,
  type JobsServer,
  startJobsServer,
  tempSqliteStore,
  until,
  watchProcessFaults,
} from "./jobs-harness.js";

const ROW = [3, 95, 4, 1, 0, 20];

interface Client {
  ws: WebSocket;
  frames: any[];
  /** Resolves with the first frame (from `from` on) that matches. */
  next(match: (f: any) => boolean, from?: number, timeoutMs?: number): Promise<any>;
  closed: Promise<{ code: number; reason: string }>;
}

async function connect(
  url: string,
  headers: Record<string, string> = {},
  options: { autoPong?: boolean } = {},
): Promise<Client> {
  const ws = new WebSocket(`${url.replace("http", "ws")}/v1/jobs/ws`, { headers, ...options });
  const frames: any[] = [];
  const waiters = new Set<() => void>();
  ws.on("message", (data) => {
    frames.push(JSON.parse(String(data)));
    for (const w of waiters) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on("close", (code, reason) => resolve({ code, reason: String(reason) })),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c));
      res.on("end", () =>
        reject(
          Object.assign(new Error(`upgrade refused: ${res.statusCode} ${body}`), {
            status: res.statusCode,
            code: JSON.parse(body || "{}").error?.code,
          }),
        ),
      );
    });
  });
  return {
    ws,
    frames,
    closed,
    next(match, from = 0, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = frames.slice(from).find(match);
          if (found === undefined) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching frame in ${timeoutMs} ms; frames: ${JSON.stringify(frames)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}

describe("job WebSocket: hostile frames and subscriptions", () => {
  let srv: JobsServer;
  let store: FaultyJobStore;
  let faults: ReturnType<typeof watchProcessFaults>;

  before(async () => {
    faults = watchProcessFaults();
    store = faultyJobStore(await tempSqliteStore());
    srv = await startJobsServer({ jobStore: store, jobs: ["  maxSubscriptionsPerSocket: 3"] });
  });

  after(async () => {
    await srv.close();
    faults.remove();
  });

  /** A job that stays queued (claims paused), so subscriptions to it stay open. */
  async function queuedJob(): Promise<string> {
    store.pausedClaims = true;
    const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, { rows: [ROW] });
    assert.equal(sub.status, 202, JSON.stringify(sub.body));
    return sub.body.id as string;
  }

  it("each malformed frame gets an MP_ERR error frame; the socket and the process carry on", async () => {
    const c = await connect(srv.url);
    const bad: (string | Buffer)[] = [
      "null",
      "5",
      '"x"',
      "not json",
      "[]",
      "{}",
      "true",
      '{"subscribe": "a"}',
      '{"subscribe": [1, 2]}',
      '{"subscribe": null}',
      '{"unsubscribe": {"a": 1}}',
      '{"subscribe": ["a"], "extra": 1}',
      `{"subscribe": ["${"i".repeat(300)}"]}`,
      Buffer.from([0xff, 0x00, 0x01]),
    ];
    for (const [i, frame] of bad.entries()) {
      const from = c.frames.length;
      c.ws.send(frame, { binary: Buffer.isBuffer(frame) });
      const reply = await c.next(() => true, from);
      assert.equal(reply.type, "error", `frame ${i}: ${JSON.stringify(reply)}`);
      assert.match(reply.code, /^MP_ERR_REQUEST_(INVALID|MALFORMED_JSON)$/, `frame ${i}`);
      assert.equal(typeof reply.error, "string");
    }
    // Still usable: a real subscription gets the job.
    const id = await queuedJob();
    const from = c.frames.length;
    c.ws.send(JSON.stringify({ subscribe: [id] }));
    const job = await c.next((f) => f.type === "job", from);
    assert.equal(job.job.id, id);
    assert.equal(c.ws.readyState, WebSocket.OPEN);
    assert.equal((await fetch(`${srv.url}/livez`)).status, 200);
    c.ws.close();
    await c.closed;
    faults.check();
  });

  it("1,000 subscribes to one job (one frame and many) register one listener; close removes it", async () => {
    const id = await queuedJob();
    const events = srv.server.jobs.events;
    assert.equal(events.listenerCount(id), 0);
    const c = await connect(srv.url);
    c.ws.send(JSON.stringify({ subscribe: Array.from({ length: 1000 }, () => id) }));
    for (let i = 0; i < 1000; i++) c.ws.send(JSON.stringify({ subscribe: [id] }));
    // A marker after all of them: once it is answered every frame above was handled.
    c.ws.send(JSON.stringify({ subscribe: ["marker-no-such-job"] }));
    await c.next((f) => f.id === "marker-no-such-job");
    await until(async () => events.listenerCount(id) >= 1);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(events.listenerCount(id), 1);
    // One job frame: the repeats changed nothing and sent nothing.
    assert.equal(c.frames.filter((f) => f.type === "job").length, 1);
    c.ws.close();
    await c.closed;
    assert.equal(await until(async () => events.listenerCount(id) === 0, 5000), true);
    faults.check();
  });

  it("the subscription cap (jobs.maxSubscriptionsPerSocket) holds; unsubscribing frees a place", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await queuedJob());
    const before = srv.server.jobs.events.listenerCount();
    const c = await connect(srv.url);
    c.ws.send(JSON.stringify({ subscribe: ids }));
    await until(async () => c.frames.length >= 5);
    const jobs = c.frames.filter((f) => f.type === "job").map((f) => f.job.id);
    const refused = c.frames.filter((f) => f.code === "MP_ERR_JOB_SUBSCRIPTIONS_EXCEEDED").map((f) => f.id);
    assert.deepEqual(jobs, ids.slice(0, 3));
    assert.deepEqual(refused, ids.slice(3));
    assert.equal(srv.server.jobs.events.listenerCount() - before, 3);
    // Unsubscribe one; the fourth now fits.
    const from = c.frames.length;
    c.ws.send(JSON.stringify({ unsubscribe: [ids[0]] }));
    c.ws.send(JSON.stringify({ subscribe: [ids[3]] }));
    assert.equal((await c.next((f) => f.type === "job", from)).job.id, ids[3]);
    assert.equal(srv.server.jobs.events.listenerCount() - before, 3);
    c.ws.close();
    await c.closed;
    assert.equal(await until(async () => srv.server.jobs.events.listenerCount() === before, 5000), true);
    faults.check();
  });

  it("a frame over the size limit closes that connection with 1009; the server takes new ones", async () => {
    const c = await connect(srv.url);
    c.ws.send(JSON.stringify({ subscribe: ["x".repeat(100 * 1024)] }));
    const { code } = await c.closed;
    assert.equal(code, 1009);
    const d = await connect(srv.url);
    d.ws.send("null");
    assert.equal((await d.next((f) => f.type === "error")).code, "MP_ERR_REQUEST_INVALID");
    d.ws.close();
    await d.closed;
    assert.equal((await fetch(`${srv.url}/livez`)).status, 200);
    faults.check();
  });
});

/** One masked text frame, as a client sends it. */
function clientFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = Buffer.from([1, 2, 3, 4]);
  const len = payload.length;
  const header =
    len < 126 ? Buffer.from([0x81, 0x80 | len]) : Buffer.from([0x81, 0x80 | 126, len >> 8, len & 0xff]);
  const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
  return Buffer.concat([header, mask, masked]);
}

describe("job WebSocket: a client that never reads", () => {
  let srv: JobsServer;
  before(async () => {
    srv = await startJobsServer({ jobs: ["  maxSubscriptionsPerSocket: 10"] });
  });
  after(async () => {
    await srv.close();
  });

  it("is dropped once its unread answers pass the bound, rather than growing the server's memory", async () => {
    const { port } = new URL(srv.url);
    const sock = tcpConnect(Number(port), "127.0.0.1");
    await once(sock, "connect");
    sock.write(
      [
        "GET /v1/jobs/ws HTTP/1.1",
        `Host: 127.0.0.1:${port}`,
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        "",
        "",
      ].join("\r\n"),
    );
    const [head] = (await once(sock, "data")) as [Buffer];
    assert.match(String(head), /^HTTP\/1\.1 101/);
    assert.equal(srv.server.context.streams.held(), 1);
    // From now on nothing is read. Each frame subscribes to ~5,000 ids: ~5,000 error frames back.
    sock.pause();
    sock.on("error", () => {});
    for (let f = 0; f < 40 && !sock.destroyed; f++) {
      const ids = Array.from({ length: 5000 }, (_, i) => `${f}-${i}`);
      sock.write(
        clientFrame(
          JSON.stringify({ subscribe: ids })
            .slice(0, 60_000)
            .replace(/,"[^"]*$/, "]}"),
        ),
      );
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(
      await until(async () => srv.server.context.streams.held() === 0, 15_000),
      "the connection was dropped and its slot freed",
    );
    sock.destroy();
    assert.equal((await fetch(`${srv.url}/livez`)).status, 200);
  });
});

describe("job WebSocket: heartbeats", () => {
  let srv: JobsServer;
  before(async () => {
    srv = await startJobsServer({ limits: ["  streamHeartbeatMs: 200"] });
  });
  after(async () => {
    await srv.close();
  });

  it("a client that stops answering pings is dropped and its slot freed; one that answers stays", async () => {
    const live = await connect(srv.url);
    const dead = await connect(srv.url, {}, { autoPong: false });
    const { code } = await dead.closed;
    assert.equal(code, 1006, "terminated without a close frame");
    assert.equal(live.ws.readyState, WebSocket.OPEN);
    assert.ok(await until(async () => srv.server.context.streams.held() === 1, 5000));
    live.ws.close();
    await live.closed;
  });
});

describe("job WebSocket: stream limits", () => {
  let srv: JobsServer;
  const KEY_A = "key-a-0123456789";
  const KEY_B = "key-b-0123456789";

  before(async () => {
    srv = await startJobsServer({
      apiKeys: [KEY_A, KEY_B],
      limits: ["  maxStreams: 3", "  maxStreamsPerKey: 2"],
    });
  });

  after(async () => {
    await srv.close();
  });

  it("per key 429 and in total 503, refused at the upgrade; a closed connection frees its slot", async () => {
    const auth = (k: string) => ({ authorization: `Bearer ${k}` });
    // Plain GETs on the path (one kept-alive connection) get a coded 426 and hold no slot.
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${srv.url}/v1/jobs/ws`, { headers: auth(KEY_A) });
      const body = (await res.json()) as { error: { code: string } };
      assert.equal(res.status, 426, JSON.stringify(body));
      assert.equal(body.error.code, "MP_ERR_REQUEST_UPGRADE_REQUIRED");
      assert.equal(res.headers.get("upgrade"), "websocket");
    }
    assert.equal(srv.server.context.streams.held(), 0);
    const a1 = await connect(srv.url, auth(KEY_A));
    const a2 = await connect(srv.url, auth(KEY_A));
    await assert.rejects(
      connect(srv.url, auth(KEY_A)),
      (err: any) => err.status === 429 && err.code === "MP_ERR_STREAM_KEY_LIMIT_REACHED",
    );
    const b1 = await connect(srv.url, auth(KEY_B));
    await assert.rejects(
      connect(srv.url, auth(KEY_B)),
      (err: any) => err.status === 503 && err.code === "MP_ERR_STREAM_LIMIT_REACHED",
    );
    assert.equal(srv.server.context.streams.held(), 3);
    a1.ws.close();
    await a1.closed;
    await until(async () => srv.server.context.streams.held() === 2, 5000);
    const b2 = await connect(srv.url, auth(KEY_B));
    for (const c of [a2, b1, b2]) {
      c.ws.close();
      await c.closed;
    }
    assert.equal(await until(async () => srv.server.context.streams.held() === 0, 5000), true);
  });
});
