// A key removed from the key file (or whose hash changed) loses what it holds open, through a real
// `modelport serve` process, its key file rewritten and SIGHUP sent: a job event stream (SSE), the
// jobs WebSocket, a streamed OpenAI answer and a long-poll each end with MP_ERR_AUTH_KEY_REVOKED
// (an SSE error event, a WebSocket close 1008 with that reason, the answer's last event, a 401),
// its shared memory regions are unregistered and their files closed, while another key's stream
// and WebSocket stay open and go on to deliver their job's end. Jobs are held by a gate, so every
// channel is certainly open when the key goes (each has sent its first event first); the language model is an upstream stub that
// generates until the client leaves.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readlinkSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { stringify } from "yaml";
import { keyHash } from "../../src/tenants/key-file.js";
import { createGate, GATE_HANDLER, type Gate } from "../helpers/gate.js";
import { type OpenAiStub, startOpenAiStub } from "../helpers/openai-stub.js";
import { type ChildServer, postJson, startChild, waitReady } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const KEYS = {
  gone: "mp_revocation-test-gone-key",
  poller: "mp_revocation-test-poller-key",
  rotated: "mp_revocation-test-rotated-key",
  stays: "mp_revocation-test-stays-key",
};
const ROTATED_AGAIN = "mp_revocation-test-rotated-new-key";
const SHM_OBJECT = `modelport_revocation-${process.pid}`;

let dir: string;
let keysFile: string;
let gate: Gate;
let stub: OpenAiStub;
let child: ChildServer;

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

function writeKeys(entries: { name: string; key: string; limits?: Record<string, number> }[]): void {
  const keys = entries.map((e) => ({
    name: e.name,
    hash: keyHash(e.key),
    ...(e.limits ? { limits: e.limits } : {}),
  }));
  // Replaced at once, as `modelport keys create` does, so no reload reads half a file.
  writeFileSync(`${keysFile}.tmp`, stringify({ keys }));
  renameSync(`${keysFile}.tmp`, keysFile);
}

/** A job on the gate with row value x, submitted with `key`: its id. */
async function submit(key: string, x: number): Promise<string> {
  const res = await postJson(`${child.url}/v1/models/gate/jobs`, { rows: [[x]] }, auth(key));
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body.id as string;
}

/** An SSE response read as it comes: its events (name and parsed data) and whether it ended. */
interface EventStream {
  events: { event: string; data: any }[];
  ended: boolean;
}

async function openEvents(path: string, key: string, init: RequestInit = {}): Promise<EventStream> {
  const res = await fetch(`${child.url}${path}`, {
    ...init,
    headers: { ...auth(key), ...(init.body ? { "content-type": "application/json" } : {}) },
  });
  assert.equal(res.status, 200, await (res.status === 200 ? "" : res.text()));
  const stream: EventStream = { events: [], ended: false };
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let at = buffer.indexOf("\n\n");
        while (at >= 0) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1] ?? "message";
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (data !== undefined)
            stream.events.push({ event, data: data === "[DONE]" ? data : JSON.parse(data) });
          at = buffer.indexOf("\n\n");
        }
      }
    } finally {
      stream.ended = true;
    }
  })();
  return stream;
}

interface Socket {
  frames: any[];
  closed: { code: number; reason: string } | undefined;
}

async function openSocket(key: string, job: string): Promise<Socket> {
  const ws = new WebSocket(`${child.url.replace("http", "ws")}/v1/jobs/ws`, { headers: auth(key) });
  const socket: Socket = { frames: [], closed: undefined };
  ws.on("message", (data) => socket.frames.push(JSON.parse(String(data))));
  ws.on("close", (code, reason) => {
    socket.closed = { code, reason: String(reason) };
  });
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  ws.send(JSON.stringify({ subscribe: [job] }));
  await until("the WebSocket's first job frame", () => socket.frames.some((f) => f.type === "job"));
  return socket;
}

