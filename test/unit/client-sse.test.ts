// The client's Server-Sent Events reader on a job event stream as modelport writes it, split
// into chunks at every possible byte (a CRLF split in two included): the same events every time.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readSse, type SseEvent } from "../../client/sse.js";

function streamOf(chunks: readonly Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(c);
      controller.close();
    },
  });
}

async function events(chunks: readonly Uint8Array[]): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const e of readSse(streamOf(chunks))) out.push(e);
  return out;
}

const TEXT = [
  'event: status\ndata: {"id":"a","status":"queued"}\n\n',
  ": keep-alive\n\n",
  'event: status\r\ndata: {"id":"a",\r\ndata: "status":"running"}\r\n\r\n',
  "retry: 1000\revent: reconnect\rdata: {}\r\r",
  "id: 7\ndata: plain ünïcode\n\n",
  "event: end\ndata: {}\n\n",
  "data: never finished",
].join("");

const EXPECTED: SseEvent[] = [
  { event: "status", data: '{"id":"a","status":"queued"}' },
  { event: "status", data: '{"id":"a",\n"status":"running"}' },
  { event: "reconnect", data: "{}", retry: 1000 },
  { event: "message", data: "plain ünïcode", id: "7" },
  { event: "end", data: "{}", id: "7" },
];

describe("readSse", () => {
  it("reads events, comments, CR, LF and CRLF line ends, multi-line data, id and retry", async () => {
    assert.deepEqual(await events([new TextEncoder().encode(TEXT)]), EXPECTED);
  });

  it("gives the same events however the bytes are split", async () => {
    const bytes = new TextEncoder().encode(TEXT);
    for (let cut = 1; cut < bytes.length; cut++) {
      const got = await events([bytes.subarray(0, cut), bytes.subarray(cut)]);
      assert.deepEqual(got, EXPECTED, `split at byte ${cut}`);
    }
    const oneByOne = Array.from(bytes, (b) => Uint8Array.of(b));
    assert.deepEqual(await events(oneByOne), EXPECTED);
  });
});