/** The file descriptors of the server process that are open on the test's shared memory object. */
function serverHolds(object: string): number {
  const fds = `/proc/${child.proc.pid}/fd`;
  return readdirSync(fds).filter((fd) => {
    try {
      return readlinkSync(join(fds, fd)) === join("/dev/shm", object);
    } catch {
      return false;
    }
  }).length;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-revocation-"));
  keysFile = join(dir, "keys.yaml");
  gate = createGate();
  stub = await startOpenAiStub();
  stub.generate = true;
  stub.streamGapMs = 20;
  writeKeys([
    { name: "gone", key: KEYS.gone },
    // One request at a time: a second one answers 429 while its long-poll is in flight.
    { name: "poller", key: KEYS.poller, limits: { concurrent: 1 } },
    { name: "rotated", key: KEYS.rotated },
    { name: "stays", key: KEYS.stays },
  ]);
  const config = join(dir, "modelport.yaml");
  writeFileSync(
    config,
    stringify({
      server: { keys: keysFile, sharedMemory: { enabled: true } },
      jobs: { sqlitePath: join(dir, "jobs.db") },
      models: [
        { name: "gate", backend: "custom", path: GATE_HANDLER, options: { dir: gate.dir } },
        { name: "chat", backend: "upstream", upstream: { url: stub.url, model: "stub-model", retries: 0 } },
      ],
    }),
  );
  child = await startChild(["-c", config]);
  const ready = await waitReady(child.url);
  assert.equal(ready.status, 200, JSON.stringify(ready.body));
});

after(async () => {
  gate?.openAll();
  await child?.stop("SIGKILL");
  await stub?.close();
  rmSync(join("/dev/shm", SHM_OBJECT), { force: true });
  rmSync(dir, { recursive: true, force: true });
});

describe("a key removed from the key file", () => {
  it("loses its event streams, WebSockets, streamed answers, long-polls and shared memory at SIGHUP; other keys keep theirs", async () => {
    const goneJob = await submit(KEYS.gone, 1);
    const stayJob = await submit(KEYS.stays, 2);
    const rotatedJob = await submit(KEYS.rotated, 3);
    const pollerJob = await submit(KEYS.poller, 4);
    // No job can finish before the gate opens: every stream below stays open until then.
    await gate.started(1);

    const goneEvents = await openEvents(`/v1/jobs/${goneJob}/events`, KEYS.gone);
    const rotatedEvents = await openEvents(`/v1/jobs/${rotatedJob}/events`, KEYS.rotated);
    const stayEvents = await openEvents(`/v1/jobs/${stayJob}/events`, KEYS.stays);
    const goneSocket = await openSocket(KEYS.gone, goneJob);
    const staySocket = await openSocket(KEYS.stays, stayJob);
    const answer = await openEvents("/v1/chat/completions", KEYS.gone, {
      method: "POST",
      body: JSON.stringify({
        model: "chat",
        stream: true,
        max_tokens: 10_000,
        messages: [{ role: "user", content: "go on" }],
      }),
    });
    // The same for a Responses API stream (on the upstream model: /v1/responses works through generate()).
    const response = await openEvents("/v1/responses", KEYS.gone, {
      method: "POST",
      body: JSON.stringify({ model: "chat", stream: true, max_output_tokens: 10_000, input: "go on" }),
    });
    const longPoll = fetch(`${child.url}/v1/jobs/${pollerJob}?wait=60`, { headers: auth(KEYS.poller) });
    // The long-poll holds the key's one concurrent slot once it is let in: a second request is 429.
    await until("the long-poll to be let in", async () => {
      const probe = await fetch(`${child.url}/v1/jobs/${pollerJob}`, { headers: auth(KEYS.poller) });
      return probe.status === 429;
    });
    for (const s of [goneEvents, rotatedEvents, stayEvents])
      await until("each stream's first status event", () => s.events.some((e) => e.event === "status"));
    await until("the answer's first tokens", () => answer.events.length >= 2);
    await until("the response's first deltas", () =>
      response.events.some((e) => e.event === "response.output_text.delta"),
    );

    writeFileSync(join("/dev/shm", SHM_OBJECT), Buffer.alloc(64));
    const registered = await postJson(
      `${child.url}/v2/systemsharedmemory/region/r/register`,
      { key: `/${SHM_OBJECT}`, offset: 0, byte_size: 64 },
      auth(KEYS.gone),
    );
    assert.equal(registered.status, 200, JSON.stringify(registered.body));
    assert.equal(serverHolds(SHM_OBJECT), 1);

    // gone and poller removed; rotated's key changed (a removed key plus a new one of that name).
    writeKeys([
      { name: "rotated", key: ROTATED_AGAIN },
      { name: "stays", key: KEYS.stays },
    ]);
    child.proc.kill("SIGHUP");

    const revoked = (events: EventStream["events"]) => events.at(-1);
    await until("gone's event stream to end", () => goneEvents.ended);
    assert.deepEqual(
      { event: revoked(goneEvents.events)?.event, code: revoked(goneEvents.events)?.data.code },
      { event: "error", code: "MP_ERR_AUTH_KEY_REVOKED" },
    );
    await until("rotated's event stream to end", () => rotatedEvents.ended);
    assert.equal(revoked(rotatedEvents.events)?.data.code, "MP_ERR_AUTH_KEY_REVOKED");

    await until("gone's WebSocket to close", () => goneSocket.closed !== undefined);
    assert.deepEqual(goneSocket.closed, { code: 1008, reason: "MP_ERR_AUTH_KEY_REVOKED" });
    assert.equal(goneSocket.frames.at(-1).code, "MP_ERR_AUTH_KEY_REVOKED");

    await until("gone's streamed answer to end", () => answer.ended);
    assert.equal(revoked(answer.events)?.data.error.code, "MP_ERR_AUTH_KEY_REVOKED");
    await until("gone's streamed response to end", () => response.ended);
    assert.deepEqual(
      response.events.slice(-2).map((e) => e.event),
      ["error", "response.failed"],
    );
    assert.equal(response.events.at(-2)?.data.code, "MP_ERR_AUTH_KEY_REVOKED");
    assert.equal(revoked(response.events)?.data.response.error.code, "MP_ERR_AUTH_KEY_REVOKED");

    const polled = await longPoll;
    assert.equal(polled.status, 401);
    assert.equal(((await polled.json()) as any).error.code, "MP_ERR_AUTH_KEY_REVOKED");

    // Its shared memory region is gone and its file closed; the object serves no other key.
    await until("the region's file to close", () => serverHolds(SHM_OBJECT) === 0);
    const taken = await postJson(
      `${child.url}/v2/systemsharedmemory/region/r/register`,
      { key: `/${SHM_OBJECT}`, offset: 0, byte_size: 64 },
      auth(KEYS.stays),
    );
    assert.equal(taken.body.code, "MP_ERR_SHARED_MEMORY_KEY");

    // The removed keys are refused from now on; the new key of rotated's name is let in.
    const refused = await fetch(`${child.url}/v1/jobs/${goneJob}`, { headers: auth(KEYS.gone) });
    assert.equal(((await refused.json()) as any).error.code, "MP_ERR_AUTH_INVALID");
    assert.equal((await fetch(`${child.url}/v1/models`, { headers: auth(ROTATED_AGAIN) })).status, 200);

    // The other key's stream and WebSocket were left open: they deliver their job's end.
    assert.equal(stayEvents.ended, false);
    assert.equal(staySocket.closed, undefined);
    gate.openAll();
    await until("stays' event stream to end with its job", () => stayEvents.ended);
    assert.equal(stayEvents.events.at(-1)?.event, "end");
    assert.ok(stayEvents.events.some((e) => e.event === "status" && e.data.status === "succeeded"));
    assert.ok(!stayEvents.events.some((e) => e.event === "error"));
    await until("stays' WebSocket to see its job succeed", () =>
      staySocket.frames.some((f) => f.type === "job" && f.job.status === "succeeded"),
    );
    assert.equal(staySocket.closed, undefined);
  });
});
